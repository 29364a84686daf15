"""CUDA dynamic parallelism on the interpreter: the device runtime (libcudadevrt) functions nvcc's PTX calls.

A kernel launch in device code compiles to calls of `.extern .func`s that libcudadevrt defines (only as cubins,
so the PTX engine never sees their bodies): `__cudaCDP2GetParameterBufferV2(func, grid, block, shared)` returns
a buffer the thread writes the child's arguments into, `__cudaCDP2LaunchDeviceV2(buffer, stream)` launches.
The linker turns calls of the functions in HANDLERS into pseudo-instructions `@name` (like vprintf); any other
device runtime function is refused when the module loads, naming it.

Ordering (CUDA Programming Guide, "CUDA Dynamic Parallelism", CUDA 12+ semantics, no device-side
cudaDeviceSynchronize): a grid is complete only once every grid it launched is complete; launches into one
stream (a block's NULL stream, a created stream) run in order; `cudaStreamTailLaunch` launches run after the
launching grid and all its other work, in the order they were made; `cudaStreamFireAndForget` launches run
independently of the launching grid. A parent cannot wait for its children, so running every child after its
parent grid, in launch order, then the tail launches, is one of the orders CUDA allows, and the one used here
(depth first: a child's own children run before the next child). A child sees all of its parent's global
writes (CUDA guarantees those made before the launch).

Limits: a grid at nesting depth MAX_DEPTH - 1 cannot launch (cudaErrorLaunchMaxDepthExceeded); at most the
pending launch count (cudaLimitDevRuntimePendingLaunchCount, default 2048) launches may be outstanding
(cudaErrorLaunchPendingCountExceeded). A failed launch returns the error to the launching thread and sets its
last error (cudaGetLastError in device code); a fault in a child fails the host's launch with that fault.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.memspaces import split_generic
from gpushim.ptx.nodes import Instr, Plist, Sym
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_sys import _slot_reader, _slot_writer

MAX_DEPTH = 24  # nesting depth of grids the hardware allows (Programming Guide, "Nesting and Synchronization Depth")
PENDING_LIMIT = 2048  # cudaLimitDevRuntimePendingLaunchCount's default
STREAM_TAIL_LAUNCH = 3  # cudaStreamTailLaunch (cuda_device_runtime_api.h)
STREAM_FIRE_AND_FORGET = 4  # cudaStreamFireAndForget
STREAM_NON_BLOCKING = 1  # cudaStreamNonBlocking, the only flag device-side streams take
STREAM_BASE = 0x5EED_0000  # handles of streams created in device code
EVENT_BASE = 0xE7E7_0000  # ... and of events
EVENT_DISABLE_TIMING = 2  # cudaEventDisableTiming, which device-side events must be created with
PARAM_KIND = "devrt_param"  # device allocations holding launch parameter buffers

# cudaError_t values the device runtime returns
E_INVALID_VALUE = 1
E_MEMORY_ALLOCATION = 2
E_INVALID_CONFIGURATION = 9
E_LAUNCH_MAX_DEPTH = 65  # cudaErrorLaunchMaxDepthExceeded
E_LAUNCH_PENDING_COUNT = 69  # cudaErrorLaunchPendingCountExceeded
E_INVALID_DEVICE_FUNCTION = 98
E_INVALID_RESOURCE_HANDLE = 400
E_NOT_SUPPORTED = 801

_limits: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_devices: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# device memory -> {executable graph handle: (PtxModule of its kernels or None, [Pending], the backend's)}: the graphs
# instantiated with cudaGraphInstantiateFlagDeviceLaunch (gpushim/server/ops_graph.py)
_graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# memory -> [(registered graph, items)] tail-launched by kernels of a host graph: they run after that graph
_deferred: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_local_defer = threading.local()  # .on: the running kernel belongs to a graph (set by the emulator backend)
GRAPH_TAIL_LAUNCH = 0x0100000000000000  # cudaStreamGraphTailLaunch (cuda_device_runtime_api.h)
GRAPH_FIRE_AND_FORGET = (0x0200000000000000, 0x0300000000000000)  # ... FireAndForget, FireAndForgetAsSibling


def set_device_graph(memory, handle: int, graph: tuple | None) -> None:
    """A device-launchable graph's work on memory's device, or None to forget it."""
    graphs = _graphs.setdefault(memory, {})
    if graph is None:
        graphs.pop(handle, None)
    else:
        graphs[handle] = graph


def set_pending_limit(memory, n: int) -> None:
    """cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount) for one device memory."""
    _limits[memory] = int(n)


def set_device(memory, ordinal: int, count: int) -> None:
    """The device a memory belongs to and how many the session has (cudaGetDevice/GetDeviceCount in device
    code); without it, device code that asks is told cudaErrorNotSupported."""
    _devices[memory] = (int(ordinal), int(count))


@dataclass
class Pending:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    params: bytes
    op: tuple = ()  # instead of a kernel: ("copy", dst, src, n) or ("set", dst, byte, n) (cudaMemcpyAsync...)


@dataclass
class Tree:
    """One host launch and every grid it launches, directly or not."""

    mod: object  # the PtxModule
    memory: object
    symbols: dict
    output: object
    limit: int
    pending: int = 0
    buffers: dict[int, tuple] = field(default_factory=dict)  # parameter buffer -> (kernel, grid, block, shared, n)
    handles: int = 0  # streams and events made in device code
    count: int = 0
    blocks: int = 0


@dataclass
class Grid:
    tree: Tree
    depth: int
    launches: list[Pending] = field(default_factory=list)  # NULL, created and fire-and-forget streams
    tails: list[Pending] = field(default_factory=list)
    errors: dict[int, int] = field(default_factory=dict)  # thread of the grid -> its last error
    streams: set[int] = field(default_factory=set)
    events: set[int] = field(default_factory=set)


_local = threading.local()


def _grid() -> Grid:
    g = getattr(_local, "grid", None)
    if g is None:  # a kernel run outside launch_tree (cannot happen through PtxModule.launch)
        raise CudaError(Err.NOT_SUPPORTED, "device runtime call outside a dynamic-parallelism launch")
    return g


def uses_devrt(prog) -> bool:
    return any(ins.op in HANDLERS for ins in prog.code)


def launch_tree(mod, kernel: str, grid, block, shared: int, params: bytes, memory, symbols, output):
    """Run a host launch of a kernel that launches kernels, and everything it launches."""
    from gpushim.ptx.module import LaunchStats

    own = getattr(memory, "own", memory)  # a peer-access view (backends/emulator/peers.py): its own device's
    tree = Tree(mod, memory, symbols, output, _limits.get(own, PENDING_LIMIT))
    t0 = time.perf_counter()
    try:
        _run(tree, 0, Pending(kernel, tuple(grid), tuple(block), shared, bytes(params)))
    finally:
        for addr in list(tree.buffers):
            memory.free(addr)
        tree.buffers.clear()
    return LaunchStats(tree.count, time.perf_counter() - t0, tree.blocks)


def _run(tree: Tree, depth: int, p: Pending) -> None:
    if p.op:
        _memory_op(tree, p.op)
        return
    g = Grid(tree, depth)
    outer = getattr(_local, "grid", None)
    _local.grid = g
    try:
        st = tree.mod._launch_grid(p.kernel, p.grid, p.block, p.shared, p.params, tree.memory, tree.symbols,
                                   tree.output)
    finally:
        _local.grid = outer
    tree.count += st.thread_instructions
    tree.blocks += st.blocks
    for child in g.launches + g.tails:
        _run(tree, depth + 1, child)
        if not child.op:  # a launch is outstanding until it completes
            tree.pending -= 1


def _memory_op(tree: Tree, op: tuple) -> None:
    """A device-side cudaMemcpyAsync/cudaMemsetAsync, in its stream's order; bad addresses fault like the copy
    kernels the device runtime runs for them."""
    what, dst, src, n = op
    try:
        if what == "copy":
            tree.memory.write(dst, bytes(tree.memory.read(src, n)))
        else:
            tree.memory.fill(dst, src, n)
    except CudaError as e:
        raise CudaError(Err.ILLEGAL_ADDRESS, f"cudaMem{'cpy' if what == 'copy' else 'set'}Async in device code: "
                        f"{e.message}") from None


# -- helpers of the pseudo-instructions ---------------------------------------------------------------------
def _threads(st, idx) -> tuple[int, np.ndarray]:
    n = st.n if idx is None else idx.size
    return n, (st.thread if idx is None else idx)


def _gid(st, t: int) -> int:
    """The thread's index in its grid."""
    return st.first_block * st.geo.tpb + t


