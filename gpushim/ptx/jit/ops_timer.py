"""Timers in the compiling engine (a mixin of codegen.Codegen): %clock, %clock_hi, %clock64, %globaltimer,
%globaltimer_lo, %globaltimer_hi, with the interpreter's units (state.py `clock_now`, `BatchState.timer`):
the clock counts about 1.5 GHz of CLOCK_MONOTONIC (Python's perf_counter_ns on Linux), strictly increasing;
the global timer is CLOCK_REALTIME in ns, strictly increasing (the interpreter's adds the clock's low byte)."""

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

    def _strictly_increasing(self, v, last_name: str):
        """v, or one past the last value returned when that is not below v: the module's last value (a global,
        updated atomically: several host threads may run the kernel at once) only grows."""
        m, b = self.m, self.b
        last = m.globals.get(last_name)
        if last is None:
            last = ir.GlobalVariable(m, I64, name=last_name)
            last.initializer = ir.Constant(I64, 0)
        old = b.atomic_rmw("umax", last, v, "seq_cst")
        bumped = b.add(b.atomic_rmw("add", last, ir.Constant(I64, 1), "seq_cst"), ir.Constant(I64, 1))
        return b.select(b.icmp_unsigned(">", v, old), v, bumped)  # v > old: v is the new maximum

    def _clock_now(self):
        """state.clock_now: int(monotonic ns * 1.5) in f64 as Python computes it, strictly increasing"""
        b = self.b
        ns = self._clock_gettime(_CLOCK_MONOTONIC)
        c = b.fptoui(b.fmul(b.uitofp(ns, F64), ir.Constant(F64, 1.5)), I64)
        return self._strictly_increasing(c, "clock_last")

    def _timer(self, name: str):
        b = self.b
        if name.startswith("%globaltimer"):
            # the interpreter adds the clock's low byte to time.time_ns() to make it increase; reads of native
            # code are closer than the interpreter's (that byte wraps between them), so the JIT's increase is
            # made as the clock's
            ns = self._strictly_increasing(self._clock_gettime(_CLOCK_REALTIME), "globaltimer_last")
            if name == "%globaltimer_lo":
                return b.trunc(ns, I32)
            if name == "%globaltimer_hi":
                return b.trunc(b.lshr(ns, ir.Constant(I64, 32)), I32)
            return ns
        c = self._clock_now()
        if name == "%clock":
            return b.trunc(c, I32)
        if name == "%clock_hi":
            return b.trunc(b.lshr(c, ir.Constant(I64, 32)), I32)
        return c  # %clock64
