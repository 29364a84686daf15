"""mbarrier in the compiling engine (a mixin of codegen.Codegen), as the interpreter's ../ops_mbarrier.py: the
same 64-bit object in shared memory (bits 0-19 pending arrivals, 20-39 expected, 40-59 transactions, 60-63 the
phase), the same arithmetic per thread in thread order, the same faults and messages.

test_wait/try_wait never suspend; when the phase is not complete the thread stops after the instruction (its
result false) and is runnable again in the next round (namedbar.py: a stop without an arrival), so that the loop
nvcc emits around try_wait lets the other threads of the block reach their arrivals (the interpreter's SIMT
scheduler lets other threads run after 256 iterations of a backward loop). Kernels with mbarrier get no check
pass (taint.py: the object is memory)."""

from __future__ import annotations

from gpushim.cuda_errors import Err
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I64, JitUnsupported
from gpushim.ptx.nodes import Instr
from gpushim.ptx.operands import SHARED_WINDOW, WINDOW_SIZE

M20 = (1 << 20) - 1
YIELD = (0, -2, True)  # namedbar's form of a stop without an arrival


def is_mbar_wait(ins: Instr) -> bool:
    return ins.parts[0] == "mbarrier" and len(ins.parts) > 1 and ins.parts[1] in ("test_wait", "try_wait")


