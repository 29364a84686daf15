"""The builtins the linker turns into pseudo-instructions: `@vprintf`, `@__assertfail`, `@malloc`, `@free`
(a mixin of codegen.Codegen). Each is a call from the native code back into Python (hostcall.py) through the
function pointer in the context's HOSTCALL slot: (kind, thread, block, a0..a3) -> i64, with the arguments read
from the call's parameter slots in the thread's local frame, as the interpreter reads them (ops_sys.py). A
failed call (a bad string address, an assert) sets the context's ERR slot and the thread takes the fault exit;
hostcall.py keeps the CudaError the launch then raises."""

from __future__ import annotations

from gpushim.ptx.jit import layout as L
from gpushim.ptx.jit import textir as ir
from gpushim.ptx.jit.irtypes import I32, I64, JitUnsupported
from gpushim.ptx.nodes import Instr, Plist, Sym

PRINTF, ASSERT, MALLOC, FREE = range(4)  # the kinds of host calls (hostcall.py dispatches on them)
HOST_OPS = {"@vprintf", "@__assertfail", "@malloc", "@free"}
_FTY = ir.FunctionType(I64, [I64] * 7)


class SysOps:
    def _slot_ptr(self, op, ty):
        """The frame slot of a call argument or result (a `.param` variable of the caller's frame)."""
        if not isinstance(op, Sym) or op.name not in self.prog.frame:
            raise JitUnsupported("builtin call argument is not a parameter slot")
        p = self.b.gep(self.lobuf, [ir.Constant(I64, self.prog.frame[op.name] + op.offset)])
        return self.b.bitcast(p, ty.as_pointer())

    def _arg(self, op, bits: int = 64):
        v = self._tag(self.b.load(self._slot_ptr(op, ir.IntType(bits))), "local")
        return v if bits == 64 else self.b.zext(v, I64)

    def _host_call(self, ins: Instr, kind: int, args: list, ret_bits: int = 0) -> None:
        """Call the host; store its answer in the result slot (ret_bits wide, if the call has one); a failed call
        (ERR set in the context) leaves through the fault exit."""
        if self.mode != "exact":  # taint.py keeps these kernels off the check pass and the fast code
            raise JitUnsupported(f"{ins.op} in {self.mode} mode")
        rets, _ = ins.args
        b = self.b
        self.host_calls = True
        fn = b.inttoptr(self._ctx(L.HOSTCALL), _FTY.as_pointer())
        args = args + [ir.Constant(I64, 0)] * (4 - len(args))
        r = b.call(fn, [ir.Constant(I64, kind), self.t, self.blk, *args])
        err = b.load(b.gep(self.ctx, [ir.Constant(I32, L.ERR)]))
        ok = self.f.append_basic_block()
        b.cbranch(b.icmp_unsigned("!=", err, ir.Constant(I64, 0)), self.fail_blk, ok).set_weights([1, 1 << 20])
        b.position_at_end(ok)
        if ret_bits and isinstance(rets, Plist) and rets.items:
            rt = ir.IntType(ret_bits)
            self._tag(b.store(b.trunc(r, rt) if ret_bits < 64 else r, self._slot_ptr(rets.items[0], rt)), "local")

    def _call_args(self, ins: Instr, n: int) -> tuple:
        _, args = ins.args
        if not isinstance(args, Plist) or len(args.items) < n:
            raise JitUnsupported(f"{ins.op} with {n} arguments expected")
        return args.items

    def op_at_vprintf(self, ins: Instr) -> None:
        items = self._call_args(ins, 1)
        argp = self._arg(items[1]) if len(items) > 1 else ir.Constant(I64, 0)
        self._host_call(ins, PRINTF, [self._arg(items[0]), argp], 32)  # returns the number of arguments

    def op_at___assertfail(self, ins: Instr) -> None:
        m, f, line, fn = self._call_args(ins, 4)[:4]
        self._host_call(ins, ASSERT, [self._arg(m), self._arg(f), self._arg(line, 32), self._arg(fn)])

    def op_at_malloc(self, ins: Instr) -> None:
        self._host_call(ins, MALLOC, [self._arg(self._call_args(ins, 1)[0])], 64)

    def op_at_free(self, ins: Instr) -> None:
        self._host_call(ins, FREE, [self._arg(self._call_args(ins, 1)[0])])
        # the freed block may be some access site's cached allocation: every site searches anew (the
        # blocks that reset them are filled in once the thread function is done and the sites are known)
        b = self.b
        reset = self.f.append_basic_block("acache_reset")
        after = self.f.append_basic_block()
        b.branch(reset)
        self.acache_resets.append((reset, after))
        b.position_at_end(after)

    def _fill_acache_resets(self) -> None:
        for reset, after in self.acache_resets:
            b = ir.IRBuilder(reset)
            for k in range(self.ncache):
                b.store(ir.Constant(I64, 1), self._cache_slot(2 * k, b))
                b.store(ir.Constant(I64, 0), self._cache_slot(2 * k + 1, b))
            b.branch(after)
        self.acache_resets = []
