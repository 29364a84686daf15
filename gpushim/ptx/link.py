"""Linker: flattens one kernel and every device function it calls into a single instruction list.

Direct calls are inlined (recursion is rejected). Each inlined instance gets its own registers, labels and
per-thread frame slots (`name@k`); the callee's parameters alias the caller's argument slots, and `ret` becomes
a branch to the end of the instance. Parameter slots of calls and `.local` variables share one per-thread frame.
Calls to the builtins vprintf and __assertfail become pseudo-instructions `@vprintf` / `@__assertfail`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpushim.ptx.errors import PtxError, PtxUnsupported
from gpushim.ptx.nodes import Addr, Function, Imm, Instr, Label, Module, Neg, Plist, PredPair, Reg, Sym, VarDecl, Vec

BUILTINS = {"vprintf", "__assertfail", "malloc", "free", "cudaGraphSetConditional", "cudaGraphLaunch"}


def align_up(x: int, a: int) -> int:
    return -(-x // max(a, 1)) * max(a, 1)


@dataclass
class Program:
    kernel: str
    code: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    regs: dict[str, str] = field(default_factory=dict)
    shared: dict[str, int] = field(default_factory=dict)  # static shared variable -> byte offset
    dynamic_shared: set[str] = field(default_factory=set)  # .extern .shared names (start after static)
    static_shared: int = 0
    dynamic_offset: int = 0
    frame: dict[str, int] = field(default_factory=dict)  # .local variables and call parameter slots -> offset
    frame_bytes: int = 0
    kparams: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (offset, size)
    param_bytes: int = 0
    param_layout: list[tuple[int, int, int]] = field(default_factory=list)  # (offset, size, align)
    branch_tables: dict[str, list[str]] = field(default_factory=dict)
    used_globals: set[str] = field(default_factory=set)  # module .global/.const variables the kernel names


def _rename_operand(x, rn):
    if isinstance(x, Reg):
        return Reg(rn(x.name))
    if isinstance(x, Sym):
        return Sym(rn(x.name), x.offset)
    if isinstance(x, Addr):
        return Addr(_rename_operand(x.base, rn) if x.base is not None else None, x.offset)
    if isinstance(x, Vec):
        return Vec(tuple(_rename_operand(i, rn) for i in x.items))
    if isinstance(x, Plist):
        return Plist(tuple(_rename_operand(i, rn) for i in x.items))
    if isinstance(x, Neg):
        return Neg(Reg(rn(x.inner.name)))
    if isinstance(x, PredPair):
        return PredPair(*(Reg(rn(r.name)) if r is not None else None for r in (x.first, x.second)))
    return x


class _Linker:
    def __init__(self, mod: Module, kernel: Function, max_depth: int = 0) -> None:
        self.mod = mod
        self.kernel = kernel
        self.max_depth = max_depth  # inlined copies of a recursive function (0: recursion is unsupported)
        self.p = Program(kernel.name)
        self.instances = 0
        self.mod_shared = {v.name: v for v in mod.variables if v.space == "shared"}

    def fail(self, what: str, line: int = 0) -> PtxUnsupported:
        return PtxUnsupported(what, self.kernel.name, line)

    def alloc_frame(self, name: str, size: int, align: int) -> None:
        off = align_up(self.p.frame_bytes, align)
        self.p.frame[name] = off
        self.p.frame_bytes = off + max(size, 1)

    def alloc_shared(self, v: VarDecl) -> None:
        if v.name in self.p.shared or v.name in self.p.dynamic_shared:
            return
        if v.extern or v.count == 0:
            self.p.dynamic_shared.add(v.name)
            self.dyn_align = max(getattr(self, "dyn_align", 16), v.align)
            return
        off = align_up(self.p.static_shared, v.align)
        self.p.shared[v.name] = off
        self.p.static_shared = off + v.size

    def link(self) -> Program:
        k = self.kernel
        off = 0
        for prm in k.params:
            if prm.space != "param":
                raise self.fail(f"kernel parameter {prm.name} in .{prm.space} space", prm.line)
            off = align_up(off, prm.align)
            self.p.kparams[prm.name] = (off, prm.size)
            self.p.param_layout.append((off, prm.size, prm.align))
            off += prm.size
        self.p.param_bytes = off
        self.p.regs.update(k.regs)
        self.emit(k, lambda n: n, [k.name], ret_label=None)
        # module-scope shared variables the kernel uses
        used = set()
        for ins in self.p.code:
            for a in ins.args:
                _collect_syms(a, used)
        self.p.used_globals = {v.name for v in self.mod.variables if v.space in ("global", "const")} & used
        for v in self.mod.variables:
            if v.extern and v.name in used and v.space in ("global", "const"):
                raise self.fail(f".extern .{v.space} variable {v.name} (needs device linking, -rdc)", v.line)
        for name in sorted(used & set(self.mod_shared), key=lambda n: self.mod_shared[n].line):
            self.alloc_shared(self.mod_shared[name])
        self.p.dynamic_offset = align_up(self.p.static_shared, getattr(self, "dyn_align", 16))
        return self.p

    def emit(self, fn: Function, rn, stack: list[str], ret_label: str | None) -> None:
        p = self.p
        for item in fn.body:
            if isinstance(item, Label):
                p.labels[rn(item.name)] = len(p.code)
            elif isinstance(item, VarDecl):
                if item.space in ("local", "param"):
                    self.alloc_frame(rn(item.name), item.size, item.align)
                elif item.space == "shared":
                    self.alloc_shared(item)
                else:
                    raise self.fail(f".{item.space} variable {item.name} declared inside a function", item.line)
            else:
                ins = item
                base = ins.op.split(".")[0]
                if ins.op == ".branchtargets":
                    table = [rn(s.name) for s in ins.args]
                    p.branch_tables[rn(_last_label(fn, ins))] = table
                    continue
                if base == "call":
                    self.emit_call(ins, rn, stack)
                elif base == "ret" and ret_label is not None:
                    guard = (rn(ins.guard[0]), ins.guard[1]) if ins.guard else None
                    p.code.append(Instr("bra", [Sym(ret_label)], guard, ins.line))
                else:
                    guard = (rn(ins.guard[0]), ins.guard[1]) if ins.guard else None
                    args = [_regs_by_name(_rename_operand(a, rn), p.regs) for a in ins.args]
                    p.code.append(Instr(ins.op, args, guard, ins.line, ret_label is not None))

    def emit_call(self, ins: Instr, rn, stack: list[str]) -> None:
        args = list(ins.args)
        rets: tuple = ()
        if args and isinstance(args[0], Plist):
            rets = args.pop(0).items
        if not args:
            raise PtxError(f"line {ins.line}: call without a target")
        target = args.pop(0)
        cargs: tuple = args.pop(0).items if args and isinstance(args[0], Plist) else ()
        guard = (rn(ins.guard[0]), ins.guard[1]) if ins.guard else None
        skip = None
        if guard is not None:
            self.instances += 1
            skip = f"$skipcall@{self.instances}"
            self.p.code.append(Instr("bra", [Sym(skip)], (guard[0], not guard[1]), ins.line))
        if isinstance(target, Reg):
            self.emit_indirect(Reg(rn(target.name)), rets, cargs, rn, stack, ins.line)
        elif not isinstance(target, Sym):
            raise self.fail(f"call through {target}", ins.line)
        elif (target.name in BUILTINS and not (
            target.name in self.mod.functions and self.mod.functions[target.name].defined
        )) or target.name.startswith("__cudaCDP2"):
            # the device runtime of dynamic parallelism goes by name: libcudadevrt's bodies only make system
            # calls of the GPU (gpushim/ptx/devrt.py)
            from gpushim.ptx.devrt import NAMES

            if target.name.startswith("__cudaCDP2") and target.name not in NAMES:
                api = "cuda" + target.name[len("__cudaCDP2"):]
                raise self.fail(f"device runtime function {api} ({target.name}) in device code", ins.line)
            ops = [Sym(rn(r.name)) if isinstance(r, Sym) else r for r in rets]
            opa = [self._arg_slot(a, rn, 8, ins.line) for a in cargs]
            self.p.code.append(Instr("@" + target.name, [Plist(tuple(ops)), Plist(tuple(opa))], None, ins.line))
        else:
            self.inline(target.name, rets, cargs, rn, stack, ins.line)
        if skip is not None:
            self.p.labels[skip] = len(self.p.code)

    def emit_indirect(self, target: Reg, rets: tuple, cargs: tuple, rn, stack: list[str], line: int) -> None:
        """call through a function pointer: compare it with the address of every function whose address the
        module takes and that has the right arity, and inline the matching one; other addresses trap."""
        cands = [
            f for f in sorted(self.mod.address_taken)
            if self.mod.functions[f].defined and len(self.mod.functions[f].params) == len(cargs)
            and len(self.mod.functions[f].rets) == len(rets)
        ]  # fmt: skip
        if not cands:
            # no function can be the target: reaching the call traps (numba's NRT links a destructor call
            # through a pointer that its kernels leave null, so the call is never reached)
            self.p.code.append(Instr("trap", [], None, line))
            return
        self.instances += 1
        k = self.instances
        pred = f"%icall@{k}"
        self.p.regs[pred] = "pred"
        done = f"$icall_done@{k}"
        for j, f in enumerate(cands):
            nxt = f"$icall_next@{k}.{j}"
            self.p.code.append(
                Instr("setp.ne.u64", [Reg(pred), target, Imm(function_address(self.mod, f))], None, line)
            )
            self.p.code.append(Instr("bra", [Sym(nxt)], (pred, False), line))
            self.inline(f, rets, cargs, rn, stack, line)
            self.p.code.append(Instr("bra", [Sym(done)], None, line))
            self.p.labels[nxt] = len(self.p.code)
        self.p.code.append(Instr("trap", [], None, line))
        self.p.labels[done] = len(self.p.code)

    def inline(self, name: str, rets: tuple, cargs: tuple, rn, stack: list[str], line: int) -> None:
        fn = self.mod.functions.get(name)
        if fn is None or not fn.defined:
            raise self.fail(f"call to external function {name} (not defined in this module)", line)
        if name in stack:
            if self.max_depth == 0:
                raise self.fail(f"recursive call to {name}", line)
            if stack.count(name) >= self.max_depth:
                # deeper than the inlined copies: running this far fails like a device stack overflow
                self.p.code.append(Instr("@stackoverflow", [Sym(name), Imm(self.max_depth)], None, line))
                return
        if self.max_depth and len(self.p.code) > MAX_CODE:
            raise _TooBig()
        # A module's calls match its own prototype; linking goes by name. A caller whose prototype has a return
        # value calling a definition without one (numba's abi="c" declare_device of a void function) gets an
        # undefined value: its return slot is left as it was.
        if not fn.rets and rets:
            rets = ()
        if len(cargs) != len(fn.params) or len(rets) != len(fn.rets):
            raise PtxError(f"line {line}: call to {name} with the wrong number of arguments")
        self.instances += 1
        k = self.instances
        mapping: dict[str, str] = {}
        for prm, a in zip(fn.params, cargs, strict=True):
            mapping[prm.name] = self._arg_slot(a, rn, prm.size, line, prm).name
        for prm, r in zip(fn.rets, rets, strict=True):
            if not isinstance(r, Sym):
                raise self.fail("call returning into a register", line)
            mapping[prm.name] = rn(r.name)
        local_names = set(fn.regs)
        for it in fn.body:
            if isinstance(it, Label):
                local_names.add(it.name)
            elif isinstance(it, VarDecl) and it.space in ("local", "param"):
                local_names.add(it.name)

        def crn(n: str, mapping=mapping, local_names=local_names, k=k) -> str:
            m = mapping.get(n)
            if m is not None:
                return m
            return f"{n}@{k}" if n in local_names else n

        for r, t in fn.regs.items():
            self.p.regs[crn(r)] = t
        ret_label = f"$ret@{k}"
        self.emit(fn, crn, stack + [name], ret_label)
        self.p.labels[ret_label] = len(self.p.code)

    def _arg_slot(self, a, rn, size: int, line: int, prm: VarDecl | None = None) -> Sym:
        if isinstance(a, Sym):
            return Sym(rn(a.name))
        if isinstance(a, (Reg, Imm)):
            self.instances += 1
            slot = f"$arg@{self.instances}"
            self.alloc_frame(slot, size, size)
            t = prm.type if prm is not None and prm.count == 1 else f"b{size * 8}"
            self.p.code.append(Instr(f"st.param.{t}", [Addr(Sym(slot)), _rename_operand(a, rn)], None, line))
            return Sym(slot)
        raise PtxError(f"line {line}: bad call argument {a}")


def _regs_by_name(x, regs: dict):
    """Registers may be named without '%' (inline asm): turn such symbol operands into registers."""
    if isinstance(x, Sym) and x.offset == 0 and x.name in regs:
        return Reg(x.name)
    if isinstance(x, Addr) and isinstance(x.base, Sym) and x.base.offset == 0 and x.base.name in regs:
        return Addr(Reg(x.base.name), x.offset)
    if isinstance(x, Vec):
        return Vec(tuple(_regs_by_name(i, regs) for i in x.items))
    return x


def _last_label(fn: Function, ins: Instr) -> str:
    prev = None
    for it in fn.body:
        if it is ins:
            break
        if isinstance(it, Label):
            prev = it.name
    if prev is None:
        raise PtxError(f"line {ins.line}: .branchtargets without a label")
    return prev


def _collect_syms(x, out: set) -> None:
    if isinstance(x, Sym):
        out.add(x.name)
    elif isinstance(x, Addr) and x.base is not None:
        _collect_syms(x.base, out)
    elif isinstance(x, (Vec, Plist)):
        for i in x.items:
            _collect_syms(i, out)


FUNCTION_WINDOW = 0x1300_0000_0000  # "addresses" of device functions (never dereferenced)


def function_address(mod: Module, name: str) -> int:
    return FUNCTION_WINDOW + 16 * sorted(mod.functions).index(name)


MAX_CODE = 150_000  # instructions of one linked kernel
RECURSION_DEPTHS = (32, 16, 10, 6, 3)


class _TooBig(Exception):
    pass


def link_kernel(mod: Module, name: str) -> Program:
    """Link a kernel. Recursive device functions are inlined to a bounded depth (the deepest that keeps the
    kernel under MAX_CODE instructions); a thread recursing deeper fails the launch with
    cudaErrorHardwareStackError instead of computing anything wrong."""
    fn = mod.functions[name]
    try:
        return _Linker(mod, fn).link()
    except PtxUnsupported as e:
        if not e.what.startswith("recursive call"):
            raise
        first = e
    for depth in RECURSION_DEPTHS:
        try:
            return _Linker(mod, fn, depth).link()
        except _TooBig:
            continue
    raise PtxUnsupported(
        f"{first.what} (too large to inline even {RECURSION_DEPTHS[-1]} levels deep)", name, first.line
    )
