"""LLVM IR as text, written instruction by instruction: the subset of `llvmlite.ir`'s API the JIT uses.

Why not llvmlite.ir itself: building a module with it and printing it was ~40% of tier 1's compile time
(measured: mathf, 973 PTX instructions, 9235 IR lines: 141 ms to build + 97 ms for str(module), CPU; an
object graph per instruction, name de-duplication scopes, all the formatting done again at str()). Here each
instruction's line is formatted when it is built (operands already carry their "type ref" text), names are
sequential numbers (unique per module, so no scopes), types are interned (compared by identity), and
str(module) is a join. Only phi and switch, which grow after they are built, are formatted at str().

Same call signatures and semantics as llvmlite.ir for what is here (casts to the same type return the value,
binary operands must have one type, store checks the pointee); what is not here raises AttributeError.
tests/ptx/test_jit_textir.py checks that every test kernel's IR is the one llvmlite.ir builds.
"""

from __future__ import annotations

import itertools
import struct

_CMP = {">": "gt", "<": "lt", "==": "eq", "!=": "ne", ">=": "ge", "<=": "le"}


# -- types (interned: one object per type, so `==` and `is` agree) -----------------------------------------------
class Type:
    __slots__ = ("_s", "_ptr")
    null = "zeroinitializer"

    def _init(self, s: str) -> None:
        self._s = s
        self._ptr = None

    def __str__(self) -> str:
        return self._s

    def __repr__(self) -> str:
        return f"<textir type {self._s}>"

    def as_pointer(self) -> PointerType:
        p = self._ptr
        if p is None:
            p = self._ptr = PointerType(self)
        return p

    def format_constant(self, v) -> str:
        return str(v)


class IntType(Type):
    __slots__ = ("width",)
    _cache: dict[int, IntType] = {}
    null = "0"

    def __new__(cls, width: int) -> IntType:
        t = cls._cache.get(width)
        if t is None:
            t = cls._cache[width] = object.__new__(cls)
            t._init(f"i{width}")
            t.width = width
        return t

    def format_constant(self, v) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)


def _hex_double(v: float) -> str:
    return f"0x{struct.unpack('<Q', struct.pack('<d', v))[0]:016x}"


class _OneType(Type):
    """A type with one instance (named `_name`)."""

    __slots__ = ()
    _name = ""

    def __new__(cls):
        one = cls.__dict__.get("_one")
        if one is None:
            one = object.__new__(cls)
            one._init(cls._name)
            cls._one = one
        return one


class FloatType(_OneType):
    __slots__ = ()
    _name, null = "float", "0.0"

    def format_constant(self, v) -> str:  # rounded to f32, written as the double of the same value
        return _hex_double(struct.unpack("<f", struct.pack("<f", v))[0])


class DoubleType(_OneType):
    __slots__ = ()
    _name, null = "double", "0.0"

    def format_constant(self, v) -> str:
        return _hex_double(v)


class VoidType(_OneType):
    __slots__ = ()
    _name = "void"


class MetaDataType(_OneType):  # the type of a metadata argument (constrained FP intrinsics: ops_hwround.py)
    __slots__ = ()
    _name = "metadata"


class PointerType(Type):
    __slots__ = ("pointee",)
    null = "null"

    def __new__(cls, pointee: Type) -> PointerType:
        if pointee._ptr is not None:
            return pointee._ptr
        t = object.__new__(cls)
        t._init(f"{pointee._s}*")
        t.pointee = pointee
        pointee._ptr = t
        return t


class ArrayType(Type):
    __slots__ = ("element", "count")
    _cache: dict[tuple[Type, int], ArrayType] = {}

    def __new__(cls, element: Type, count: int) -> ArrayType:
        t = cls._cache.get((element, count))
        if t is None:
            t = cls._cache[element, count] = object.__new__(cls)
            t._init(f"[{count} x {element._s}]")
            t.element, t.count = element, count
        return t

    def format_constant(self, v) -> str:
        e = self.element
        return "[" + ", ".join(x._op if isinstance(x, Value) else f"{e._s} {e.format_constant(x)}" for x in v) + "]"


