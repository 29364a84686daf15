"""The PTX syntax tree: operands, instructions, variable declarations, functions and the module."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class Reg:
    name: str  # a declared register or a special register (%tid.x)


@dataclass(frozen=True)
class Imm:
    value: int | float
    kind: str = "int"  # int | f32bits | f64bits | float


@dataclass(frozen=True)
class Sym:
    name: str  # variable, label or function
    offset: int = 0


@dataclass(frozen=True)
class Addr:
    base: Reg | Sym | None
    offset: int = 0


@dataclass(frozen=True)
class Vec:
    items: tuple


@dataclass(frozen=True)
class Neg:
    inner: Reg  # !%p


@dataclass(frozen=True)
class PredPair:
    first: Reg | None  # setp p|q ("_" sinks give None)
    second: Reg | None


@dataclass(frozen=True)
class Plist:
    items: tuple  # call (a, b) lists


SINK = Reg("_")


@dataclass
class Instr:
    op: str  # full opcode, e.g. "ld.global.v4.f32"
    args: list
    guard: tuple[str, bool] | None = None  # (predicate register, negated)
    line: int = 0
    callee: bool = False  # inlined from a device function (its .param space is the caller's frame)

    @cached_property
    def parts(self) -> list[str]:  # (cached: the JIT's code generator asks ~20 times per instruction; do not mutate)
        return self.op.split(".")


@dataclass
class Label:
    name: str
    line: int = 0


@dataclass
class VarDecl:
    space: str  # global | const | shared | local | param | reg
    name: str
    type: str  # element type without dot, e.g. "b8"
    align: int
    count: int  # elements (1 for scalars); 0 for an unsized array (.extern .shared x[])
    vec: int = 1
    init: list | None = None  # flat list of numbers or Sym (address initialisers)
    extern: bool = False
    line: int = 0
    ptr: bool = False

    @property
    def elem_size(self) -> int:
        from gpushim.ptx.types import type_size

        return type_size(self.type) * self.vec

    @property
    def size(self) -> int:
        return self.elem_size * self.count


@dataclass
class Function:
    name: str
    kind: str  # entry | func
    params: list[VarDecl] = field(default_factory=list)
    rets: list[VarDecl] = field(default_factory=list)
    body: list = field(default_factory=list)  # Instr | Label | VarDecl (non-reg declarations)
    regs: dict[str, str] = field(default_factory=dict)  # register name -> type
    defined: bool = False
    line: int = 0
    noreturn: bool = False
    launch_bounds: dict[str, tuple] = field(default_factory=dict)  # maxntid / reqntid / maxnreg


@dataclass
class Module:
    version: tuple[int, int] = (0, 0)
    target: str = ""
    address_size: int = 64
    functions: dict[str, Function] = field(default_factory=dict)
    variables: list[VarDecl] = field(default_factory=list)  # module scope
    address_taken: set[str] = field(default_factory=set)  # functions used as values (function pointers)