def _dim_reader(ctx: Ctx, op):
    """Reader of a dim3 argument (a 12-byte parameter slot) as three u32 arrays."""
    if not isinstance(op, Sym):
        raise ctx.error("dim3 argument is not a parameter slot")
    readers = [_slot_reader(ctx, Sym(op.name, op.offset + 4 * k), 4) for k in range(3)]

    def rd(st, idx, n):
        return [np.broadcast_to(r(st, idx), (n,)) for r in readers]

    return rd


def _entries(ctx: Ctx) -> dict[int, tuple[str, int]]:
    """Function "address" -> (kernel, parameter bytes) for every kernel of the module."""
    from gpushim.ptx.link import align_up, function_address

    out = {}
    for f in ctx.mod.functions.values():
        if f.kind != "entry" or not f.defined:
            continue
        off = 0
        for prm in f.params:
            off = align_up(off, prm.align) + prm.size
        out[function_address(ctx.mod, f.name)] = (f.name, off)
    return out


def _store(st, t: int, addr: int, data: bytes) -> bool:
    """Writes data at a generic address for batch thread t; False when it is no writable memory."""
    sp, a = split_generic(np.uint64(addr))
    a = int(a)
    n = len(data)
    if sp == "global":
        al = st.mem.find(a)
        if al is None or a + n > al.addr + al.size:
            return False
        st.mem.write(a, data)
    elif sp == "local":
        if a + n > st.lo_size:
            return False
        base = int(st.lo_base[t])
        st.loc[base + a : base + a + n] = np.frombuffer(data, np.uint8)
    elif sp == "shared":
        if a + n > st.sh_size:
            return False
        base = int(st.sh_base[t])
        st.shm[base + a : base + a + n] = np.frombuffer(data, np.uint8)
    else:
        return False
    return True