class LiteralStructType(Type):
    __slots__ = ("elements",)
    _cache: dict[tuple[Type, ...], LiteralStructType] = {}

    def __new__(cls, elements) -> LiteralStructType:
        key = tuple(elements)
        t = cls._cache.get(key)
        if t is None:
            t = cls._cache[key] = object.__new__(cls)
            t._init("{" + ", ".join(e._s for e in key) + "}")
            t.elements = key
        return t

    def format_constant(self, v) -> str:
        return "{" + ", ".join(x._op for x in v) + "}"


class FunctionType(Type):
    __slots__ = ("return_type", "args")

    def __init__(self, return_type: Type, args) -> None:
        self.return_type, self.args = return_type, tuple(args)
        self._init(f"{return_type._s} ({', '.join(a._s for a in self.args)})")


# -- values --------------------------------------------------------------------------------------------------------
class Value:
    """`type`, `ref` (how operands name it) and `_op` ("type ref", how most operands are written)."""

    __slots__ = ("type", "ref", "_op")


class _Undefined:
    pass


Undefined = _Undefined()


class Constant(Value):
    __slots__ = ("constant",)

    def __init__(self, typ: Type, constant) -> None:
        self.type, self.constant = typ, constant
        if constant.__class__ is int and typ.__class__ is IntType:  # the usual case
            self.ref = str(constant)
        elif constant is None:
            self.ref = typ.null
        elif constant is Undefined:
            self.ref = "undef"
        else:
            self.ref = typ.format_constant(constant)
        self._op = f"{typ._s} {self.ref}"


class MetaDataString(Value):
    __slots__ = ()

    def __init__(self, module: Module, s: str) -> None:
        esc = "".join(c if c.isprintable() and c not in '"\\' else "".join(f"\\{b:02x}" for b in c.encode()) for c in s)
        self.type, self.ref = None, f'!"{esc}"'
        self._op = self.ref


class MDValue(Value):
    __slots__ = ()


class Argument(Value):
    __slots__ = ()

    def __init__(self, typ: Type, ref: str) -> None:
        self.type, self.ref, self._op = typ, ref, f"{typ._s} {ref}"


class Instruction(Value):
    """One instruction; `_line` is its text (metadata appended by set_metadata)."""

    __slots__ = ("_line",)

    def set_metadata(self, kind: str, md: MDValue) -> None:
        self._line += f", !{kind} {md.ref}"


class CondBranch(Instruction):
    __slots__ = ("_module",)

    def set_weights(self, weights) -> None:
        """Branch weights (`!prof`), as llvmlite's ConditionalBranch.set_weights."""
        m = self._module
        ops = [MetaDataString(m, "branch_weights"), *(Constant(IntType(32), w) for w in weights)]
        self.set_metadata("prof", m.add_metadata(ops))


class PhiInstr(Instruction):
    __slots__ = ("_inc",)

    def add_incoming(self, value: Value, block: Block) -> None:
        self._inc.append(f"[{value.ref}, {block.ref}]")

    @property
    def _line(self) -> str:  # type: ignore[override]
        return f"{self.ref} = phi {self.type._s} {', '.join(self._inc)}"


class SwitchInstr(Instruction):
    __slots__ = ("_head", "_cases")

    def add_case(self, val, block: Block) -> None:
        if not isinstance(val, Value):
            val = Constant(self.type, val)
        self._cases.append(f"{val._op}, label {block.ref}")

    @property
    def _line(self) -> str:  # type: ignore[override]
        return f"{self._head} [{' '.join(self._cases)}]"


class _Attributes(list):
    def add(self, name: str) -> None:
        if name not in self:
            self.append(name)


class Block:
    __slots__ = ("function", "name", "ref", "instructions", "is_terminated")

    def __init__(self, function: Function, name: str) -> None:
        self.function, self.name = function, f"{name}.{function.module._next()}"
        self.ref = f'%"{self.name}"'
        self.instructions: list[Instruction] = []
        self.is_terminated = False

    @property
    def parent(self) -> Function:
        return self.function

    def __str__(self) -> str:
        return f'"{self.name}":\n  ' + "\n  ".join([i._line for i in self.instructions])


class _Global(Value):
    """A named value of the module (`@"name"`, a pointer to what it names)."""

    __slots__ = ("module", "name", "linkage")

    def _register(self, module: Module, name: str, value_type: Type) -> None:
        if name in module.globals:
            raise KeyError(f"duplicate global name {name!r}")
        self.module, self.name, self.linkage = module, name, ""
        self.type, self.ref = value_type.as_pointer(), f'@"{name}"'
        self._op = f"{self.type._s} {self.ref}"
        module.globals[name] = self