class MbarrierOps:
    def _mb_ptr(self, ins: Instr, addr_op):
        """i64* of the mbarrier object at addr_op: shared memory (a generic address outside its window: the
        interpreter's fault), 8 bytes, aligned."""
        if any(p == "shared::cluster" for p in ins.parts):
            raise JitUnsupported(f"{ins.op} on distributed shared memory")
        space = "shared" if any(p.startswith("shared") for p in ins.parts) else None
        space = self._resolve(space, addr_op, ins)
        if space not in (None, "shared"):
            raise JitUnsupported(f"{ins.op} in .{space} memory")
        what = f"{ins.op} (line {ins.line})"
        _, a = self._address(addr_op)
        b = self.b
        if space is None:
            off = b.sub(a, ir.Constant(I64, SHARED_WINDOW))
            self._check(b.icmp_unsigned(">=", off, ir.Constant(I64, WINDOW_SIZE)), Err.ILLEGAL_ADDRESS,
                        f"={what}: an mbarrier object must be in shared memory", a, mem=False)  # fmt: skip
            a = off
        p = self._ptr("shared", a, 8, 8, what, True)
        return b.bitcast(p, I64.as_pointer()), what

    def _mb_fail(self, bad, what: str, msg: str) -> None:
        """the interpreter's st.error_for(what, msg): ILLEGAL_ADDRESS, the message alone"""
        self._check(bad, Err.ILLEGAL_ADDRESS, f"={what}: {msg}", ir.Constant(I64, 0), mem=False)

    def _mb_fields(self, v):
        b = self.b
        c = lambda x: ir.Constant(I64, x)  # noqa: E731
        return b.lshr(v, c(60)), b.and_(v, c(M20)), b.and_(b.lshr(v, c(20)), c(M20)), b.and_(b.lshr(v, c(40)), c(M20))

    def _mb_encode(self, phase, pending, expected, tx):
        b = self.b
        c = lambda x: ir.Constant(I64, x)  # noqa: E731
        v = b.shl(b.and_(phase, c(15)), c(60))
        v = b.or_(v, b.shl(b.and_(tx, c(M20)), c(40)))
        v = b.or_(v, b.shl(b.and_(expected, c(M20)), c(20)))
        return b.or_(v, b.and_(pending, c(M20)))

    def op_mbarrier(self, ins: Instr) -> None:
        kind = ins.parts[1] if len(ins.parts) > 1 else ""
        b = self.b
        c = lambda x: ir.Constant(I64, x)  # noqa: E731
        if kind == "pending_count":
            self.write(ins.args[0], b.trunc(b.and_(self.read(ins.args[1], "b64"), c(M20)), ir.IntType(32)), "u32")
            return
        if kind not in ("init", "inval", "expect_tx", "complete_tx", "arrive", "arrive_drop", "test_wait",
                        "try_wait"):  # fmt: skip
            raise JitUnsupported(ins.op)
        if self.mode == "check":
            raise JitUnsupported("mbarrier in the check pass")  # (taint.py declines such kernels)
        if kind in ("arrive", "arrive_drop"):
            self._mb_arrive(ins, kind == "arrive_drop")
        elif kind in ("test_wait", "try_wait"):
            self._mb_wait(ins)
        else:
            self._mb_update(ins, kind)

    def _mb_update(self, ins: Instr, kind: str) -> None:
        b = self.b
        c = lambda x: ir.Constant(I64, x)  # noqa: E731
        p, what = self._mb_ptr(ins, ins.args[0])
        if kind == "inval":
            self._tag(b.store(c(0), p, align=8), "shared")
            return
        n = b.zext(self.read(ins.args[1], "u32"), I64)
        if kind == "init":
            self._mb_fail(b.or_(b.icmp_unsigned("==", n, c(0)), b.icmp_unsigned(">", n, c(M20))), what,
                          "mbarrier count must be between 1 and 2^20 - 1")  # fmt: skip
            self._tag(b.store(b.or_(b.shl(n, c(20)), n), p, align=8), "shared")
            return
        phase, pending, expected, tx = self._mb_fields(self._tag(b.load(p, align=8), "shared"))
        cur = b.add(tx, n) if kind == "expect_tx" else b.sub(tx, n)
        self._mb_fail(b.icmp_unsigned(">", cur, c(M20)), what, "mbarrier transaction count out of range")  # (<0 wraps)
        v = self._mb_encode(phase, pending, expected, cur)
        if kind == "complete_tx":
            done = b.and_(b.icmp_unsigned("==", cur, c(0)), b.icmp_unsigned("==", pending, c(0)))
            v = b.select(done, self._mb_encode(b.add(phase, c(1)), expected, expected, c(0)), v)
        self._tag(b.store(v, p, align=8), "shared")

    def _mb_arrive(self, ins: Instr, drop: bool) -> None:
        """mbarrier.arrive(_drop)(.expect_tx): the state before the arrival into the destination"""
        b = self.b
        c = lambda x: ir.Constant(I64, x)  # noqa: E731
        p, what = self._mb_ptr(ins, ins.args[1])
        with_tx = "expect_tx" in ins.parts
        if with_tx:
            cnt, add = c(1), b.zext(self.read(ins.args[2], "u32"), I64)
        else:
            cnt = b.zext(self.read(ins.args[2], "u32"), I64) if len(ins.args) > 2 else c(1)
            add = c(0)
        v = self._mb_live(p, what)
        self._tag(b.store(self._mb_arrived(v, cnt, add, drop, with_tx), p, align=8), "shared")
        self.write(ins.args[0], v, "b64")

    def _mb_live(self, p, what: str):
        """the object's value, which must be initialised (ops_mbarrier._check_live)"""
        b = self.b
        v = self._tag(b.load(p, align=8), "shared")
        self._mb_fail(b.icmp_unsigned("==", b.and_(v, ir.Constant(I64, (1 << 60) - 1)), ir.Constant(I64, 0)), what,
                      "arrive on an mbarrier that was not initialised (or was invalidated)")  # fmt: skip
        return v

    def _mb_arrived(self, v, cnt, add, drop: bool, with_tx: bool):
        """the value after one thread's arrival of cnt (adding `add` transactions): ops_mbarrier._arrive_plain
        without a drop or transactions, on an object with expected arrivals and no pending transactions (a
        count past the pending arrivals completes further phases), else _arrive_one"""
        b = self.b
        c = lambda x: ir.Constant(I64, x)  # noqa: E731
        phase, pending, expected, tx = self._mb_fields(v)
        # _arrive_one: signed arithmetic on the 20-bit fields
        exp1 = b.select(b.icmp_signed(">", b.sub(expected, cnt), c(0)), b.sub(expected, cnt), c(0)) if drop \
            else expected  # fmt: skip
        tx1 = b.add(tx, add)
        pend1 = b.sub(pending, cnt)
        done1 = b.and_(b.icmp_signed("<=", pend1, c(0)), b.icmp_unsigned("==", tx1, c(0)))
        one = b.select(done1, self._mb_encode(b.add(phase, c(1)), exp1, exp1, c(0)),
                       self._mb_encode(phase, b.select(b.icmp_signed(">", pend1, c(0)), pend1, c(0)), exp1, tx1))
        if drop or with_tx:
            return one
        # _arrive_plain for this thread's count (when the object has expected arrivals and no transactions)
        over = b.sub(cnt, pending)  # arrivals past the phase's pending ones
        ge = b.icmp_signed(">=", over, c(0))
        safe = b.select(b.icmp_unsigned("==", expected, c(0)), c(1), expected)
        kf = b.add(b.udiv(over, safe), c(1))
        plain = b.select(ge, self._mb_encode(b.add(phase, kf), b.sub(expected, b.urem(over, safe)), expected, c(0)),
                         self._mb_encode(phase, b.sub(pending, cnt), expected, c(0)))  # fmt: skip
        use = b.and_(b.icmp_unsigned("==", tx, c(0)), b.icmp_unsigned(">", expected, c(0)))
        return b.select(use, plain, one)

    def _mb_wait(self, ins: Instr) -> None:
        b = self.b
        c = lambda x: ir.Constant(I64, x)  # noqa: E731
        p, _ = self._mb_ptr(ins, ins.args[1])
        phase = b.lshr(self._tag(b.load(p, align=8), "shared"), c(60))
        if "parity" in ins.parts:
            s = b.zext(self.read(ins.args[2], "u32"), I64)
            done = b.icmp_unsigned("!=", b.and_(phase, c(1)), b.and_(s, c(1)))
        else:
            done = b.icmp_unsigned("!=", phase, b.lshr(self.read(ins.args[2], "b64"), c(60)))
        self.write(ins.args[0], done, "pred")
        wait, go = self.f.append_basic_block("mb_wait"), self.f.append_basic_block("mb_go")
        b.cbranch(done, go, wait)
        b.position_at_end(wait)
        self.bar_info[self._stop()] = YIELD  # false: the others run first; resumed, the thread goes on
        self.b.branch(go)
        self.b.position_at_end(go)
        self._known_blk = None

    def op_cp_mbarrier(self, ins: Instr) -> None:
        """cp.async.mbarrier.arrive(.noinc): copies are complete when issued, so the arrival happens now: with
        .noinc one arrival, without it none (ops_mbarrier.compile_cp_async_arrive)"""
        if "noinc" not in ins.parts:
            return
        b = self.b
        p, what = self._mb_ptr(ins, ins.args[0])
        v = self._mb_live(p, what)
        self._tag(b.store(self._mb_arrived(v, ir.Constant(I64, 1), ir.Constant(I64, 0), False, False), p, align=8),
                  "shared")
