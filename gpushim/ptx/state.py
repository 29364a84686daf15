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


def _views(buf: np.ndarray) -> dict:
    """Typed views of a byte buffer (its length cut to whole elements; the arena's capacity may be odd)."""
    return {
        k: (buf[: buf.size - buf.size % k].view(dt) if k > 1 else buf)
        for k, dt in ((1, np.uint8), (2, np.uint16), (4, np.uint32), (8, np.uint64))
    }


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
        c["%lanemask_gt"] = ~c["%lanemask_le"]
        c["%lanemask_ge"] = ~c["%lanemask_lt"]
        self._cache[k] = c
        return c


class State:
    def __init__(
        self,
        kern,
        geo: Geometry,
        first_block: int,
        nblk: int,
        memory,
        symbols: dict,
        params: np.ndarray,
        param_size: int,
        shared_total: int,
        dyn_shared: int,
        output,
    ) -> None:
        ta = geo.thread_arrays(nblk)
        self.geo = geo
        self.kern = kern
        self.first_block = first_block
        self.n = n = nblk * geo.tpb
        self.regs = list(kern.reg_init)
        self.thread = ta["thread"]
        self.warp = ta["warp"]
        self.nwarps = ta["nwarps"]
        self.blk = ta["blk"]
        gx, gy, gz = geo.grid
        bids = np.arange(first_block, first_block + nblk, dtype=np.int64)
        tpb = geo.tpb
        sp = {k: v for k, v in ta.items() if k.startswith("%")}
        cx = (bids % gx).astype(np.uint32)
        cy = ((bids // gx) % gy).astype(np.uint32)
        cz = (bids // (gx * gy)).astype(np.uint32)
        if nblk == 1:
            sp["%ctaid.x"], sp["%ctaid.y"], sp["%ctaid.z"] = cx[0], cy[0], cz[0]
            sp["%smid"] = np.uint32(first_block % 132)
        else:
            sp["%ctaid.x"] = np.repeat(cx, tpb)
            sp["%ctaid.y"] = np.repeat(cy, tpb)
            sp["%ctaid.z"] = np.repeat(cz, tpb)
            sp["%smid"] = np.repeat((bids % 132).astype(np.uint32), tpb)
        bx, by, bz = geo.block
        for name, v in (
            ("%ntid.x", bx),
            ("%ntid.y", by),
            ("%ntid.z", bz),
            ("%nctaid.x", gx),
            ("%nctaid.y", gy),
            ("%nctaid.z", gz),
            ("%nwarpid", 64),
            ("%nsmid", 132),
            ("%gridid", 1),
            ("%dynamic_smem_size", dyn_shared),
            ("%total_smem_size", shared_total),
            ("%aggr_smem_size", shared_total),
            ("%warpsize", 32),
        ):
            sp[name] = np.uint32(v)
        self.sp = sp
        self.mem = memory
        self.mem_base = memory.base
        self.av = _views(memory.arena)
        self.sym = {k: np.uint64(v) for k, v in symbols.items()}
        self.shm = np.zeros(nblk * geo.sh_stride, np.uint8)
        self.shv = _views(self.shm)
        self.sh_base = ta["sh_base"]
        self.sh_size = shared_total
        frame = kern.prog.frame_bytes
        self.loc = np.zeros(n * geo.lo_stride if frame else 16, np.uint8)
        self.lov = _views(self.loc)
        self.lo_base = ta["lo_base"]
        self.lo_size = frame
        self.par = params
        self.parv = _views(params)
        self.par_size = param_size
        self.out = output
        self.count = 0
        self.acache: dict = {}
        self.alive = np.ones(n, bool)
        self.alive_idx = None  # indices of the live threads, None while every thread lives
        self.n_alive = n
        self.warp_alive = np.bincount(self.warp, minlength=self.nwarps)
        self.alive_per_block = np.full(nblk, geo.tpb, np.int64)
        self.bar_arrived = np.zeros((nblk, 16), np.int64)
        self.bar_wait: dict = {}

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