class Function(_Global):
    __slots__ = ("ftype", "args", "blocks", "attributes")

    def __init__(self, module: Module, ftype: FunctionType, name: str) -> None:
        self._register(module, name, ftype)
        self.ftype = ftype
        self.args = tuple(Argument(t, f"%a{module._next()}") for t in ftype.args)
        self.blocks: list[Block] = []
        self.attributes = _Attributes()
        module.functions.append(self)

    def append_basic_block(self, name: str = "") -> Block:
        blk = Block(self, name)
        self.blocks.append(blk)
        return blk

    @property
    def entry_basic_block(self) -> Block:
        return self.blocks[0]

    @property
    def is_declaration(self) -> bool:
        return not self.blocks

    def __str__(self) -> str:
        attrs = " " + " ".join(self.attributes) if self.attributes else ""
        ret = self.ftype.return_type._s
        if not self.blocks:
            return f"declare {ret} {self.ref}({', '.join(a.type._s for a in self.args)}){attrs}"
        link = self.linkage + " " if self.linkage else ""
        head = f"define {link}{ret} {self.ref}({', '.join(a._op for a in self.args)}){attrs}"
        return head + "\n{\n" + "\n".join([str(b) for b in self.blocks]) + "\n}"


class GlobalVariable(_Global):
    __slots__ = ("value_type", "global_constant", "initializer")

    def __init__(self, module: Module, typ: Type, name: str) -> None:
        self._register(module, name, typ)
        self.value_type, self.global_constant, self.initializer = typ, False, None
        module._gvars.append(self)

    def __str__(self) -> str:
        link = self.linkage or ("external" if self.initializer is None else "")
        kind = "constant" if self.global_constant else "global"
        init = f" {self.initializer.ref}" if self.initializer is not None else ""
        return f"{self.ref} = {link + ' ' if link else ''}{kind} {self.value_type._s}{init}"


class Module:
    def __init__(self, name: str = "") -> None:
        self.name, self.triple, self.data_layout = name, "", ""
        self.globals: dict[str, Function | GlobalVariable] = {}
        self.functions: list[Function] = []
        self._gvars: list[GlobalVariable] = []
        self._md: dict[tuple[str, ...], MDValue] = {}
        self._next = itertools.count(1).__next__  # value, argument and block numbers (unique in the module)

    def get_global(self, name: str) -> Function | GlobalVariable:
        return self.globals[name]

    def add_metadata(self, operands) -> MDValue:
        """An unnamed metadata node; equal operands give the same node (as llvmlite)."""
        key = tuple(o._op for o in operands)
        md = self._md.get(key)
        if md is None:
            md = self._md[key] = MDValue()
            md.type, md.ref = None, f"!{len(self._md) - 1}"
            md._op = md.ref
        return md

    def __str__(self) -> str:
        out = [
            f'; ModuleID = "{self.name}"',
            f'target triple = "{self.triple}"',
            f'target datalayout = "{self.data_layout}"',
            "",
        ]
        out += [str(g) for g in self._gvars]
        out += [str(f) + "\n" for f in self.functions]
        out += [f"{md.ref} = !{{ {', '.join(k)} }}" for k, md in self._md.items()]
        return "\n".join(out) + "\n"


# -- the builder ---------------------------------------------------------------------------------------------------
def _binop(op: str):
    def emit(self: IRBuilder, lhs: Value, rhs: Value, name: str = "") -> Instruction:
        if lhs.type is not rhs.type:
            raise ValueError(f"Operands must be the same type, got ({lhs.type}, {rhs.type})")
        return self._val(lhs.type, f"{op} {lhs._op}, {rhs.ref}", name)

    return emit


def _cast(op: str):
    def emit(self: IRBuilder, val: Value, typ: Type, name: str = "") -> Value:
        if val.type is typ:
            return val
        return self._val(typ, f"{op} {val._op} to {typ._s}", name)

    return emit


_I1, _VOID = IntType(1), VoidType()


