"""The state of one batch of whole blocks while it runs: registers, special registers, memory windows."""

from __future__ import annotations

import time

import numpy as np

from gpushim.cuda_errors import CudaError, Err
from gpushim.ptx.link import align_up

_clock_last = 0
_CLOCK_HZ = 1.5e9


def clock_now() -> int:
    """A strictly increasing cycle counter (about 1.5 GHz of wall time)."""
    global _clock_last
    c = int(time.perf_counter_ns() * (_CLOCK_HZ / 1e9))
    _clock_last = c if c > _clock_last else _clock_last + 1
    return _clock_last


_VIEW_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class LazyViews(dict):
    """Typed views of a byte buffer by element size (its length cut to whole elements; the arena's capacity may
    be odd), each made when first used (most launches touch one or two element sizes)."""

    __slots__ = ("buf",)

    def __init__(self, buf: np.ndarray) -> None:
        super().__init__()
        self.buf = buf

    def __missing__(self, k: int) -> np.ndarray:
        buf = self.buf
        v = buf[: buf.size - buf.size % k].view(_VIEW_DTYPES[k]) if k > 1 else buf
        self[k] = v
        return v


class Symbols(dict):
    """Device addresses of module globals as np.uint64, converted when a kernel first names one."""

    __slots__ = ("src",)

    def __init__(self, src: dict) -> None:
        super().__init__()
        self.src = src

    def __missing__(self, name: str) -> np.uint64:
        v = self[name] = np.uint64(self.src[name])
        return v


