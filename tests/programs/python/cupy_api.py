"""A broad slice of CuPy's API under gpushim (tests/e2e/test_cupy_api.py), each result checked against numpy:
one `name= True` line per check, or `name= <what differed>` / `name= ERROR <exception>`. Arguments name the
parts: `arrays` (indexing, sorting, reductions over axes and dtypes, CuPy's kernel kinds, fusion), `runtime`
(streams, events, pinned memory, memory pools, device attributes, graphs), `multi` (two devices, peer
access), `dlpack` (DLPack and numba's __cuda_array_interface__), `libs` (cuBLAS, cuSOLVER, cuFFT)."""

import sys
import threading

import cupy as cp
import numpy as np


def check(name, fn):
    try:
        ok = fn()
    except Exception as e:  # what CuPy raised, for the test to read
        ok = f"ERROR {type(e).__name__} {str(e).splitlines()[0][:200] if str(e) else ''}"
    print(f"{name}=", ok, flush=True)


def eq(got, want, **tol):
    """True when the CuPy result has numpy's shape, dtype and values; else what differed."""
    got, want = cp.asnumpy(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.shape} {got.dtype} != {want.shape} {want.dtype}"
    same = np.allclose(got, want, equal_nan=True, **tol) if got.dtype.kind in "fc" else np.array_equal(got, want)
    return True if same else f"{got.ravel()[:6].tolist()} != {want.ravel()[:6].tolist()}"


def all_eq(gots, wants):
    for g, w in zip(gots, wants, strict=True):
        r = eq(g, w)
        if r is not True:
            return r
    return True


rng = np.random.default_rng(0)
X = rng.standard_normal((6, 7)).astype(np.float32)
Z = rng.integers(-50, 50, (6, 7)).astype(np.int32)
parts = sys.argv[1:]