def _param_buffer(st, g: Grid, kernel: str, grid, block, shared: int, nbytes: int) -> int:
    try:
        addr = st.mem.alloc(max(nbytes, 16), kind=PARAM_KIND)
    except CudaError:  # out of device memory: NULL, as the device runtime returns
        return 0
    g.tree.buffers[addr] = (kernel, grid, block, shared, nbytes)
    return addr


def _stream_ok(g: Grid, stream: int) -> bool:
    return stream in (0, STREAM_TAIL_LAUNCH, STREAM_FIRE_AND_FORGET) or stream in g.streams


def _launch(st, g: Grid, buf: int, stream: int, config: tuple | None = None) -> int:
    """One device-side launch of the parameter buffer buf into stream; the cudaError_t it returns. config:
    (kernel, grid, block, shared, parameter bytes) of cudaLaunchDevice, whose buffer came from
    cudaGetParameterBuffer, which knows no kernel."""
    tree = g.tree
    rec = tree.buffers.get(buf)
    if rec is None:
        return E_INVALID_VALUE  # not a buffer cudaGetParameterBuffer returned, or one already launched
    if config is not None:
        if config[0] is None:
            return E_INVALID_DEVICE_FUNCTION
        if config[4] > rec[4]:
            return E_INVALID_VALUE  # the kernel's parameters do not fit the buffer
        rec = config
    kernel, grid, block, shared, nbytes = rec
    if not _stream_ok(g, stream):
        return E_INVALID_RESOURCE_HANDLE
    if g.depth + 1 >= MAX_DEPTH:
        return E_LAUNCH_MAX_DEPTH
    if tree.pending >= tree.limit:
        return E_LAUNCH_PENDING_COUNT
    if kernel in tree.mod.unsupported:  # a GPU would run it: fail the host's launch, naming why
        raise CudaError(Err.NOT_SUPPORTED, f"kernel {kernel} launched from device code: {tree.mod.unsupported[kernel]}")
    params = bytes(st.mem.read(buf, nbytes)) if nbytes else b""
    try:  # the configuration is checked at launch, as the device runtime does
        tree.mod._plan(kernel, grid, block, shared, params)
    except CudaError as e:
        return int(e.code)
    p = Pending(kernel, grid, block, shared, params)
    (g.tails if stream == STREAM_TAIL_LAUNCH else g.launches).append(p)
    tree.pending += 1
    del tree.buffers[buf]
    st.mem.free(buf)
    return 0