class IRBuilder:
    __slots__ = ("_blk", "_ins", "_at", "_next", "_put")

    def __init__(self, block: Block | None = None) -> None:
        self._blk: Block | None = None
        if block is not None:
            self.position_at_end(block)

    # -- position
    @property
    def block(self) -> Block:
        return self._blk

    basic_block = block

    @property
    def function(self) -> Function:
        return self._blk.function

    @property
    def module(self) -> Module:
        return self._blk.function.module

    def position_at_end(self, block: Block) -> None:
        self._blk, self._ins, self._at = block, block.instructions, None
        self._next = block.function.module._next
        self._put = block.instructions.append

    def position_at_start(self, block: Block) -> None:
        self.position_at_end(block)
        self._at, self._put = 0, self._insert

    def append_basic_block(self, name: str = "") -> Block:
        return self._blk.function.append_basic_block(name)

    # -- emitting
    def _insert(self, ins: Instruction) -> None:  # (_put after position_at_start)
        self._ins.insert(self._at, ins)
        self._at += 1

    def _val(self, typ: Type, text: str, name: str) -> Instruction:
        ins = Instruction()
        ref = f'%"{name}.{self._next()}"' if name else f"%.{self._next()}"
        ins.type, ins.ref, ins._op, ins._line = typ, ref, f"{typ._s} {ref}", f"{ref} = {text}"
        self._put(ins)
        return ins

    def _void(self, text: str) -> Instruction:
        ins = Instruction()
        ins.type, ins.ref, ins._op, ins._line = _VOID, "", "", text
        self._put(ins)
        return ins

    def _term(self, ins: Instruction) -> Instruction:
        if self._blk.is_terminated:
            raise AssertionError("the block is already terminated")
        self._blk.is_terminated = True
        self._put(ins)
        return ins

    add, sub, mul = _binop("add"), _binop("sub"), _binop("mul")
    udiv, sdiv, urem, srem = _binop("udiv"), _binop("sdiv"), _binop("urem"), _binop("srem")
    and_, or_, xor = _binop("and"), _binop("or"), _binop("xor")
    shl, lshr, ashr = _binop("shl"), _binop("lshr"), _binop("ashr")
    fadd, fsub, fmul, fdiv, frem = _binop("fadd"), _binop("fsub"), _binop("fmul"), _binop("fdiv"), _binop("frem")

    trunc, zext, sext = _cast("trunc"), _cast("zext"), _cast("sext")
    fptrunc, fpext, bitcast = _cast("fptrunc"), _cast("fpext"), _cast("bitcast")
    fptoui, fptosi, uitofp, sitofp = _cast("fptoui"), _cast("fptosi"), _cast("uitofp"), _cast("sitofp")
    ptrtoint, inttoptr = _cast("ptrtoint"), _cast("inttoptr")

    def not_(self, value: Value, name: str = "") -> Instruction:
        return self.xor(value, Constant(value.type, -1), name)

    def neg(self, value: Value, name: str = "") -> Instruction:
        return self.sub(Constant(value.type, 0), value, name)

    def fneg(self, arg: Value, name: str = "") -> Instruction:
        return self._val(arg.type, f"fneg {arg._op}", name)

    def icmp_signed(self, cmpop: str, lhs: Value, rhs: Value, name: str = "") -> Instruction:
        op = _CMP[cmpop]
        return self._val(_I1, f"icmp {op if op in ('eq', 'ne') else 's' + op} {lhs._op}, {rhs.ref}", name)

    def icmp_unsigned(self, cmpop: str, lhs: Value, rhs: Value, name: str = "") -> Instruction:
        op = _CMP[cmpop]
        return self._val(_I1, f"icmp {op if op in ('eq', 'ne') else 'u' + op} {lhs._op}, {rhs.ref}", name)

    def fcmp_ordered(self, cmpop: str, lhs: Value, rhs: Value, name: str = "") -> Instruction:
        op = "o" + _CMP[cmpop] if cmpop in _CMP else cmpop
        return self._val(_I1, f"fcmp {op} {lhs._op}, {rhs.ref}", name)

    def fcmp_unordered(self, cmpop: str, lhs: Value, rhs: Value, name: str = "") -> Instruction:
        op = "u" + _CMP[cmpop] if cmpop in _CMP else cmpop
        return self._val(_I1, f"fcmp {op} {lhs._op}, {rhs.ref}", name)

    def select(self, cond: Value, lhs: Value, rhs: Value, name: str = "") -> Instruction:
        return self._val(lhs.type, f"select {cond._op}, {lhs._op}, {rhs._op}", name)

    # -- memory
    def alloca(self, typ: Type, size=None, name: str = "") -> Instruction:
        if size is None:
            return self._val(typ.as_pointer(), f"alloca {typ._s}", name)
        if not isinstance(size, Value):
            size = Constant(IntType(32), size)
        return self._val(typ.as_pointer(), f"alloca {typ._s}, {size._op}", name)

    def load(self, ptr: Value, name: str = "", align: int | None = None, typ: Type | None = None) -> Instruction:
        t = typ or ptr.type.pointee
        al = f", align {align}" if align else ""
        return self._val(t, f"load {t._s}, {ptr._op}{al}", name)

    def load_atomic(
        self, ptr: Value, ordering: str, align: int, name: str = "", typ: Type | None = None
    ) -> Instruction:
        t = typ or ptr.type.pointee
        return self._val(t, f"load atomic {t._s}, {ptr._op} {ordering}, align {align}", name)

    def atomic_rmw(self, op: str, ptr: Value, val: Value, ordering: str, name: str = "") -> Instruction:
        return self._val(val.type, f"atomicrmw {op} {ptr._op}, {val._op} {ordering}", name)

    def store(self, value: Value, ptr: Value, align: int | None = None) -> Instruction:
        if ptr.type.pointee is not value.type:
            raise TypeError(f"cannot store {value.type} to {ptr.type}: mismatching types")
        return self._void(f"store {value._op}, {ptr._op}" + (f", align {align}" if align else ""))

    def gep(self, ptr: Value, indices, inbounds: bool = False, name: str = "") -> Instruction:
        src = t = ptr.type.pointee
        for i in indices[1:]:
            t = t.elements[i.constant] if isinstance(t, LiteralStructType) else t.element
        idx = "".join([", " + i._op for i in indices])
        return self._val(
            t.as_pointer(), f"getelementptr {'inbounds ' if inbounds else ''}{src._s}, {ptr._op}{idx}", name
        )

    # -- aggregates
    def extract_value(self, agg: Value, idx: int, name: str = "") -> Instruction:
        t = agg.type
        t = t.elements[idx] if isinstance(t, LiteralStructType) else t.element
        return self._val(t, f"extractvalue {agg._op}, {idx}", name)

    def insert_value(self, agg: Value, value: Value, idx: int, name: str = "") -> Instruction:
        return self._val(agg.type, f"insertvalue {agg._op}, {value._op}, {idx}", name)

    # -- calls, phis
    def call(self, fn: Function | Value, args, name: str = "", tail: bool = False) -> Instruction:
        # a Function, or a function pointer (the host call of ops_sys.py)
        rt = fn.ftype.return_type if isinstance(fn, Function) else fn.type.pointee.return_type
        ops = [f"metadata {a.ref}" if isinstance(a, MetaDataString) else a._op for a in args]
        text = f"{'tail ' if tail else ''}call {rt._s} {fn.ref}({', '.join(ops)})"
        return self._void(text) if rt is _VOID else self._val(rt, text, name)

    def phi(self, typ: Type, name: str = "") -> PhiInstr:
        ins = PhiInstr()
        ins.type, ins.ref = typ, f'%"{name}.{self._next()}"' if name else f"%.{self._next()}"
        ins._op, ins._inc = f"{typ._s} {ins.ref}", []
        self._put(ins)
        return ins

    # -- terminators
    def branch(self, target: Block) -> Instruction:
        return self._term_text(f"br label {target.ref}")

    def cbranch(self, cond: Value, truebr: Block, falsebr: Block) -> CondBranch:
        ins = CondBranch()
        ins.type, ins.ref, ins._op, ins._module = _VOID, "", "", self._blk.function.module
        ins._line = f"br {cond._op}, label {truebr.ref}, label {falsebr.ref}"
        return self._term(ins)

    def switch(self, value: Value, default: Block) -> SwitchInstr:
        ins = SwitchInstr()
        ins.type, ins.ref, ins._op = value.type, "", ""
        ins._head, ins._cases = f"switch {value._op}, label {default.ref}", []
        return self._term(ins)

    def ret(self, value: Value) -> Instruction:
        return self._term_text(f"ret {value._op}")

    def ret_void(self) -> Instruction:
        return self._term_text("ret void")

    def unreachable(self) -> Instruction:
        return self._term_text("unreachable")

    def _term_text(self, text: str) -> Instruction:
        ins = Instruction()
        ins.type, ins.ref, ins._op, ins._line = _VOID, "", "", text
        return self._term(ins)
