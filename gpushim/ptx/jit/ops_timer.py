"""Timers in the compiling engine (a mixin of codegen.Codegen): %clock, %clock_hi, %clock64, %globaltimer,
%globaltimer_lo, %globaltimer_hi, with the interpreter's units (state.py `clock_now`, `BatchState.timer`):
the clock counts about 1.5 GHz of CLOCK_MONOTONIC (Python's perf_counter_ns on Linux), strictly increasing;
the global timer is CLOCK_REALTIME in ns plus the clock's low byte (strictly increasing with it)."""

from __future__ import annotations

from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import F64, I32, I64

_CLOCK_MONOTONIC, _CLOCK_REALTIME = 1, 0  # Linux's clockid_t values
_TIMESPEC = ir.LiteralStructType([I64, I64])


class TimerOps:
    def _clock_gettime(self, clock: int):
        """clock_gettime(clock) of the C library, in ns (i64)"""
        m, b = self.m, self.b
        fn = m.globals.get("clock_gettime")
        if fn is None:
            fn = ir.Function(m, ir.FunctionType(I32, [I32, _TIMESPEC.as_pointer()]), name="clock_gettime")
        here = b.block
        b.position_at_start(self.f.entry_basic_block)  # one timespec per thread function, in its entry block
        ts = b.alloca(_TIMESPEC)
        b.position_at_end(here)
        b.call(fn, [ir.Constant(I32, clock), ts])
        z = ir.Constant(I32, 0)
        sec = b.load(b.gep(ts, [z, z]))
        nsec = b.load(b.gep(ts, [z, ir.Constant(I32, 1)]))
        return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)

    def _clock_now(self):
        """state.clock_now: int(monotonic ns * 1.5) in f64 as Python computes it, made strictly increasing by
        the module's last value (atomically: several host threads may run the kernel at once)."""
        m, b = self.m, self.b
        last = m.globals.get("clock_last")
        if last is None:
            last = ir.GlobalVariable(m, I64, name="clock_last")
            last.initializer = ir.Constant(I64, 0)
        ns = self._clock_gettime(_CLOCK_MONOTONIC)
        c = b.fptoui(b.fmul(b.uitofp(ns, F64), ir.Constant(F64, 1.5)), I64)
        old = b.atomic_rmw("umax", last, c, "seq_cst")
        bumped = b.add(b.atomic_rmw("add", last, ir.Constant(I64, 1), "seq_cst"), ir.Constant(I64, 1))
        # c > old: c is the new maximum; otherwise one past whatever the last value is now
        return b.select(b.icmp_unsigned(">", c, old), c, bumped)

    def _timer(self, name: str):
        b = self.b
        c = self._clock_now()
        if name == "%clock":
            return b.trunc(c, I32)
        if name == "%clock_hi":
            return b.trunc(b.lshr(c, ir.Constant(I64, 32)), I32)
        if name == "%clock64":
            return c
        ns = b.add(self._clock_gettime(_CLOCK_REALTIME), b.and_(c, ir.Constant(I64, 0xFF)))
        if name == "%globaltimer_lo":
            return b.trunc(ns, I32)
        if name == "%globaltimer_hi":
            return b.trunc(b.lshr(ns, ir.Constant(I64, 32)), I32)
        return ns