def _finish(st, g: Grid, threads, rc: np.ndarray, i: int, code: int) -> None:
    rc[i] = code
    if code:
        g.errors[_gid(st, int(threads[i]))] = code


# -- the device runtime functions --------------------------------------------------------------------------
def compile_get_parameter_buffer_v2(ctx: Ctx, ins: Instr):
    rets, args = ins.args
    assert isinstance(rets, Plist) and isinstance(args, Plist)
    rfunc = _slot_reader(ctx, args.items[0], 8)
    rgrid, rblock = _dim_reader(ctx, args.items[1]), _dim_reader(ctx, args.items[2])
    rshared = _slot_reader(ctx, args.items[3], 4)
    wret = _slot_writer(ctx, rets.items[0], 8) if rets.items else None
    entries = _entries(ctx)

    def get_parameter_buffer(st, idx):
        g = _grid()
        n, threads = _threads(st, idx)
        funcs = np.broadcast_to(rfunc(st, idx), (n,))
        gx, gy, gz = rgrid(st, idx, n)
        bx, by, bz = rblock(st, idx, n)
        shared = np.broadcast_to(rshared(st, idx), (n,))
        out = np.zeros(n, np.uint64)
        for i in range(n):
            e = entries.get(int(funcs[i]))
            if e is None:  # not the address of a kernel: NULL, as the device runtime returns
                g.errors[_gid(st, int(threads[i]))] = E_INVALID_DEVICE_FUNCTION
                continue
            out[i] = _param_buffer(st, g, e[0], (int(gx[i]), int(gy[i]), int(gz[i])),
                                   (int(bx[i]), int(by[i]), int(bz[i])), int(shared[i]), e[1])
        if wret is not None:
            wret(st, idx, out)

    return get_parameter_buffer


def _status_call(ctx: Ctx, ins: Instr, slots: list[tuple[int, int | str]], body):
    """A device runtime function that returns a cudaError_t, run thread by thread: body(st, grid, thread, *args)
    gives the thread's code; args are read from the call's parameter slots (index, size in bytes or "dim3",
    which arrives as a tuple of three ints). A failure also becomes the thread's last error."""
    rets, args = ins.args
    readers = [_dim_reader(ctx, args.items[k]) if size == "dim3" else _slot_reader(ctx, args.items[k], size)
               for k, size in slots]
    dims = [size == "dim3" for _, size in slots]
    wret = _slot_writer(ctx, rets.items[0], 4) if rets.items else None

    def call(st, idx):
        g = _grid()
        n, threads = _threads(st, idx)
        cols = [r(st, idx, n) if d else np.broadcast_to(r(st, idx), (n,)) for r, d in zip(readers, dims, strict=True)]
        rc = np.zeros(n, np.uint32)
        for i in range(n):
            vals = [tuple(int(a[i]) for a in c) if d else int(c[i]) for c, d in zip(cols, dims, strict=True)]
            _finish(st, g, threads, rc, i, body(st, g, int(threads[i]), *vals))
        if wret is not None:
            wret(st, idx, rc)

    return call


def compile_launch_device_v2(ctx: Ctx, ins: Instr):
    """cudaLaunchDeviceV2(buffer, stream): what <<<>>> in device code compiles to."""
    return _status_call(ctx, ins, [(0, 8), (1, 8)], lambda st, g, t, buf, stream: _launch(st, g, buf, stream))


def compile_get_parameter_buffer(ctx: Ctx, ins: Instr):
    """cudaGetParameterBuffer(alignment, size): a buffer for a later cudaLaunchDevice."""
    rets, args = ins.args
    ralign = _slot_reader(ctx, args.items[0], 8)
    rsize = _slot_reader(ctx, args.items[1], 8)
    wret = _slot_writer(ctx, rets.items[0], 8) if rets.items else None

    def get_parameter_buffer(st, idx):
        g = _grid()
        n, _ = _threads(st, idx)
        aligns = np.broadcast_to(ralign(st, idx), (n,))
        sizes = np.broadcast_to(rsize(st, idx), (n,))
        out = np.zeros(n, np.uint64)
        for i in range(n):
            if int(aligns[i]) <= 256:  # device allocations are 256-byte aligned; larger: NULL
                out[i] = _param_buffer(st, g, None, None, None, 0, int(sizes[i]))
        if wret is not None:
            wret(st, idx, out)

    return get_parameter_buffer


