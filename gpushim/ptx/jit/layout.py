"""The launch context shared by the compiled code and its Python driver: one int64 array, by slot."""

from __future__ import annotations

ARENA = 0  # host pointer of the device arena
BASE = 1  # device address of the arena's first byte
ALLOCS = 2  # host pointer of the sorted (start, end) device address pairs of the live allocations
NALLOCS = 3
PARAM = 4  # host pointer of the parameter buffer
PSIZE = 5  # bytes of parameters passed
SYMS = 6  # host pointer of the device addresses of the module globals the kernel names (JitKernel.globals order)
GRID = 7  # 7, 8, 9
BLOCK = 10  # 10, 11, 12
SHSIZE = 13  # shared bytes per block (static + dynamic)
DYNSH = 14  # dynamic shared bytes
LOSIZE = 15  # local frame bytes per thread
ERR = 16  # CUDA error code of a failed launch (0: none)
ERR_THREAD = 17  # linear thread index in its block
ERR_BLOCK = 18  # linear block index
ERR_ADDR = 19
ERR_SITE = 20  # index in JitKernel.sites
COUNT = 21  # thread-instructions executed
SHBUF = 22  # host pointer of one block's shared memory
LOBUF = 23  # host pointer of one block's local frames
SPILL = 24  # host pointer of the registers saved at barriers (nregs int64 per thread)
STATE = 25  # host pointer of each thread's resume point (int32; -1 exited)
BEGIN = 26  # first block
END = 27  # one past the last block
ABORT = 28  # set by the watchdog
LOSTRIDE = 29  # bytes between two threads' local frames
SKIPCHECK = 30  # 1: an identical launch (parameters, configuration, allocations) passed the check pass
YIELD = 31  # set when tier 2 is ready: tier 1's block loop stops after the current block (BEGIN: the next one)
UNDEF = 32  # set when a shuffle read a lane that was not at it (undefined in CUDA; ops_warp.py)
HOSTCALL = 33  # address of the launch's host callback (printf, assert, malloc, free: hostcall.py; 0: none)

SLOTS = 34
