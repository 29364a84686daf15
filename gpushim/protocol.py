"""The wire protocol, defined once. The shim's C header shim/gen/ops.h is generated from this module
(`python -m gpushim.protocol --c-header`), and a test checks the generated header and the C codec against it.

Frames: a 4-byte little-endian length, then one msgpack array:

    HELLO     [0, {proto, runtime, pid, program, devices, priority, token}]     client -> server, first frame
    WELCOME   [0, {proto, session, error, message, driver, server}]            server -> client, answer to HELLO
    CALL      [1, seq, op, [args...]]                                          client -> server, wants a REPLY
    REPLY     [2, seq, error, [results...], stdout_bytes|nil, note|nil]       server -> client
    POST      [3, seq, op, [args...]]                                          client -> server, no reply; an error
                                                                               surfaces at the next synchronising call
    FATAL     [4, seq, error, message]                                         server -> client, then the server
                                                                               closes the session (malformed frame)
    CALLBACK  [5, stream, callback_id]                                         server -> client: a stream reached a
                                                                               host function; the client runs it and
                                                                               POSTs CALLBACK_DONE
    STATUS    [6, {token}]                                                     anyone -> supervisor, first frame: the
                                                                               answer is [6, {sessions...}] (or
                                                                               [6, {error, message}] without the
                                                                               server's token)

Bulk data (a bin) is always the last argument, so the shim can send it straight from the caller's buffer.
`note` in a REPLY is a reason a person can act on; the shim prints it once per operation.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

PROTOCOL_VERSION = 1
MAX_FRAME = 1 << 30  # a peer that announces a larger frame is malformed
BULK_CHUNK = 16 << 20  # the shim splits larger copies into frames of at most this many data bytes

HELLO, CALL, REPLY, POST, FATAL, CALLBACK, STATUS = 0, 1, 2, 3, 4, 5, 6
KINDS = {"HELLO": HELLO, "CALL": CALL, "REPLY": REPLY, "POST": POST, "FATAL": FATAL, "CALLBACK": CALLBACK,
         "STATUS": STATUS}

# Stream handles on the wire: a handle below HANDLE_BASE is a legacy default stream, that of the client device
# with that ordinal (0: device 0's; each device has its own, docs/semantics.md). The shim maps cudaStreamLegacy
# (and stream 0 in legacy builds) to the current device's, and cudaStreamPerThread / _ptsz calls to its
# thread's own stream. Server handles are never below this:
HANDLE_BASE = 0x6000_0000


@dataclass(frozen=True)
class Op:
    id: int
    name: str
    args: tuple[str, ...]
    results: tuple[str, ...]
    doc: str


def _op(i: int, name: str, args: str, results: str, doc: str) -> Op:
    return Op(i, name, tuple(args.split()), tuple(results.split()), doc)


OPS: tuple[Op, ...] = (
    # devices
    _op(1, "DEVICE_COUNT", "", "count", "number of devices this session may use"),
    _op(2, "DEVICE_PROPS", "dev", "props", "map of cudaDeviceProp field name -> value (the shim lays it out)"),
    _op(3, "DEVICE_ATTR", "attr dev", "value", "cudaDeviceGetAttribute"),
    _op(4, "DEVICE_SYNC", "dev", "", "wait for all work of this session on dev"),
    _op(5, "DEVICE_RESET", "dev", "", "free everything this session holds on dev"),
    _op(6, "DRIVER_VERSION", "", "version", "driver API version the client sees (adapted)"),
    _op(7, "MEM_INFO", "dev", "free total", "cudaMemGetInfo"),
    _op(8, "STREAM_PRIORITY_RANGE", "dev", "least greatest", "cudaDeviceGetStreamPriorityRange"),
    _op(9, "DEVICE_PCI_BUS_ID", "dev", "bus_id", "cudaDeviceGetPCIBusId"),
    _op(10, "DEVICE_BY_PCI_BUS_ID", "bus_id", "dev", "cudaDeviceGetByPCIBusId"),
    _op(11, "CAN_ACCESS_PEER", "dev peer", "can", "cudaDeviceCanAccessPeer"),
    _op(12, "SET_DEVICE_FLAGS", "dev flags", "", "cudaSetDeviceFlags"),
    _op(13, "GET_DEVICE_FLAGS", "dev", "flags", "cudaGetDeviceFlags"),
    # memory
    _op(20, "MALLOC", "dev size", "ptr", "cudaMalloc"),
    _op(21, "MALLOC_PITCH", "dev width height", "ptr pitch", "cudaMallocPitch"),
    _op(22, "FREE", "ptr", "", "cudaFree"),
    _op(23, "MEMCPY_H2D", "dst stream data", "", "host data to device memory, in stream order"),
    _op(24, "MEMCPY_D2H", "src nbytes stream", "data", "device memory to the host"),
    _op(25, "MEMCPY_D2D", "dst src nbytes stream", "", "device to device"),
    _op(26, "MEMCPY2D_H2D", "dst dpitch width height stream data", "", "packed rows to pitched device memory"),
    _op(27, "MEMCPY2D_D2H", "src spitch width height stream", "data", "pitched device memory to packed rows"),
    _op(28, "MEMCPY2D_D2D", "dst dpitch src spitch width height stream", "", "pitched device to device"),
    _op(29, "MEMSET", "dst value nbytes stream", "", "cudaMemset(Async)"),
    _op(30, "MEMSET2D", "dst pitch value width height stream", "", "cudaMemset2D(Async)"),
    _op(31, "POINTER_INFO", "ptr", "kind dev base size",
        "what the server knows of a pointer (kind 0: none, 2: device)"),
    _op(32, "HOST_MAP", "shm size", "", "map the client's shared pinned memory; its memfd travels with the frame "
        "(SCM_RIGHTS, Unix sockets only)"),
    _op(33, "HOST_UNMAP", "shm", "", "forget a shared pinned memory mapping"),
    _op(34, "MEMCPY_H2D_SHM", "dst stream shm offset nbytes", "", "host to device from shared pinned memory, "
        "read when the stream reaches the copy (no data on the wire)"),
    _op(38, "MALLOC_MANAGED", "dev size", "ptr pid fd base", "cudaMallocManaged on one host: the allocation "
        "lies in device memory the client maps at the same address, from the server's file /proc/pid/fd/fd "
        "(offset ptr - base)"),
    _op(37, "FREE_ASYNC", "ptr stream", "", "cudaFreeAsync: the allocation is freed when the stream reaches it"),
    _op(14, "DEVICE_LIMIT", "dev limit value set", "value", "cudaDeviceGetLimit (set 0) / cudaDeviceSetLimit (set 1)"),
    _op(36, "MEMCPY_H2D_STAGED", "dst stream shm offset nbytes", "", "host to device from the client's staging "
        "ring: the server has taken the data when it replies, so the slot can be refilled"),
    _op(39, "MEMCPY_PEER", "dst dst_dev src src_dev nbytes dev", "", "cudaMemcpyPeer: device to device across "
        "devices, serialised with all pending and later work of the current (dev), source and destination devices"),
    _op(35, "MEMCPY_D2H_SHM", "src stream shm offset nbytes", "", "device to shared pinned memory, written when "
        "the stream reaches the copy"),
    # streams
    _op(40, "STREAM_CREATE", "dev flags priority", "stream", "cudaStreamCreateWithPriority"),
    _op(41, "STREAM_DESTROY", "stream", "", "cudaStreamDestroy (pending work still completes)"),
    _op(42, "STREAM_SYNC", "stream", "", "cudaStreamSynchronize"),
    _op(43, "STREAM_QUERY", "stream", "", "cudaStreamQuery: error 600 while work is pending"),
    _op(44, "STREAM_WAIT_EVENT", "stream event flags", "", "cudaStreamWaitEvent"),
    _op(45, "STREAM_GET_PRIORITY", "stream", "priority", "cudaStreamGetPriority"),
    _op(46, "STREAM_GET_FLAGS", "stream", "flags", "cudaStreamGetFlags"),
    _op(47, "STREAM_HOST_FUNC", "stream callback_id", "", "run client callback_id when the stream reaches it"),
    _op(48, "CALLBACK_DONE", "callback_id", "", "the client finished running a host function"),
    # events
    _op(50, "EVENT_CREATE", "dev flags", "event", "cudaEventCreateWithFlags"),
    _op(51, "EVENT_RECORD", "event stream flags", "", "cudaEventRecord(WithFlags)"),
    _op(52, "EVENT_SYNC", "event", "", "cudaEventSynchronize"),
    _op(53, "EVENT_QUERY", "event", "", "cudaEventQuery: error 600 while pending"),
    _op(54, "EVENT_ELAPSED", "start end", "ms", "cudaEventElapsedTime"),
    _op(55, "EVENT_DESTROY", "event", "", "cudaEventDestroy"),
    # modules and kernels
    _op(60, "MODULE_QUERY", "hash", "known", "does the server hold the fatbin with this SHA-256"),
    _op(61, "MODULE_LOAD", "hash fatbin", "", "upload a module image, keyed by its SHA-256 (the server checks it): "
        "a fatbin, or from the driver face a cubin or PTX text"),
    _op(62, "FUNC_INFO", "dev hash name", "params param_bytes attrs", "parameter layout [[offset,size],...] and "
        "cudaFuncAttributes fields of a kernel"),
    _op(63, "LAUNCH", "dev hash name grid block shared stream params", "", "launch a kernel with packed params"),
    _op(140, "LAUNCH_EX", "dev hash name grid block shared stream attrs params", "", "cuLaunchKernelEx / "
        "cudaLaunchKernelEx: LAUNCH with launch attributes, 4 integers each (gpushim/backends/launch_attrs.py); "
        "the shim sends LAUNCH when a launch has none"),
    _op(141, "TENSOR_MAP_ENCODE", "dev fields", "tensormap", "cuTensorMapEncodeTiled: the 128-byte TMA "
        "descriptor the device's driver encodes from [dtype, rank, address, dims, strides, box, element strides, "
        "interleave, swizzle, l2 promotion, oob fill] (gpushim/backends/tensormap.py)"),
    _op(142, "TENSOR_MAP_REPLACE_ADDRESS", "dev address tensormap", "tensormap", "cuTensorMapReplaceAddress: "
        "the descriptor with its global address replaced, by the device's driver"),
    _op(64, "SYMBOL_INFO", "dev hash name", "ptr size", "device address and size of a module variable"),
    _op(65, "FUNC_SET_ATTR", "dev hash name attr value", "", "cudaFuncSetAttribute"),
    # session
    _op(70, "SESSION_INFO", "", "info", "what this session holds (for tests and status)"),
    # the driver face (libcuda.so.1) beyond the runtime's operations
    _op(80, "LINK_PTX", "count data", "image", "cuLinkComplete: link count PTX modules (NUL-separated) into one "
        "image (MODULE_LOAD takes a fat binary, a cubin or PTX)"),
    _op(81, "MEMSET_WIDE", "dst pitch value width height elem stream", "", "cuMemsetD16/D32 (and 2D): width "
        "elements of elem (2 or 4) bytes per row, height rows pitch bytes apart"),
    _op(82, "STREAM_WAIT_VALUE", "stream addr value cmp width", "", "cuStreamWaitValue32/64: the stream waits "
        "until the width-byte value at addr compares (0 GEQ, 1 EQ, 2 AND, 3 NOR) with value"),
    # virtual memory management of the driver face (gpushim/server/ops_vmm.py); sizes, addresses and offsets are
    # multiples of the allocation granularity (2 MiB)
    _op(83, "VMM_RESERVE", "dev size alignment addr", "ptr", "cuMemAddressReserve in dev's address space (addr: "
        "the requested start, 0 for any)"),
    _op(84, "VMM_FREE", "what obj size", "", "what 0: cuMemAddressFree of the whole reservation at obj (size: "
        "its size); what 1: cuMemRelease of the handle obj (size 0; the memory lives on while mapped)"),
    _op(85, "VMM_CREATE", "dev size", "handle", "cuMemCreate: size bytes of dev's physical memory"),
    _op(87, "VMM_MAP", "ptr size offset handle", "", "cuMemMap: the handle's bytes from offset at ptr"),
    _op(88, "VMM_UNMAP", "ptr size", "", "cuMemUnmap of whole mappings"),
    _op(89, "VMM_SET_ACCESS", "ptr size dev flags", "", "cuMemSetAccess of whole mappings for dev (flags: "
        "CUmemAccess_flags)"),
    _op(145, "VMM_CREATE_SHAREABLE", "dev size types", "handle", "cuMemCreate with requestedHandleTypes (types; "
        "bit 1: a POSIX file descriptor): memory that cuMemExportToShareableHandle can hand out"),
    _op(146, "VMM_RETAIN", "ptr", "handle dev size types", "cuMemRetainAllocationHandle: the handle mapped at ptr, "
        "one more reference (cuMemRelease gives it back), with the allocation's device, size and handle types"),
    _op(147, "VMM_GET_ACCESS", "ptr dev", "flags", "cuMemGetAccess: dev's CUmemAccess_flags at mapped ptr"),
    _op(148, "VMM_EXPORT", "handle", "pid fd", "cuMemExportToShareableHandle (POSIX fd): the server process and "
        "its descriptor of the allocation's file, which a client on this host opens through /proc"),
    _op(149, "VMM_IMPORT", "dev", "handle size", "cuMemImportFromShareableHandle (POSIX fd): the descriptor comes "
        "with the frame (SCM_RIGHTS); the allocation becomes one of dev's, charged to this session too"),
    _op(86, "MODULE_UNLOAD", "hash", "", "cuModuleUnload of the client's last handle to a module: the session "
        "releases it (its variables too) once its devices are idle; a later use loads it again"),
    # the client's runtime (issue 13)
    _op(90, "RUNTIME_VERSION", "runtime", "", "the client's CUDA runtime version learned after the handshake (a "
        "static runtime's driver look-ups carry it): recorded for status and the log; the policy stays"),
    # textures and surfaces (descriptors in device memory: gpushim/ptx/texdesc.py)
    _op(100, "TEX_CREATE", "dev surface fields", "handle", "cudaCreateTextureObject / cudaCreateSurfaceObject: "
        "fields are texdesc.Desc's from restype on (border colours as f32 bits); the handle is the descriptor's "
        "device address"),
    _op(101, "TEX_DESTROY", "handle", "", "cudaDestroyTextureObject / cudaDestroySurfaceObject"),
    # graphs (gpushim/server/ops_graph.py)
    _op(120, "GRAPH_UPLOAD", "graph calls", "", "keep a segment of an executable graph: calls is a msgpack array "
        "of [op, args] run in order at each launch, their stream argument replaced by the launch stream, a "
        "MEMCPY_H2D/MEMCPY2D_H2D's data by that many bytes of the launch's data, a STREAM_HOST_FUNC's "
        "callback_id by the launch's next callback id"),
    _op(121, "GRAPH_LAUNCH", "graph stream event callbacks data", "", "run an uploaded segment on stream (one "
        "frame per launch), then record event there (0: none)"),
    _op(122, "GRAPH_FREE", "graph", "", "forget an uploaded segment"),
    _op(143, "GRAPH_DEVICE", "handle graph", "", "cudaGraphInstantiateFlagDeviceLaunch: the uploaded segment graph "
        "(kernels, memsets, device-to-device copies) is what a kernel's cudaGraphLaunch(handle, ...) runs"),
    _op(102, "GRAPH_COND", "handle kind bodies stream", "", "a conditional graph node, only inside an uploaded "
        "segment: when the stream reaches it, the 4-byte value at device address handle chooses which of bodies "
        "(a msgpack array of call arrays, each like GRAPH_UPLOAD's) runs: kind 0 IF, 1 WHILE, 2 SWITCH"),
    # CUDA IPC between sessions of one server (gpushim/server/ops_ipc.py)
    _op(123, "IPC_GET_MEM_HANDLE", "ptr", "ipc_handle", "cudaIpcGetMemHandle: a 64-byte handle naming the allocation"),
    _op(124, "IPC_OPEN_MEM_HANDLE", "dev ipc_handle flags", "ptr size", "cudaIpcOpenMemHandle in another session: "
        "the allocation, mapped into this session's device memory"),
    _op(125, "IPC_CLOSE_MEM_HANDLE", "ptr", "", "cudaIpcCloseMemHandle"),
    _op(126, "IPC_GET_EVENT_HANDLE", "event", "ipc_handle", "cudaIpcGetEventHandle (an event made with "
        "cudaEventInterprocess | cudaEventDisableTiming)"),
    _op(127, "IPC_OPEN_EVENT_HANDLE", "dev ipc_handle", "event", "cudaIpcOpenEventHandle in another session: an event "
        "of this session sharing the exported event's state"),
    # peer access (gpushim/server/ops_devices.py)
    _op(128, "PEER_ACCESS", "dev peer set", "", "cudaDeviceEnablePeerAccess (set 1) / DisablePeerAccess (set 0): "
        "whether kernels on dev may access peer's memory"),
)

OPS_BY_NAME = {op.name: op for op in OPS}
OPS_BY_ID = {op.id: op for op in OPS}


# -- the schema: every field of every frame, by type and range --------------------------------------------
# gpushim/server/validate.py checks each frame against these before anything reads it; the shim writes
# exactly these types (gs_w_int for the signed fields, gs_w_uint for the rest).
I32 = (-(1 << 31), (1 << 31) - 1)
U32 = (0, (1 << 32) - 1)
U64 = (0, (1 << 64) - 1)
MAX_STR = 4096  # strings in a handshake or status request


@dataclass(frozen=True)
class Field:
    """One value: its type, and for an int its range, for str/bytes/list its length range. A list holds
    ints in item_range. nullable: nil is accepted (and means "not given")."""
    type: type
    lo: int = 0
    hi: int = U64[1]
    item_range: tuple[int, int] = U32
    nullable: bool = False


def _int(r: tuple[int, int]) -> Field:
    return Field(int, r[0], r[1])


# Operation arguments by name; an argument not listed is an unsigned 64-bit integer (pointers, sizes,
# handles, callback ids).
ARG_SPECS: dict[str, Field] = {
    "dev": _int(I32), "peer": _int(I32), "attr": _int(I32), "limit": _int(I32), "priority": _int(I32),
    "flags": _int(U32), "shared": _int(U32), "set": Field(int, 0, 1),
    "data": Field(bytes, 0, MAX_FRAME), "fatbin": Field(bytes, 1, MAX_FRAME), "hash": Field(bytes, 32, 32),
    "params": Field(bytes, 0, 1 << 20), "bus_id": Field(str, 0, 64), "name": Field(str, 1, 1 << 16),
    "grid": Field(list, 3, 3), "block": Field(list, 3, 3),
    # graphs (ops_graph.py): a segment's packed calls, a launch's host-function ids; IPC handles are 64 bytes
    "calls": Field(bytes, 1, MAX_FRAME), "callbacks": Field(list, 0, 1 << 16, item_range=U64),
    "ipc_handle": Field(bytes, 64, 64),
    "kind": _int(U32), "bodies": Field(bytes, 1, MAX_FRAME),
    # textures (ops_texture.py): the descriptor's fields, texdesc.Desc from restype on
    "fields": Field(list, 21, 21, item_range=U64),
    "types": Field(int, 0, 0xF),  # VMM_CREATE_SHAREABLE: CUmemAllocationHandleType bits
    "what": Field(int, 0, 1),  # VMM_FREE: 0 an address range, 1 an allocation handle
    "runtime": Field(int, 0, 999_999),  # RUNTIME_VERSION: as the HELLO's
    "attrs": Field(list, 4, 4 * 32, item_range=U64),  # LAUNCH_EX: [id, a, b, c] per attribute, at most 32
    "tensormap": Field(bytes, 128, 128),
}
# Where one name means different things in different operations:
OP_ARG_SPECS: dict[tuple[str, str], Field] = {
    ("TENSOR_MAP_ENCODE", "fields"): Field(list, 10, 4 * 5 + 6, item_range=U64),
    ("MEMSET", "value"): _int(I32), ("MEMSET2D", "value"): _int(I32), ("FUNC_SET_ATTR", "value"): _int(I32),
}


def arg_spec(op: Op, name: str) -> Field:
    return OP_ARG_SPECS.get((op.name, name)) or ARG_SPECS.get(name) or _int(U64)


# Frames other than CALL/POST are maps; unknown keys are ignored (a newer client may send more), at most
# MAX_MAP_KEYS of them. A HELLO needs only proto; the others default to 0 / "".
MAX_MAP_KEYS = 32
HELLO_FIELDS: dict[str, Field] = {
    "proto": _int(U32), "runtime": Field(int, 0, 999_999), "soname": Field(str, 0, MAX_STR, nullable=True),
    "pid": Field(int, 0, I32[1]), "program": Field(str, 0, MAX_STR, nullable=True),
    "devices": Field(str, 0, MAX_STR, nullable=True), "priority": _int(I32),
    "token": Field(str, 0, MAX_STR, nullable=True), "shim": Field(str, 0, MAX_STR, nullable=True),
}
STATUS_FIELDS: dict[str, Field] = {"token": Field(str, 0, MAX_STR, nullable=True)}
SEQ = _int(U64)
# Before the handshake a peer is unknown: its first frame may be at most this long.
MAX_FIRST_FRAME = 64 << 10


def check_args(op: Op, args: list) -> str | None:
    """Why args do not fit op, or None (see gpushim/server/validate.py)."""
    from gpushim.server.validate import check_args as check

    return check(op, args)


def c_header() -> str:
    """The C view of this module: frame kinds, op ids and limits."""
    lines = [
        "/* Generated from gpushim/protocol.py by `python -m gpushim.protocol --c-header`. Do not edit. */",
        "#ifndef GS_OPS_H",
        "#define GS_OPS_H",
        f"#define GS_PROTOCOL_VERSION {PROTOCOL_VERSION}",
        f"#define GS_MAX_FRAME {MAX_FRAME}u",
        f"#define GS_BULK_CHUNK {BULK_CHUNK}u",
        f"#define GS_HANDLE_BASE {HANDLE_BASE:#x}u",
    ]
    lines += [f"#define GS_MSG_{name} {value}" for name, value in KINDS.items()]
    lines.append("enum gs_op {")
    lines += [f"    GS_OP_{op.name} = {op.id}, /* ({', '.join(op.args)}) -> ({', '.join(op.results)}) */" for op in OPS]
    lines.append("};")
    lines.append("static const char *const gs_op_names[] = {")
    lines += [f'    [{op.id}] = "{op.name}",' for op in OPS]
    lines.append("};")
    lines.append(f"#define GS_OP_MAX {max(op.id for op in OPS)}")
    lines.append("#endif")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--c-header"]:
        sys.stdout.write(c_header())
    else:
        for op in OPS:
            print(f"{op.id:3d} {op.name:24s} ({', '.join(op.args)}) -> ({', '.join(op.results)})  {op.doc}")