def compile_launch_device(ctx: Ctx, ins: Instr):
    """cudaLaunchDevice(func, buffer, grid, block, shared, stream)."""
    entries = _entries(ctx)

    def launch_device(st, g, t, func, buf, grid, block, shared, stream):
        name, nbytes = entries.get(func, (None, 0))
        return _launch(st, g, buf, stream, (name, grid, block, shared, nbytes))

    return _status_call(ctx, ins, [(0, 8), (1, 8), (2, "dim3"), (3, "dim3"), (4, 4), (5, 8)], launch_device)


def _compile_last_error(reset: bool):
    def compile_last_error(ctx: Ctx, ins: Instr):
        rets, _ = ins.args
        wret = _slot_writer(ctx, rets.items[0], 4) if rets.items else None

        def last_error(st, idx):
            g = _grid()
            n, threads = _threads(st, idx)
            rc = np.zeros(n, np.uint32)
            if g.errors:
                for i in range(n):
                    k = _gid(st, int(threads[i]))
                    rc[i] = g.errors.pop(k, 0) if reset else g.errors.get(k, 0)
            if wret is not None:
                wret(st, idx, rc)

        return last_error

    return compile_last_error


def _new_handle(st, g: Grid, t: int, ptr: int, base: int, live: set[int]) -> int:
    """Stores a new device-side stream or event handle at ptr for thread t: its cudaError_t."""
    g.tree.handles += 1
    h = base + g.tree.handles
    if not _store(st, t, ptr, h.to_bytes(8, "little")):
        return E_INVALID_VALUE
    live.add(h)
    return 0


def compile_stream_create(ctx: Ctx, ins: Instr):
    """cudaStreamCreateWithFlags in device code: device streams must be created non-blocking."""

    def stream_create(st, g, t, ptr, flags):
        if flags != STREAM_NON_BLOCKING:
            return E_INVALID_VALUE
        return _new_handle(st, g, t, ptr, STREAM_BASE, g.streams)

    return _status_call(ctx, ins, [(0, 8), (1, 4)], stream_create)


def compile_stream_destroy(ctx: Ctx, ins: Instr):
    def stream_destroy(st, g, t, s):
        ok = s in g.streams  # work already launched into it still runs
        g.streams.discard(s)
        return 0 if ok else E_INVALID_RESOURCE_HANDLE

    return _status_call(ctx, ins, [(0, 8)], stream_destroy)


def compile_malloc(ctx: Ctx, ins: Instr):
    """cudaMalloc in device code: a block of the device heap (cudaLimitMallocHeapSize), as device malloc()."""
    from gpushim.ptx import heap

    rets, args = ins.args
    rptr = _slot_reader(ctx, args.items[0], 8)
    rsize = _slot_reader(ctx, args.items[1], 8)
    wret = _slot_writer(ctx, rets.items[0], 4) if rets.items else None

    def device_malloc(st, idx):
        g = _grid()
        n, threads = _threads(st, idx)
        ptrs = np.broadcast_to(rptr(st, idx), (n,))
        sizes = np.broadcast_to(rsize(st, idx), (n,))
        blocks = heap.malloc(st.mem, sizes)
        rc = np.zeros(n, np.uint32)
        for i in range(n):
            code = E_MEMORY_ALLOCATION if blocks[i] == 0 and sizes[i] != 0 else 0
            if not _store(st, int(threads[i]), int(ptrs[i]), int(blocks[i]).to_bytes(8, "little")):
                heap.free(st.mem, blocks[i : i + 1])
                code = E_INVALID_VALUE
            _finish(st, g, threads, rc, i, code)
        if wret is not None:
            wret(st, idx, rc)

    return device_malloc


def compile_free(ctx: Ctx, ins: Instr):
    from gpushim.ptx import heap

    rets, args = ins.args
    rp = _slot_reader(ctx, args.items[0], 8)
    wret = _slot_writer(ctx, rets.items[0], 4) if rets.items else None

    def device_free(st, idx):
        n = st.n if idx is None else idx.size
        heap.free(st.mem, np.broadcast_to(rp(st, idx), (n,)))
        if wret is not None:
            wret(st, idx, np.zeros(n, np.uint32))

    return device_free


