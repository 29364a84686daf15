"""A stand-in for libcuda behind the real cuda-python bindings, for testing CudaSession's own logic here.

Every call first goes to the real `cuda.bindings.driver` function with the very arguments CudaSession
passed: the bindings convert and type-check them, then fail to load libcuda (no driver on this machine).
A TypeError or ValueError there means gpushim calls cuda-python wrongly, and the test fails. Only then does
the stand-in answer, with results shaped as cuda-python returns them. Device memory is a dict of
bytearrays and work runs at once (host functions too, on a thread of their own, as the driver does), except
that a host function waiting for the client holds its stream until done(). That is enough to exercise
staging, 2D copies, packing, host-function hand-over and bookkeeping. It proves nothing about a real GPU:
the device checks in tools/gpu_check.sh do that.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

from cuda.bindings import driver as real

SUCCESS, INVALID_VALUE, NOT_FOUND, NOT_READY = 0, 1, 500, 600


class FakeDriver:
    def __init__(self, layouts: dict[str, list[tuple[int, int]]] | None = None, param_info: bool = True,
                 mem_ops: bool = True) -> None:
        self.mem_ops = mem_ops
        self.waits: list[tuple[int, int, int]] = []  # (stream, host address, value) of cuStreamWaitValue32
        self.calls: list[str] = []
        self.mem: dict[int, bytearray] = {}
        self.next_addr = 0x7F00_0000_0000
        self.host: dict[int, ctypes.Array] = {}
        self.streams: dict[int, int] = {}  # handle -> priority
        self.busy: dict[int, int] = {}  # stream handle -> host functions still running
        self.next_handle = 0x1000
        self.layouts = layouts or {}
        self.param_info = param_info
        self.launches: list[dict[str, Any]] = []
        self.tensor_maps: list[tuple] = []  # the arguments of each cuTensorMapEncodeTiled
        self.symbols = {"counter": 4}
        self.threads: list[threading.Thread] = []
        self.current_ctx = 0
        self.unloaded: list[int] = []  # modules given to cuModuleUnload
        self.physical: dict[int, bytearray] = {}  # cuMemCreate handle -> its bytes
        self.created: list[tuple[int, int]] = []  # (device, size) of each cuMemCreate
        self.exported: list[tuple[int, int]] = []  # (handle, handle type) of each cuMemExportToShareableHandle
        self.func_attrs: list[tuple[str, int, int]] = []  # (kernel, attribute, value) of each cuFuncSetAttribute
        self.access: list[tuple[int, int, int, int]] = []  # (ptr, size, device, flags) of each access descriptor

    # -- plumbing ----------------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        target = getattr(real, name)
        if not callable(target) or isinstance(target, type) or not name.startswith("cu"):
            return target
        impl = getattr(type(self), "_" + name, None)

        def call(*args: Any) -> Any:
            self.calls.append(name)
            try:
                target(*args)
            except (TypeError, ValueError, OverflowError):
                raise
            except Exception as e:  # the bindings accepted the arguments and then found no libcuda
                if "driver" not in str(e).lower() and "libcuda" not in str(e):
                    raise
            if impl is None:
                raise NotImplementedError(f"the fake driver has no {name}")
            return impl(self, *args)

        return call

    def _handle(self) -> int:
        self.next_handle += 0x10
        return self.next_handle

    def _find(self, addr: int, n: int) -> tuple[bytearray, int]:
        for base, buf in self.mem.items():
            if base <= addr and addr + n <= base + len(buf):
                return buf, addr - base
        raise AssertionError(f"fake driver: {n} bytes at {addr:#x} outside device memory")

    def _held(self, stream: Any) -> bool:
        h = int(stream)
        waiting = {w for w, addr, v in self.waits if ctypes.c_uint32.from_address(addr).value < v}
        if h == 1:  # the legacy stream waits for every blocking stream
            return any(self.busy.values()) or bool(waiting)
        return self.busy.get(h, 0) > 0 or h in waiting

    # -- device and context ------------------------------------------------------------------------------
    def _cuInit(self, flags: int) -> tuple:
        return (real.CUresult(SUCCESS),)

    def _cuDeviceGet(self, i: int) -> tuple:
        return real.CUresult(SUCCESS), real.CUdevice(i)

    def _cuDevicePrimaryCtxRetain(self, dev: Any) -> tuple:
        return real.CUresult(SUCCESS), real.CUcontext(0x5000 + int(dev))

    def _cuDevicePrimaryCtxRelease(self, dev: Any) -> tuple:
        return (real.CUresult(SUCCESS),)

    def _cuDevicePrimaryCtxReset(self, dev: Any) -> tuple:
        self.mem.clear()
        return (real.CUresult(SUCCESS),)

    def _cuCtxSetCurrent(self, ctx: Any) -> tuple:
        self.current_ctx = int(ctx)
        return (real.CUresult(SUCCESS),)

    def _cuCtxGetStreamPriorityRange(self) -> tuple:
        return real.CUresult(SUCCESS), 0, -5

    def _cuCtxSynchronize(self) -> tuple:
        return (real.CUresult(SUCCESS),)

    # -- memory ------------------------------------------------------------------------------------------
    def _cuMemAlloc(self, size: int) -> tuple:
        addr = self.next_addr
        self.next_addr += -(-size // 512) * 512 + 512
        self.mem[addr] = bytearray(size)
        return real.CUresult(SUCCESS), real.CUdeviceptr(addr)

    def _cuMemAllocPitch(self, width: int, height: int, elem: int) -> tuple:
        pitch = -(-width // 512) * 512
        err, ptr = self._cuMemAlloc(pitch * height)
        return err, ptr, pitch

    def _cuMemFree(self, ptr: Any) -> tuple:
        return (real.CUresult(SUCCESS if self.mem.pop(int(ptr), None) is not None else INVALID_VALUE),)

    # virtual memory management: a mapping is a view of the physical allocation's bytes (so two mappings of
    # one allocation alias); the access descriptors are recorded
    def _cuMemAddressReserve(self, size: int, align: int, addr: Any, flags: int) -> tuple:
        start = -(-self.next_addr // align) * align
        self.next_addr = start + size
        return real.CUresult(SUCCESS), real.CUdeviceptr(start)

    def _cuMemAddressFree(self, ptr: Any, size: int) -> tuple:
        return (real.CUresult(SUCCESS),)

    def _cuMemCreate(self, size: int, prop: Any, flags: int) -> tuple:
        h = self._handle()
        self.physical[h] = bytearray(size)
        self.created.append((int(prop.location.id), size))
        return real.CUresult(SUCCESS), real.CUmemGenericAllocationHandle(h)

    def _cuMemExportToShareableHandle(self, h: Any, handle_type: Any, flags: int) -> tuple:
        import os

        self.exported.append((int(h), int(handle_type)))
        return real.CUresult(SUCCESS), os.open(os.devnull, os.O_RDONLY)  # a descriptor, as the driver's is

    def _cuMemRelease(self, h: Any) -> tuple:
        return (real.CUresult(SUCCESS if self.physical.pop(int(h), None) is not None else INVALID_VALUE),)

    def _cuMemMap(self, ptr: Any, size: int, offset: int, h: Any, flags: int) -> tuple:
        self.mem[int(ptr)] = memoryview(self.physical[int(h)])[offset:offset + size]  # type: ignore[assignment]
        return (real.CUresult(SUCCESS),)

    def _cuMemUnmap(self, ptr: Any, size: int) -> tuple:
        return (real.CUresult(SUCCESS if self.mem.pop(int(ptr), None) is not None else INVALID_VALUE),)

    def _cuMemSetAccess(self, ptr: Any, size: int, desc: list, count: int) -> tuple:
        self.access += [(int(ptr), size, int(d.location.id), int(d.flags)) for d in desc]
        return (real.CUresult(SUCCESS),)

    def _cuMemGetInfo(self) -> tuple:
        return real.CUresult(SUCCESS), 1 << 30, 2 << 30

    def _cuMemHostAlloc(self, size: int, flags: int) -> tuple:
        buf = ctypes.create_string_buffer(size)
        self.host[ctypes.addressof(buf)] = buf
        return real.CUresult(SUCCESS), ctypes.addressof(buf)

    def _cuMemHostGetDevicePointer(self, p: int, flags: int) -> tuple:
        return real.CUresult(SUCCESS), real.CUdeviceptr(int(p))  # unified addressing: the same address

    def _cuStreamWaitValue32(self, s: Any, addr: Any, value: Any, flags: int) -> tuple:
        if not self.mem_ops:
            return (real.CUresult(801),)  # CUDA_ERROR_NOT_SUPPORTED
        assert flags == int(real.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
        self.waits.append((int(s), int(addr), int(value)))
        return (real.CUresult(SUCCESS),)

    def _cuMemFreeHost(self, p: int) -> tuple:
        del self.host[int(p)]
        return (real.CUresult(SUCCESS),)

    def _cuMemcpyHtoDAsync(self, dst: Any, src: int, n: int, stream: Any) -> tuple:
        buf, off = self._find(int(dst), n)
        buf[off : off + n] = ctypes.string_at(src, n)
        return (real.CUresult(SUCCESS),)

    def _cuMemcpyDtoHAsync(self, dst: int, src: Any, n: int, stream: Any) -> tuple:
        buf, off = self._find(int(src), n)
        ctypes.memmove(dst, bytes(buf[off : off + n]), n)
        return (real.CUresult(SUCCESS),)

    def _cuMemcpyDtoDAsync(self, dst: Any, src: Any, n: int, stream: Any) -> tuple:
        s, so = self._find(int(src), n)
        d, do = self._find(int(dst), n)
        d[do : do + n] = s[so : so + n]
        return (real.CUresult(SUCCESS),)

    def _cuMemcpy2DAsync(self, p: Any, stream: Any) -> tuple:
        host = real.CUmemorytype.CU_MEMORYTYPE_HOST
        for y in range(p.Height):
            if p.srcMemoryType == host:
                row = ctypes.string_at(int(p.srcHost) + y * p.srcPitch, p.WidthInBytes)
            else:
                b, o = self._find(int(p.srcDevice) + y * p.srcPitch, p.WidthInBytes)
                row = bytes(b[o : o + p.WidthInBytes])
            if p.dstMemoryType == host:
                ctypes.memmove(int(p.dstHost) + y * p.dstPitch, row, p.WidthInBytes)
            else:
                b, o = self._find(int(p.dstDevice) + y * p.dstPitch, p.WidthInBytes)
                b[o : o + p.WidthInBytes] = row
        return (real.CUresult(SUCCESS),)

    def _cuMemsetD8Async(self, dst: Any, value: int, n: int, stream: Any) -> tuple:
        b, o = self._find(int(dst), n)
        b[o : o + n] = bytes([value]) * n
        return (real.CUresult(SUCCESS),)

    def _cuMemsetD2D8Async(self, dst: Any, pitch: int, value: int, width: int, height: int, stream: Any) -> tuple:
        for y in range(height):
            self._cuMemsetD8Async(real.CUdeviceptr(int(dst) + y * pitch), value, width, stream)
        return (real.CUresult(SUCCESS),)

    # -- CUDA arrays, texture and surface objects -------------------------------------------------------------
    # An array is its descriptor and a packed bytearray (rows of Width * elem bytes); objects keep their
    # descriptions, so tests can check what CudaSession asked for.
    _FORMAT_BYTES = {0x01: 1, 0x02: 2, 0x03: 4, 0x08: 1, 0x09: 2, 0x0A: 4, 0x10: 2, 0x20: 4}

    def _cuArray3DCreate(self, d: Any) -> tuple:
        elem = self._FORMAT_BYTES[int(d.Format)] * d.NumChannels
        rows, slices = max(d.Height, 1), max(d.Depth, 1)
        h = self._handle()
        self.arrays = getattr(self, "arrays", {})
        self.arrays[h] = {"desc": (d.Width, d.Height, d.Depth, int(d.Format), d.NumChannels, d.Flags),
                          "row": d.Width * elem, "rows": rows, "data": bytearray(d.Width * elem * rows * slices)}
        return real.CUresult(SUCCESS), real.CUarray(h)

    def _cuArrayDestroy(self, a: Any) -> tuple:
        return (real.CUresult(SUCCESS if self.arrays.pop(int(a), None) is not None else INVALID_VALUE),)

    def _cuMemcpy3DAsync(self, p: Any, stream: Any) -> tuple:
        array = real.CUmemorytype.CU_MEMORYTYPE_ARRAY
        for z in range(p.Depth):
            for y in range(p.Height):
                if p.srcMemoryType == array:
                    a = self.arrays[int(p.srcArray)]
                    o = ((z * a["rows"]) + y) * a["row"]
                    row = bytes(a["data"][o : o + p.WidthInBytes])
                else:
                    b, o = self._find(int(p.srcDevice) + (z * p.srcHeight + y) * p.srcPitch, p.WidthInBytes)
                    row = bytes(b[o : o + p.WidthInBytes])
                if p.dstMemoryType == array:
                    a = self.arrays[int(p.dstArray)]
                    o = ((z * a["rows"]) + y) * a["row"]
                    a["data"][o : o + p.WidthInBytes] = row
                else:
                    b, o = self._find(int(p.dstDevice) + (z * p.dstHeight + y) * p.dstPitch, p.WidthInBytes)
                    b[o : o + p.WidthInBytes] = row
        return (real.CUresult(SUCCESS),)

    def _describe(self, res: Any) -> dict:
        t = int(res.resType)
        if t == 0:
            return {"type": "array", "array": int(res.res.array.hArray)}
        if t == 2:
            r = res.res.linear
            return {"type": "linear", "ptr": int(r.devPtr), "format": int(r.format), "channels": r.numChannels,
                    "size": r.sizeInBytes}
        r = res.res.pitch2D
        return {"type": "pitch2d", "ptr": int(r.devPtr), "format": int(r.format), "channels": r.numChannels,
                "width": r.width, "height": r.height, "pitch": r.pitchInBytes}

    def _cuTexObjectCreate(self, res: Any, tex: Any, view: Any) -> tuple:
        h = self._handle()
        self.texobjs = getattr(self, "texobjs", {})
        self.texobjs[h] = {**self._describe(res), "address": [int(m) for m in tex.addressMode],
                           "filter": int(tex.filterMode), "flags": tex.flags, "border": list(tex.borderColor)}
        return real.CUresult(SUCCESS), real.CUtexObject(h)

    def _cuTexObjectDestroy(self, t: Any) -> tuple:
        return (real.CUresult(SUCCESS if self.texobjs.pop(int(t), None) is not None else INVALID_VALUE),)

    def _cuSurfObjectCreate(self, res: Any) -> tuple:
        h = self._handle()
        self.surfobjs = getattr(self, "surfobjs", {})
        self.surfobjs[h] = self._describe(res)
        return real.CUresult(SUCCESS), real.CUsurfObject(h)

    def _cuSurfObjectDestroy(self, t: Any) -> tuple:
        return (real.CUresult(SUCCESS if self.surfobjs.pop(int(t), None) is not None else INVALID_VALUE),)

    # -- streams, events, host functions ---------------------------------------------------------------------
    def _cuStreamCreateWithPriority(self, flags: int, priority: int) -> tuple:
        h = self._handle()
        self.streams[h] = min(max(priority, -5), 0)
        return real.CUresult(SUCCESS), real.CUstream(h)

    def _cuStreamGetPriority(self, s: Any) -> tuple:
        return real.CUresult(SUCCESS), self.streams.get(int(s), 0)

    def _cuStreamDestroy(self, s: Any) -> tuple:
        self.streams.pop(int(s), None)
        return (real.CUresult(SUCCESS),)

    def _cuStreamQuery(self, s: Any) -> tuple:
        return (real.CUresult(NOT_READY if self._held(s) else SUCCESS),)

    def _cuStreamSynchronize(self, s: Any) -> tuple:
        assert not self._held(s), "CudaSession must never block on a stream a host function holds"
        return (real.CUresult(SUCCESS),)

    def _cuStreamWaitEvent(self, s: Any, e: Any, flags: int) -> tuple:
        return (real.CUresult(SUCCESS),)

    def _cuLaunchHostFunc(self, s: Any, fn: Any, user: Any) -> tuple:
        h = int(s)
        self.busy[h] = self.busy.get(h, 0) + 1
        cfn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(int(fn))
        before = [(addr, v) for w, addr, v in self.waits if w == h]  # stream order: earlier waits first

        def run() -> None:
            while any(ctypes.c_uint32.from_address(addr).value < v for addr, v in before):
                time.sleep(0.002)
            cfn(int(user))  # the driver's callback thread (blocks only in the no-mem-ops fallback)
            self.busy[h] -= 1

        t = threading.Thread(target=run, daemon=True)
        self.threads.append(t)
        t.start()
        t.join(0.5)  # gpushim's own host functions finish at once, in order; a client's stays pending
        return (real.CUresult(SUCCESS),)

    def _cuEventCreate(self, flags: int) -> tuple:
        return real.CUresult(SUCCESS), real.CUevent(self._handle())

    def _cuEventRecord(self, e: Any, s: Any) -> tuple:
        return (real.CUresult(SUCCESS),)

    def _cuEventQuery(self, e: Any) -> tuple:
        return (real.CUresult(SUCCESS),)

    def _cuEventSynchronize(self, e: Any) -> tuple:
        return (real.CUresult(SUCCESS),)

    def _cuEventElapsedTime(self, a: Any, b: Any) -> tuple:
        return real.CUresult(SUCCESS), 0.25

    def _cuEventDestroy(self, e: Any) -> tuple:
        return (real.CUresult(SUCCESS),)

    # -- modules and kernels -------------------------------------------------------------------------------
    def _cuModuleLoadData(self, image: Any) -> tuple:
        return real.CUresult(SUCCESS), real.CUmodule(self._handle())

    def _cuModuleUnload(self, mod: Any) -> tuple:
        self.unloaded.append(int(mod))
        return (real.CUresult(SUCCESS),)

    def _cuModuleGetFunction(self, mod: Any, name: bytes) -> tuple:
        if name.decode() not in self.layouts:
            return real.CUresult(NOT_FOUND), real.CUfunction(0)
        h = self._handle()
        self.functions = getattr(self, "functions", {})
        self.functions[h] = name.decode()
        return real.CUresult(SUCCESS), real.CUfunction(h)

    def _cuFuncGetParamInfo(self, f: Any, i: int) -> tuple:
        if not self.param_info:
            raise RuntimeError('Function "cuFuncGetParamInfo" not found')
        layout = self.layouts[self.functions[int(f)]]
        if i >= len(layout):
            return real.CUresult(INVALID_VALUE), 0, 0
        return real.CUresult(SUCCESS), layout[i][0], layout[i][1]

    def _cuFuncGetAttribute(self, attr: Any, f: Any) -> tuple:
        return real.CUresult(SUCCESS), 1024 if int(attr) == 0 else 0

    def _cuFuncSetAttribute(self, f: Any, attr: Any, value: int) -> tuple:
        self.func_attrs.append((self.functions[int(f)], int(attr), value))
        return (real.CUresult(SUCCESS),)

    def _cuLaunchKernel(self, f: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int, s: Any,
                        params: int, extra: int) -> tuple:
        layout = self.layouts[self.functions[int(f)]]
        ptrs = (ctypes.c_void_p * max(len(layout), 1)).from_address(params) if params else []
        values = [ctypes.string_at(ptrs[i], size) for i, (_, size) in enumerate(layout)]
        self.launches.append({"name": self.functions[int(f)], "grid": (gx, gy, gz), "block": (bx, by, bz),
                              "shared": shared, "stream": int(s), "values": values})
        hook = getattr(self, "on_launch", None)
        if hook is not None:
            hook(self)
        return (real.CUresult(SUCCESS),)

    def _cuLaunchKernelEx(self, cfg: Any, f: Any, params: int, extra: int) -> tuple:
        """cuLaunchKernelEx: the launch as cuLaunchKernel's, plus the attributes as cuda-python holds them."""
        self._cuLaunchKernel(f, cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY,
                             cfg.blockDimZ, cfg.sharedMemBytes, cfg.hStream, params, extra)
        attrs = list(cfg.attrs)[: cfg.numAttrs]
        self.launches[-1]["attrs"] = [(int(a.id), a.value) for a in attrs]
        return (real.CUresult(SUCCESS),)

    def _cuTensorMapEncodeTiled(self, dtype: Any, rank: int, addr: Any, dims: list, strides: list, box: list,
                                elem: list, interleave: Any, swizzle: Any, l2: Any, oob: Any) -> tuple:
        """A descriptor whose words record the arguments (the real layout is the driver's own)."""
        ints = [[int(x) for x in a] for a in (dims, strides, box, elem)]
        self.tensor_maps.append((int(dtype), rank, int(addr), *ints, int(interleave), int(swizzle), int(l2), int(oob)))
        tm = real.CUtensorMap()
        tm.opaque = [int(addr), rank, *ints[0], *[0] * (14 - len(dims))]
        return real.CUresult(SUCCESS), tm

    def _cuTensorMapReplaceAddress(self, tm: Any, addr: Any) -> tuple:
        words = [int(w) for w in tm.opaque]
        tm.opaque = [int(addr), *words[1:]]
        return (real.CUresult(SUCCESS),)

    def _cuModuleGetGlobal(self, mod: Any, name: bytes) -> tuple:
        size = self.symbols.get(name.decode())
        if size is None:
            return real.CUresult(NOT_FOUND), real.CUdeviceptr(0), 0
        err, ptr = self._cuMemAlloc(size)
        return err, ptr, size