if "arrays" in parts:
    idx = np.array([0, 3, 3, 5])
    check("slice", lambda: eq(cp.asarray(X)[1:5:2, ::-1], X[1:5:2, ::-1]))
    check("fancy_get", lambda: eq(cp.asarray(X)[cp.asarray(idx)], X[idx]))
    check("bool_mask", lambda: eq(cp.asarray(X)[cp.asarray(X > 0)], X[X > 0]))

    def fancy_set():
        a, b = cp.asarray(X), X.copy()
        a[cp.asarray(idx), 2] = 7
        b[idx, 2] = 7
        return eq(a, b)
    check("fancy_set", fancy_set)

    def scatter_add():  # repeated indices accumulate (atomicAdd)
        a, b = cp.zeros(6, cp.float32), np.zeros(6, np.float32)
        cp.add.at(a, cp.asarray(idx), 1.5)
        np.add.at(b, idx, 1.5)
        return eq(a, b)
    check("scatter_add", scatter_add)

    def scatter_add_f16():  # CuPy's float16 add.at is atomicAdd on __half: atom.add.noftz.f16
        a, b = cp.zeros(6, cp.float16), np.zeros(6, np.float16)
        cp.add.at(a, cp.asarray(idx), cp.asarray([1, 2, 3, 4], cp.float16))
        np.add.at(b, idx, np.array([1, 2, 3, 4], np.float16))
        return eq(a, b)
    check("scatter_add_f16", scatter_add_f16)
    check("where", lambda: eq(cp.where(cp.asarray(X) > 0, cp.asarray(X), 0), np.where(X > 0, X, 0)))
    check("nonzero", lambda: all_eq(cp.nonzero(cp.asarray(Z > 0)), np.nonzero(Z > 0)))
    u = rng.integers(0, 20, 500)
    check("unique_counts", lambda: all_eq(cp.unique(cp.asarray(u), return_counts=True),
                                          np.unique(u, return_counts=True)))
    z = rng.standard_normal(300).astype(np.float32)
    check("argsort", lambda: eq(cp.argsort(cp.asarray(z)), np.argsort(z, kind="stable")))
    check("searchsorted", lambda: eq(cp.searchsorted(cp.asarray(np.sort(z)), cp.asarray(z[:10])),
                                     np.searchsorted(np.sort(z), z[:10])))
    for dt in (np.float16, np.complex64, np.int8, np.bool_):
        a = (rng.standard_normal((5, 8)) * 3).astype(dt)
        if dt is np.complex64:
            a = a + 1j * a[::-1]
        n = np.dtype(dt).name
        check(f"sum_{n}_axis0", lambda a=a: eq(cp.asarray(a).sum(axis=0), a.sum(axis=0), rtol=1e-2))
        # float16 along the contiguous axis: CUB's segmented reduce adds each thread's items in half
        # precision, one after another (as it does on a GPU), so compare with a loose tolerance
        check(f"sum_{n}_keepdims", lambda a=a: eq(cp.asarray(a).sum(axis=1, keepdims=True),
                                                  a.sum(axis=1, keepdims=True), rtol=5e-2, atol=1e-2))
        if dt is not np.complex64:
            check(f"max_{n}", lambda a=a: eq(cp.asarray(a).max(axis=1), a.max(axis=1)))
            check(f"argmin_{n}", lambda a=a: eq(cp.asarray(a).argmin(axis=0), a.argmin(axis=0)))
    check("mean_var_std", lambda: all_eq([cp.asarray(X).mean(0), cp.asarray(X).var(0)],
                                         [X.mean(0), X.var(0)]))
    check("cumprod", lambda: eq(cp.cumprod(cp.asarray(X[:3]), axis=1), np.cumprod(X[:3], axis=1), rtol=1e-4))
    h = rng.standard_normal(500)
    check("histogram", lambda: all_eq(cp.histogram(cp.asarray(h), bins=10), np.histogram(h, bins=10)))
    check("median", lambda: eq(cp.median(cp.asarray(X), axis=1), np.median(X, axis=1)))
    rk = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "sumsq")
    check("reduction_kernel", lambda: eq(rk(cp.asarray(X), axis=1), (X * X).sum(1), rtol=1e-5))

    @cp.fuse()
    def fused(x, y):
        return cp.sum(x * y + 1, axis=0)
    check("fuse", lambda: eq(fused(cp.asarray(X), cp.asarray(X)), (X * X + 1).sum(0), rtol=1e-5))
    rev = cp.ElementwiseKernel("raw T x, int32 n", "T y", "y = x[n - 1 - i]", "rev")
    check("elementwise_raw", lambda: eq(rev(cp.asarray(X.ravel()), np.int32(X.size), size=X.size), X.ravel()[::-1]))
    check("complex_exp", lambda: eq(cp.exp(1j * cp.asarray(X)), np.exp(1j * X), rtol=1e-5))
    check("int_floordiv_mod", lambda: all_eq([cp.asarray(Z) // 7, cp.asarray(Z) % 7], [Z // 7, Z % 7]))
    check("float16_math", lambda: eq(cp.asarray(X).astype(cp.float16) * 2 + 1, X.astype(np.float16) * 2 + 1))

if "runtime" in parts:
    def held_stream():
        """A stream held by a host function that waits: its copies and kernels are queued, not done, when the
        calls return (Stream.done / Event.done: cudaStreamQuery / cudaEventQuery say cudaErrorNotReady,
        CUDA Runtime API 6.6 and 6.5), and done, with numpy's answer, once the host function returns."""
        s = cp.cuda.Stream(non_blocking=True)
        gate = threading.Event()
        # both ends pinned: a copy to pageable memory returns only once it is done (API synchronization
        # behavior), which would wait for the host function
        host, out = (np.frombuffer(cp.cuda.alloc_pinned_memory(X.nbytes), np.float32, X.size).reshape(X.shape)
                     for _ in range(2))
        host[:] = X
        a = cp.empty(X.shape, cp.float32)
        s.launch_host_func(lambda _: gate.wait(60), None)
        with s:
            a.set(host, stream=s)
            b = a * 2
            b.get(stream=s, out=out, blocking=False)  # CuPy's get waits for the stream unless told not to
            e = s.record()
        held = (s.done, e.done)
        gate.set()
        s.synchronize()
        return held, e.done, eq(out, X * 2)  # ((False, False), True, True)
    check("held_stream_pinned", held_stream)

    def elapsed():
        e1, e2 = cp.cuda.Event(), cp.cuda.Event()
        e1.record()
        cp.arange(1000).sum()
        e2.record()
        e2.synchronize()
        return cp.cuda.get_elapsed_time(e1, e2) >= 0
    check("event_elapsed", elapsed)

    def pool():
        mp = cp.get_default_memory_pool()
        mp.free_all_blocks()
        a = cp.empty(1 << 20, cp.uint8)
        used = mp.used_bytes()
        del a
        return used == 1 << 20 and mp.used_bytes() == 0 and mp.total_bytes() >= 1 << 20
    check("memory_pool", pool)

    def async_pool():  # cudaMallocAsync through CuPy's MemoryAsyncPool
        cp.cuda.set_allocator(cp.cuda.MemoryAsyncPool().malloc)
        try:
            return eq(cp.asarray(X) + 1, X + 1)
        finally:
            cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)
    check("memory_async_pool", async_pool)

    def attributes():
        at = cp.cuda.Device(0).attributes
        free, total = cp.cuda.Device(0).mem_info
        return (at["MaxThreadsPerBlock"], at["WarpSize"], cp.cuda.Device(0).compute_capability,
                at["MultiProcessorCount"] > 0, 0 < free <= total)
    check("attributes", attributes)

    def graph():
        s = cp.cuda.Stream(non_blocking=True)
        a = cp.asarray(X)
        with s:
            s.begin_capture()
            b = a * 3 + 1
            g = s.end_capture()
        g.launch(s)
        s.synchronize()
        return eq(b, X * 3 + 1)
    check("cuda_graph", graph)

if "multi" in parts:
    def two_devices():
        """Arrays on device 1 and device 0; with peer access (cudaDeviceEnablePeerAccess, which CuPy's
        static runtime makes through cuCtxEnablePeerAccess) a kernel on device 1 reads device 0's array."""
        rt = cp.cuda.runtime
        c = cp.asarray(X)
        with cp.cuda.Device(1):
            b = cp.asarray(X) * 2
            rt.deviceEnablePeerAccess(0)
            try:
                rt.deviceEnablePeerAccess(0)
                again = "no error"
            except rt.CUDARuntimeError as e:
                again = str(e).split(':')[0]
            d = b + c  # the kernel runs on device 1, c lives on device 0
            res = eq(d, X * 3)
            rt.deviceDisablePeerAccess(0)
            try:
                rt.deviceDisablePeerAccess(0)
                off = "no error"
            except rt.CUDARuntimeError as e:
                off = str(e).split(':')[0]
        return rt.getDeviceCount(), b.device.id, c.device.id, res, again, off
    check("two_devices", two_devices)

    def peer_copy():
        c = cp.asarray(X)
        with cp.cuda.Device(1):
            d = cp.empty_like(c)
            d.data.copy_from_device(c.data, c.nbytes)
            return d.device.id == 1 and eq(d, X)
    check("peer_copy", peer_copy)

if "dlpack" in parts:
    def dlpack():
        a = cp.asarray(X)
        b = cp.from_dlpack(a.__dlpack__())
        b += 1
        return eq(a, X + 1)
    check("dlpack", dlpack)

    def numba_interop():
        try:
            from numba import cuda
        except ImportError:
            return "skipped: numba-cuda is not installed"

        a = cp.asarray(X)

        @cuda.jit
        def inc(x):
            i, j = cuda.grid(2)
            if i < x.shape[0] and j < x.shape[1]:
                x[i, j] += 1
        inc[(1, 1), (8, 8)](cuda.as_cuda_array(a))
        cuda.synchronize()
        return eq(a, X + 1)
    check("numba_cai", numba_interop)

if "ipc" in parts:
    def ipc():
        """Another process opens this one's array (cudaIpcGetMemHandle / OpenMemHandle, which CuPy's static
        runtime makes with cuIpcGetMemHandle / cuIpcOpenMemHandle_v2), doubles it in place, and waits on an
        event exported the same way; its changes are visible here."""
        import subprocess

        rt = cp.cuda.runtime
        a = cp.asarray(X)
        ev = cp.cuda.Event(block=False, disable_timing=True, interprocess=True)
        ev.record()
        mh, eh = rt.ipcGetMemHandle(a.data.ptr), rt.ipcGetEventHandle(ev.ptr)
        child = subprocess.run([sys.executable, __file__, "ipc_child", mh.hex(), eh.hex()], capture_output=True,
                               text=True, timeout=300)
        if child.stdout.strip().splitlines()[-1:] != ["child True"]:
            return f"child: {child.stdout[-200:]} {child.stderr[-300:]}"
        return eq(a, X * 2)
    check("ipc", ipc)
if "ipc_child" in parts:
    rt = cp.cuda.runtime
    ptr = rt.ipcOpenMemHandle(bytes.fromhex(sys.argv[2]))
    rt.streamWaitEvent(0, rt.ipcOpenEventHandle(bytes.fromhex(sys.argv[3])))
    mem = cp.cuda.UnownedMemory(ptr, X.nbytes, None)
    b = cp.ndarray(X.shape, cp.float32, cp.cuda.MemoryPointer(mem, 0))
    same = eq(b, X)
    b *= 2
    cp.cuda.Device().synchronize()
    rt.ipcCloseMemHandle(ptr)
    print("child", same)
    sys.exit(0)
if "libs" in parts:
    A = rng.standard_normal((4, 4))
    B = rng.standard_normal((4, 3))
    check("matmul_f32", lambda: eq(cp.asarray(X) @ cp.asarray(X.T), X @ X.T, rtol=1e-4))
    check("matmul_int", lambda: eq(cp.asarray(Z) @ cp.asarray(Z.T), Z @ Z.T))
    check("dot", lambda: eq(cp.dot(cp.asarray(X[0]), cp.asarray(X[1])), np.dot(X[0], X[1]), rtol=1e-5))
    check("einsum", lambda: eq(cp.einsum("ij,kj->ik", cp.asarray(X), cp.asarray(X)),
                               np.einsum("ij,kj->ik", X, X), rtol=1e-4))
    check("det", lambda: eq(cp.linalg.det(cp.asarray(A)), np.linalg.det(A)))
    check("svd", lambda: eq(cp.linalg.svd(cp.asarray(A), compute_uv=False), np.linalg.svd(A, compute_uv=False)))
    spd = A @ A.T + 4 * np.eye(4)
    check("cholesky", lambda: eq(cp.linalg.cholesky(cp.asarray(spd)), np.linalg.cholesky(spd)))
    # cubin-only library kernels: these raise (the shim names the kernels on stderr)
    check("matmul_f64", lambda: eq(cp.asarray(A) @ cp.asarray(B), A @ B))
    check("solve", lambda: eq(cp.linalg.solve(cp.asarray(A), cp.asarray(B)), np.linalg.solve(A, B)))
    check("fft", lambda: eq(cp.fft.fft(cp.asarray(A[0])), np.fft.fft(A[0])))
print("OK")