def _global_address(addr: int) -> int | None:
    sp, a = split_generic(np.uint64(addr))
    return int(a) if sp == "global" else None


def _memory_call(what: str):
    """cudaMemcpyAsync(dst, src, count, kind, stream) / cudaMemsetAsync(dst, value, count, stream) in device
    code: global memory only, queued in the stream like a launch."""

    def compile_memory_call(ctx: Ctx, ins: Instr):
        def memory_call(st, g, t, dst, src, count, *rest):
            kind, stream = rest if what == "copy" else (None, rest[0])
            d = _global_address(dst)
            v = _global_address(src) if what == "copy" else src & 0xFF
            if d is None or v is None or (kind is not None and kind not in (3, 4)):
                return E_INVALID_VALUE  # device code copies global memory only (DeviceToDevice/Default)
            if not _stream_ok(g, stream):
                return E_INVALID_RESOURCE_HANDLE
            if count:
                p = Pending("", (1, 1, 1), (1, 1, 1), 0, b"", (what, d, v, count))
                (g.tails if stream == STREAM_TAIL_LAUNCH else g.launches).append(p)
            return 0

        slots: list[tuple[int, int | str]] = ([(0, 8), (1, 8), (2, 8), (3, 4), (4, 8)] if what == "copy"
                                             else [(0, 8), (1, 4), (2, 8), (3, 8)])
        return _status_call(ctx, ins, slots, memory_call)

    return compile_memory_call


def compile_event_create(ctx: Ctx, ins: Instr):
    """cudaEventCreateWithFlags in device code. Device-side events serve only inter-stream dependencies, so
    they must be created with cudaEventDisableTiming (Programming Guide, dynamic parallelism, "Events")."""

    def event_create(st, g, t, ptr, flags):
        if not flags & EVENT_DISABLE_TIMING:
            return E_INVALID_VALUE
        return _new_handle(st, g, t, ptr, EVENT_BASE, g.events)

    return _status_call(ctx, ins, [(0, 8), (1, 4)], event_create)


def _event_call(what: str):
    """cudaEventRecord(event, stream[, flags]), cudaStreamWaitEvent(stream, event, flags), cudaEventDestroy(event)
    in device code. Work runs in launch order here, so whatever a stream waits for through an event (work
    made earlier) has completed when the work after the wait runs: only the handles are checked."""
    ev_at, stream_at = {"record": (0, 1), "wait": (1, 0), "destroy": (0, None)}[what]

    def event_call(st, g, t, ev, stream=None):
        ok = ev in g.events and (stream is None or _stream_ok(g, stream))
        if ok and what == "destroy":
            g.events.discard(ev)
        return 0 if ok else E_INVALID_RESOURCE_HANDLE

    def compile_event_call(ctx: Ctx, ins: Instr):
        slots: list[tuple[int, int | str]] = [(ev_at, 8)] + ([(stream_at, 8)] if stream_at is not None else [])
        return _status_call(ctx, ins, slots, event_call)

    return compile_event_call


def _compile_device_query(which: int):
    """cudaGetDevice(int *) (which 0) / cudaGetDeviceCount(int *) (which 1) in device code."""

    def device_query(st, g, t, ptr):
        dev = _devices.get(getattr(st.mem, "own", st.mem))
        if dev is None:
            return E_NOT_SUPPORTED
        return 0 if _store(st, t, ptr, int(dev[which]).to_bytes(4, "little")) else E_INVALID_VALUE

    def compile_device_query(ctx: Ctx, ins: Instr):
        return _status_call(ctx, ins, [(0, 8)], device_query)

    return compile_device_query