class Geometry:
    """Per-launch constants and the thread-index arrays shared by all batches of one size."""

    def __init__(self, grid, block, blocks_per_batch: int, shared_total: int, frame_bytes: int) -> None:
        self.grid = grid
        self.block = block
        self.tpb = block[0] * block[1] * block[2]
        self.nblocks = grid[0] * grid[1] * grid[2]
        self.k = blocks_per_batch
        self.sh_stride = align_up(max(shared_total, 1), 16)
        self.lo_stride = align_up(max(frame_bytes, 1), 16)
        self._cache: dict[int, dict] = {}

    def thread_arrays(self, k: int) -> dict:
        c = self._cache.get(k)
        if c is not None:
            return c
        tpb = self.tpb
        n = k * tpb
        t = np.arange(n, dtype=np.int64)
        lin = t % tpb
        bx, by, _ = self.block
        blk = t // tpb
        warps_per_block = -(-tpb // 32)
        lane = (lin % 32).astype(np.uint32)
        c = {
            "thread": t,
            "blk": blk,
            "lin": lin,
            "%tid.x": (lin % bx).astype(np.uint32),
            "%tid.y": ((lin // bx) % by).astype(np.uint32),
            "%tid.z": (lin // (bx * by)).astype(np.uint32),
            "%laneid": lane,
            "%warpid": (lin // 32).astype(np.uint32),
            "warp": (blk * warps_per_block + lin // 32).astype(np.int64),
            "nwarps": k * warps_per_block,
            "%lanemask_eq": (np.uint32(1) << lane).astype(np.uint32),
            "%lanemask_lt": ((np.uint64(1) << lane.astype(np.uint64)) - np.uint64(1)).astype(np.uint32),
            "%lanemask_le": ((np.uint64(2) << lane.astype(np.uint64)) - np.uint64(1)).astype(np.uint32),
            "sh_base": blk * self.sh_stride,
            "lo_base": t * self.lo_stride,
        }
        c["warp_alive"] = np.bincount(c["warp"], minlength=c["nwarps"])  # threads per warp, all alive
        c["%lanemask_gt"] = ~c["%lanemask_le"]
        c["%lanemask_ge"] = ~c["%lanemask_lt"]
        for v in c.values():
            if v.__class__ is np.ndarray:
                v.flags.writeable = False  # shared by every launch of this geometry
        self._cache[k] = c
        return c


class Specials(dict):
    """Special registers of one batch, each computed when a kernel first reads it (Batch.special)."""

    __slots__ = ("batch",)

    def __init__(self, batch: Batch, consts: dict) -> None:
        super().__init__(consts)
        self.batch = batch

    def __missing__(self, name: str):
        v = self[name] = self.batch.special(name)
        return v


class Batch:
    """The constant part of the state of one batch of blocks: special registers and thread-index arrays.
    Made once per batch of a launch, or once per launch configuration for single-batch launches (which then
    reuse it); nothing in it is ever written by a launch (its arrays are read-only)."""

    def __init__(
        self, geo: Geometry, first_block: int, nblk: int, shared_total: int, dyn_shared: int, eager: tuple = ()
    ) -> None:
        """eager: special registers to compute now (those the kernel reads), the others are made on first use.
        Computing them before the batch runs keeps the large per-batch arrays out of the middle of the
        instruction stream's temporaries (allocating them there measurably slows wide launches)."""
        ta = geo.thread_arrays(nblk)
        self.ta = ta
        self.geo = geo
        self.first_block = first_block
        self.nblk = nblk
        self.n = nblk * geo.tpb
        self.thread = ta["thread"]
        self.warp = ta["warp"]
        self.nwarps = ta["nwarps"]
        self.blk = ta["blk"]
        self.sh_base = ta["sh_base"]
        self.lo_base = ta["lo_base"]
        self.shared_total = shared_total
        gx, gy, gz = geo.grid
        bx, by, bz = geo.block
        u = np.uint32
        self.sp = Specials(
            self,
            {
                "%ntid.x": u(bx),
                "%ntid.y": u(by),
                "%ntid.z": u(bz),
                "%nctaid.x": u(gx),
                "%nctaid.y": u(gy),
                "%nctaid.z": u(gz),
                "%nwarpid": u(64),
                "%nsmid": u(132),
                "%gridid": u(1),
                "%dynamic_smem_size": u(dyn_shared),
                "%total_smem_size": u(shared_total),
                "%aggr_smem_size": u(shared_total),
                "%warpsize": u(32),
            },
        )
        for name in eager:
            self.sp[name]

    def special(self, name: str):
        """The value of a special register over the batch: a numpy scalar where it is the same for every thread
        of the batch, else an array over its threads (read-only)."""
        v = self.ta.get(name)
        if v is not None and name[0] == "%":
            return v
        first, nblk = self.first_block, self.nblk
        bids = np.arange(first, first + nblk, dtype=np.int64)
        gx, gy, _ = self.geo.grid
        if name == "%ctaid.x":
            c = bids % gx
        elif name == "%ctaid.y":
            c = (bids // gx) % gy
        elif name == "%ctaid.z":
            c = bids // (gx * gy)
        elif name == "%smid":
            c = bids % 132
        else:
            raise KeyError(name)
        c = c.astype(np.uint32)
        if nblk == 1 or (c == c[0]).all():  # the same in every block of the batch
            return c[0]
        r = np.repeat(c, self.geo.tpb)
        r.flags.writeable = False
        return r


def _lazy_alive(st: State) -> np.ndarray:
    if st.alive_idx is None:
        return np.ones(st.n, bool)
    a = np.zeros(st.n, bool)
    a[st.alive_idx] = True
    return a


def _lazy_warp_alive(st: State) -> np.ndarray:
    if st.alive_idx is None:
        return st.batch.ta["warp_alive"].copy()
    return np.bincount(st.warp[st.alive_idx], minlength=st.nwarps)


def _lazy_alive_per_block(st: State) -> np.ndarray:
    b = st.batch
    if st.alive_idx is None:
        return np.full(b.nblk, st.geo.tpb, np.int64)
    return np.bincount(st.blk[st.alive_idx], minlength=b.nblk)


# State attributes made on first use: most small kernels touch no shared or local memory and no barrier.
# alive, warp_alive and alive_per_block follow from alive_idx, so they can be made at any time; once made they
# are kept up to date by scheduler._exit.
_LAZY = {
    "shm": lambda st: np.zeros(st.batch.nblk * st.geo.sh_stride, np.uint8),
    "shv": lambda st: LazyViews(st.shm),
    "loc": lambda st: np.zeros(st.n * st.geo.lo_stride if st.lo_size else 16, np.uint8),
    "lov": lambda st: LazyViews(st.loc),
    "parv": lambda st: LazyViews(st.par),
    "bar_arrived": lambda st: np.zeros((st.batch.nblk, 16), np.int64),
    "alive": _lazy_alive,
    "warp_alive": _lazy_warp_alive,
    "alive_per_block": _lazy_alive_per_block,
}


class State:
    def __init__(
        self,
        kern,
        batch: Batch,
        memory,
        symbols: dict,
        params: np.ndarray,
        param_size: int,
        output,
    ) -> None:
        self.batch = batch
        self.geo = batch.geo
        self.kern = kern
        self.first_block = batch.first_block
        self.n = batch.n
        self.regs = kern.reg_init.copy()
        self.thread = batch.thread
        self.warp = batch.warp
        self.nwarps = batch.nwarps
        self.blk = batch.blk
        self.sp = batch.sp
        self.mem = memory
        self.mem_base = memory.base
        # made per launch and dropped with it: views kept beyond a launch would stop DeviceMemory.close()
        self.av = LazyViews(memory.arena)
        self.sym = Symbols(symbols)
        self.sh_base = batch.sh_base
        self.sh_size = batch.shared_total
        self.lo_base = batch.lo_base
        self.lo_size = kern.prog.frame_bytes
        self.par = params
        self.par_size = param_size
        self.out = output
        self.count = 0
        self.acache: dict = {}
        self.alive_idx = None  # indices of the live threads, None while every thread lives
        self.n_alive = batch.n
        self.bar_wait: dict = {}

    def __getattr__(self, name: str):
        make = _LAZY.get(name)
        if make is None:
            raise AttributeError(name)
        v = make(self)
        self.__dict__[name] = v
        return v

    def timer(self, name: str):
        c = clock_now()
        if name == "%clock":
            return np.uint32(c & 0xFFFFFFFF)
        if name == "%clock_hi":
            return np.uint32(c >> 32)
        if name == "%clock64":
            return np.uint64(c)
        ns = time.time_ns() + (c & 0xFF)  # strictly increasing with the clock
        if name == "%globaltimer_lo":
            return np.uint32(ns & 0xFFFFFFFF)
        if name == "%globaltimer_hi":
            return np.uint32(ns >> 32)
        return np.uint64(ns)

    def coords(self, t: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        g = self.geo
        b = self.first_block + t // g.tpb
        lin = t % g.tpb
        bx, by, _ = g.block
        gx, gy, _ = g.grid
        return (b % gx, (b // gx) % gy, b // (gx * gy)), (lin % bx, (lin // bx) % by, lin // (bx * by))

    def describe_thread(self, t: int) -> str:
        b, th = self.coords(t)
        return f"block ({b[0]},{b[1]},{b[2]}) thread ({th[0]},{th[1]},{th[2]}) of kernel {self.kern.prog.kernel}"

    def error_for(self, what: str, msg: str) -> CudaError:
        return CudaError(Err.ILLEGAL_ADDRESS, f"{what}: {msg}")