def _graph_launch(st, g: Grid, handle: int, stream: int) -> int:
    """cudaGraphLaunch(exec, stream) in device code (CUDA Programming Guide, "Device Graph Launch"): the graph's
    kernels, memsets and copies run as grids this one launched, after it (tail launch) or as its children
    (fire and forget), in the graph's order."""
    tree = g.tree
    rec = _graphs.get(getattr(tree.memory, "own", tree.memory), {}).get(handle)
    if rec is None:
        return E_INVALID_VALUE  # not an executable graph instantiated for device launch
    if stream != GRAPH_TAIL_LAUNCH and stream not in GRAPH_FIRE_AND_FORGET:
        return E_INVALID_VALUE
    mod, items = rec[0], rec[1]
    if mod is not None and mod is not tree.mod:
        raise CudaError(Err.NOT_SUPPORTED, "device graph launch of a graph whose kernels are in another module than "
                        "the launching kernel's")
    if g.depth + 1 >= MAX_DEPTH:
        return E_LAUNCH_MAX_DEPTH
    kernels = sum(1 for p in items if not p.op)
    if tree.pending + kernels > tree.limit:
        return E_LAUNCH_PENDING_COUNT
    if stream == GRAPH_TAIL_LAUNCH and getattr(_local_defer, "on", False):
        # CUDA runs a tail launch after the whole graph the kernel belongs to: kept for the end of that graph
        _deferred.setdefault(getattr(tree.memory, "own", tree.memory), []).append(rec)
        return 0
    (g.tails if stream == GRAPH_TAIL_LAUNCH else g.launches).extend(items)
    tree.pending += kernels
    return 0


def set_graph_kernel(on: bool) -> None:
    """Whether the kernels this thread runs next belong to a host-launched graph (tail launches wait)."""
    _local_defer.on = on


def take_deferred(memory) -> list:
    """The device graphs tail-launched on memory's device by kernels of a graph, to run now it is done."""
    return _deferred.pop(memory, [])


def run_graph(memory, symbols, output, rec) -> None:
    """Runs a registered device graph's items (from the host side, after the graph that launched it)."""
    mod, items = rec[0], rec[1]
    tree = Tree(mod, memory, symbols, output, _limits.get(memory, PENDING_LIMIT))
    try:
        for p in items:
            _run(tree, 0, p)
    finally:
        for addr in list(tree.buffers):
            memory.free(addr)
        tree.buffers.clear()


def compile_graph_launch(ctx: Ctx, ins: Instr):
    """cudaGraphLaunch(exec, stream) in device code (a graph instantiated for device launch)."""
    return _status_call(ctx, ins, [(0, 8), (1, 8)],
                        lambda st, g, t, exec_, stream: _graph_launch(st, g, exec_, stream))


HANDLERS = {
    "@cudaGraphLaunch": compile_graph_launch,
    "@__cudaCDP2GetParameterBufferV2": compile_get_parameter_buffer_v2,
    "@__cudaCDP2LaunchDeviceV2": compile_launch_device_v2,
    "@__cudaCDP2LaunchDeviceV2_ptsz": compile_launch_device_v2,
    "@__cudaCDP2GetParameterBuffer": compile_get_parameter_buffer,
    "@__cudaCDP2LaunchDevice": compile_launch_device,
    "@__cudaCDP2LaunchDevice_ptsz": compile_launch_device,
    "@__cudaCDP2GetLastError": _compile_last_error(True),
    "@__cudaCDP2PeekAtLastError": _compile_last_error(False),
    "@__cudaCDP2StreamCreateWithFlags": compile_stream_create,
    "@__cudaCDP2StreamDestroy": compile_stream_destroy,
    "@__cudaCDP2Malloc": compile_malloc,
    "@__cudaCDP2Free": compile_free,
    "@__cudaCDP2MemcpyAsync": _memory_call("copy"),
    "@__cudaCDP2MemcpyAsync_ptsz": _memory_call("copy"),
    "@__cudaCDP2MemsetAsync": _memory_call("set"),
    "@__cudaCDP2MemsetAsync_ptsz": _memory_call("set"),
    "@__cudaCDP2EventCreateWithFlags": compile_event_create,
    "@__cudaCDP2EventRecord": _event_call("record"),
    "@__cudaCDP2EventRecord_ptsz": _event_call("record"),
    "@__cudaCDP2EventRecordWithFlags": _event_call("record"),
    "@__cudaCDP2EventRecordWithFlags_ptsz": _event_call("record"),
    "@__cudaCDP2StreamWaitEvent": _event_call("wait"),
    "@__cudaCDP2StreamWaitEvent_ptsz": _event_call("wait"),
    "@__cudaCDP2EventDestroy": _event_call("destroy"),
    "@__cudaCDP2GetDevice": _compile_device_query(0),
    "@__cudaCDP2GetDeviceCount": _compile_device_query(1),
}
NAMES = frozenset(h[1:] for h in HANDLERS)
PREFIX = "__cudaCDP2"  # every device runtime function nvcc calls
