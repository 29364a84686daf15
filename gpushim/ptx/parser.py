"""Parser: PTX text -> nodes.Module.

Names declared inside `{ }` scopes of a function body (the callseq blocks nvcc emits around calls) are made
unique by a `#<scope>` suffix, so later stages never need to know about scopes.
"""

from __future__ import annotations

import struct

from gpushim.ptx.errors import PtxError
from gpushim.ptx.lexer import Tok, tokenize
from gpushim.ptx.nodes import (
    SINK,
    Addr,
    Function,
    Imm,
    Instr,
    Label,
    Module,
    Neg,
    Plist,
    PredPair,
    Reg,
    Sym,
    VarDecl,
    Vec,
)
from gpushim.ptx.types import TYPES, type_size

_SPACES = {".global": "global", ".const": "const", ".shared": "shared", ".local": "local", ".param": "param",
           ".reg": "reg", ".tex": "tex", ".sreg": "sreg"}  # fmt: skip
_LINKAGE = {".visible", ".extern", ".weak", ".common"}
_PERF = {".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".pragma", ".noreturn",
         ".maxclusterrank", ".reqnctapercluster", ".explicitcluster", ".blocksareclusters", ".abi_preserve",
         ".abi_preserve_control"}  # fmt: skip


def parse_int(text: str) -> int:
    t = text.rstrip("U")
    if t[:2] in ("0x", "0X"):
        return int(t[2:], 16)
    if t[:2] in ("0b", "0B"):
        return int(t[2:], 2)
    if len(t) > 1 and t[0] == "0" and t.isdigit():
        return int(t, 8)
    return int(t)


def parse_number(text: str, neg: bool = False) -> Imm:
    if text[:2] in ("0f", "0F"):
        bits = int(text[2:], 16)
        if neg:
            bits ^= 0x8000_0000
        return Imm(bits, "f32bits")
    if text[:2] in ("0d", "0D"):
        bits = int(text[2:], 16)
        if neg:
            bits ^= 0x8000_0000_0000_0000
        return Imm(bits, "f64bits")
    if any(c in text for c in ".eE") and text[:2] not in ("0x", "0X"):
        v = float(text)
        return Imm(-v if neg else v, "float")
    v = parse_int(text)
    return Imm(-v if neg else v, "int")


class _Stream:
    def __init__(self, toks: list[Tok]) -> None:
        self.toks = toks
        self.i = 0

    def peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> Tok:
        if self.i >= len(self.toks):
            raise PtxError("unexpected end of PTX text")
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str) -> Tok:
        t = self.next()
        if t.text != text:
            raise PtxError(f"line {t.line}: expected {text!r}, found {t.text!r}")
        return t

    def accept(self, text: str) -> bool:
        t = self.peek()
        if t is not None and t.text == text:
            self.i += 1
            return True
        return False

    def until_semicolon(self) -> list[Tok]:
        """Tokens of one statement (brace- and bracket-balanced), consuming the ';'."""
        out: list[Tok] = []
        depth = 0
        while True:
            t = self.next()
            if t.text in "{([" and t.kind == "p":
                depth += 1
            elif t.text in "})]" and t.kind == "p":
                depth -= 1
            elif t.text == ";" and depth == 0:
                return out
            out.append(t)


def parse(text: str) -> Module:
    s = _Stream(tokenize(text))
    mod = Module()
    while s.peek() is not None:
        t = s.peek()
        assert t is not None
        if t.text == ".version":
            s.next()
            a, _, b = s.next().text.partition(".")
            mod.version = (int(a), int(b or 0))
        elif t.text == ".target":
            s.next()
            targets = [s.next().text]
            while s.accept(","):
                targets.append(s.next().text)
            mod.target = targets[0]
        elif t.text == ".address_size":
            s.next()
            mod.address_size = int(s.next().text)
            if mod.address_size != 64:
                raise PtxError("only .address_size 64 is supported")
        elif t.text == ".section":
            _skip_section(s)
        elif t.text in (".file", ".loc"):
            s.until_semicolon()
        elif _is_function_header(s):
            fn = _parse_function(s)
            old = mod.functions.get(fn.name)
            if old is None or not old.defined:
                mod.functions[fn.name] = fn
        else:
            toks = s.until_semicolon()
            if not toks:
                continue
            if toks[0].text in (".pragma", ".alias"):
                continue
            if any(t.text in (".texref", ".samplerref", ".surfref") for t in toks):
                continue  # texture/surface references: instructions using them are rejected when compiled
            mod.variables.append(_parse_var(toks))
    _find_address_taken(mod)
    return mod


def _find_address_taken(mod: Module) -> None:
    names = set(mod.functions)
    for v in mod.variables:
        for item in v.init or ():
            if isinstance(item, Sym) and item.name in names:
                mod.address_taken.add(item.name)
    for fn in mod.functions.values():
        for ins in fn.body:
            if isinstance(ins, Instr) and not ins.op.startswith("call"):
                for a in ins.args:
                    if isinstance(a, Sym) and a.name in names:
                        mod.address_taken.add(a.name)


def _skip_section(s: _Stream) -> None:
    s.next()
    while s.peek() is not None and s.peek().text != "{":  # type: ignore[union-attr]
        s.next()
    s.expect("{")
    depth = 1
    while depth:
        t = s.next()
        if t.text == "{":
            depth += 1
        elif t.text == "}":
            depth -= 1


def _is_function_header(s: _Stream) -> bool:
    k = 0
    while True:
        t = s.peek(k)
        if t is None:
            return False
        if t.text in _LINKAGE:
            k += 1
            continue
        return t.text in (".entry", ".func")


def _parse_param_list(s: _Stream) -> list[VarDecl]:
    out: list[VarDecl] = []
    s.expect("(")
    if s.accept(")"):
        return out
    while True:
        toks: list[Tok] = []
        depth = 0
        while True:
            t = s.peek()
            if t is None:
                raise PtxError("unterminated parameter list")
            if depth == 0 and t.text in (",", ")"):
                break
            if t.text == "[":
                depth += 1
            elif t.text == "]":
                depth -= 1
            toks.append(s.next())
        out.append(_parse_var(toks))
        if s.accept(")"):
            return out
        s.expect(",")


def _parse_function(s: _Stream) -> Function:
    first = s.peek()
    assert first is not None
    extern = False
    while s.peek().text in _LINKAGE:  # type: ignore[union-attr]
        extern |= s.next().text == ".extern"
    kind = s.next().text[1:]
    fn = Function("", kind, line=first.line)
    while s.peek().text in (".noreturn", ".attribute"):  # type: ignore[union-attr]
        if s.next().text == ".attribute":
            _skip_parens(s)
    if kind == "func" and s.peek().text == "(":  # type: ignore[union-attr]
        fn.rets = _parse_param_list(s)
    fn.name = s.next().text
    while s.peek().text in (".noreturn", ".attribute"):  # type: ignore[union-attr]
        if s.next().text == ".attribute":
            _skip_parens(s)
    if s.peek().text == "(":  # type: ignore[union-attr]
        fn.params = _parse_param_list(s)
    # performance directives (.maxntid 256, 1, 1 ...) up to the body or the ';'
    while True:
        t = s.peek()
        if t is None:
            raise PtxError(f"line {first.line}: unterminated declaration of {fn.name}")
        if t.text == ";":
            s.next()
            fn.defined = False
            return fn
        if t.text == "{":
            break
        if t.text == ".noreturn":
            fn.noreturn = True
        s.next()
        if t.text in (".maxntid", ".reqntid", ".maxnreg"):
            dims = []
            while s.peek() is not None and s.peek().kind == "num":  # type: ignore[union-attr]
                dims.append(parse_int(s.next().text))
                if not s.accept(","):
                    break
            fn.launch_bounds[t.text[1:]] = tuple(dims)
    if extern:
        raise PtxError(f"line {first.line}: .extern function {fn.name} has a body")
    s.expect("{")
    fn.defined = True
    _parse_body(s, fn)
    return fn


def _skip_parens(s: _Stream) -> None:
    s.expect("(")
    depth = 1
    while depth:
        t = s.next()
        depth += {"(": 1, ")": -1}.get(t.text, 0)


class _Scopes:
    def __init__(self) -> None:
        self.stack: list[dict[str, str]] = [{}]
        self.count = 0

    def push(self) -> None:
        self.count += 1
        self.stack.append({})

    def pop(self) -> None:
        self.stack.pop()

    def declare(self, name: str) -> str:
        unique = name if len(self.stack) == 1 else f"{name}#{self.count}"
        self.stack[-1][name] = unique
        return unique

    def resolve(self, name: str) -> str:
        for d in reversed(self.stack):
            u = d.get(name)
            if u is not None:
                return u
        return name


def _parse_body(s: _Stream, fn: Function) -> None:
    scopes = _Scopes()
    for p in fn.params + fn.rets:
        scopes.declare(p.name)
    depth = 1
    while True:
        t = s.peek()
        if t is None:
            raise PtxError(f"unterminated body of {fn.name}")
        if t.text == "{":
            s.next()
            depth += 1
            scopes.push()
            continue
        if t.text == "}":
            s.next()
            depth -= 1
            if depth == 0:
                return
            scopes.pop()
            continue
        nxt = s.peek(1)
        if t.kind == "id" and nxt is not None and nxt.text == ":" and not t.text.startswith("."):
            s.next()
            s.next()
            fn.body.append(Label(scopes.resolve(t.text), t.line))
            continue
        toks = s.until_semicolon()
        if not toks:
            continue
        head = toks[0].text
        if head.startswith(".reg."):  # `.reg.b16 r;` (cuda_fp16.hpp's inline asm): the same as `.reg .b16 r;`
            t0 = toks[0]
            toks = [t0._replace(text=f".{w}") for w in head[1:].split(".")] + toks[1:]
            head = ".reg"
        if head == ".reg":
            _declare_regs(toks, fn, scopes)
        elif head in _SPACES or head in _LINKAGE:
            v = _parse_var(toks)
            v.name = scopes.declare(v.name)
            fn.body.append(v)
        elif head == ".branchtargets":
            fn.body.append(
                Instr(".branchtargets", [Sym(scopes.resolve(x.text)) for x in toks[1:] if x.text != ","], line=t.line)
            )
        elif head in _PERF or head in (".loc", ".file", ".calltargets", ".callprototype"):
            continue
        else:
            fn.body.append(_parse_instr(toks, scopes))


def _declare_regs(toks: list[Tok], fn: Function, scopes: _Scopes) -> None:
    i = 1
    typ = None
    vec = 1
    while i < len(toks) and toks[i].text.startswith(".") and not toks[i].text.startswith("%"):
        w = toks[i].text[1:]
        if w in TYPES:
            typ = w
        elif w in ("v2", "v4", "v8"):
            vec = int(w[1:])
        i += 1
    if typ is None:
        raise PtxError(f"line {toks[0].line}: register declaration without a type")
    if vec != 1:
        raise PtxError(f"line {toks[0].line}: vector registers are not supported")
    while i < len(toks):
        name = toks[i].text
        i += 1
        if i < len(toks) and toks[i].text == "<":
            n = int(toks[i + 1].text)
            if toks[i + 2].text != ">":
                raise PtxError(f"line {toks[0].line}: bad register range")
            i += 3
            for k in range(n):
                fn.regs[scopes.declare(f"{name}{k}")] = typ
        else:
            fn.regs[scopes.declare(name)] = typ
        if i < len(toks) and toks[i].text == ",":
            i += 1


def _parse_var(toks: list[Tok]) -> VarDecl:
    line = toks[0].line
    space = None
    align = 0
    typ = None
    vec = 1
    extern = False
    ptr = False
    i = 0
    while i < len(toks) and toks[i].kind == "id" and toks[i].text.startswith("."):
        w = toks[i].text
        if w in _SPACES:
            space = _SPACES[w]
        elif w in _LINKAGE:
            extern |= w == ".extern"
        elif w == ".align":
            a = int(toks[i + 1].text)
            if not ptr:
                align = a
            i += 1
        elif w == ".ptr":
            ptr = True
        elif w in (".v2", ".v4", ".v8"):
            vec = int(w[2:])
        elif w[1:] in TYPES:
            typ = w[1:]
        elif ptr and w in (".global", ".const", ".shared", ".local"):
            pass
        i += 1
    if space is None or typ is None or i >= len(toks):
        raise PtxError(f"line {line}: cannot parse declaration {' '.join(t.text for t in toks)!r}")
    if space in ("tex", "sreg"):
        raise PtxError(f"line {line}: .{space} variables are not supported")
    name = toks[i].text
    i += 1
    count = 1
    dims: list[int] = []
    while i < len(toks) and toks[i].text == "[":
        if toks[i + 1].text == "]":
            dims.append(0)
            i += 2
        else:
            dims.append(parse_int(toks[i + 1].text))
            i += 3
    for d in dims:
        count *= d
    init = None
    if i < len(toks) and toks[i].text == "=":
        init = _parse_init(toks[i + 1 :], line)
    size = type_size(typ) * vec
    return VarDecl(space, name, typ, align or size, count, vec, init, extern, line, ptr)


def _parse_init(toks: list[Tok], line: int) -> list:
    out: list = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.text in ("{", "}", ","):
            i += 1
            continue
        if t.text == "-":
            imm = parse_number(toks[i + 1].text, neg=True)
            out.append(imm)
            i += 2
            continue
        if t.kind == "num":
            out.append(parse_number(t.text))
            i += 1
            continue
        if t.kind == "id":
            name = t.text
            if (
                name in ("generic", "global", "const", "shared", "local")
                and i + 1 < len(toks)
                and toks[i + 1].text == "("
            ):
                name = toks[i + 2].text
                i += 4
            else:
                i += 1
            off = 0
            if i + 1 < len(toks) and toks[i].text == "+":
                off = parse_int(toks[i + 1].text)
                i += 2
            out.append(Sym(name, off))
            continue
        raise PtxError(f"line {line}: cannot parse initialiser token {t.text!r}")
    return out


def _split_commas(toks: list[Tok]) -> list[list[Tok]]:
    out: list[list[Tok]] = [[]]
    depth = 0
    for t in toks:
        if t.kind == "p" and t.text in "{([":
            depth += 1
        elif t.kind == "p" and t.text in "})]":
            depth -= 1
        if t.text == "," and depth == 0:
            out.append([])
        else:
            out[-1].append(t)
    return [o for o in out if o]


def _parse_instr(toks: list[Tok], scopes: _Scopes) -> Instr:
    line = toks[0].line
    guard = None
    i = 0
    if toks[0].text == "@":
        neg = toks[1].text == "!"
        j = 2 if neg else 1
        guard = (scopes.resolve(toks[j].text), neg)
        i = j + 1
    op = toks[i].text
    if toks[i].kind != "id":
        raise PtxError(f"line {line}: expected an instruction, found {op!r}")
    args = [_parse_operand(g, scopes, line) for g in _split_commas(toks[i + 1 :])]
    return Instr(op, args, guard, line)


def _parse_operand(toks: list[Tok], scopes: _Scopes, line: int):
    t0 = toks[0]
    if t0.text == "[":
        inner = toks[1:-1]
        if not inner:
            raise PtxError(f"line {line}: empty address")
        if any(t.text == "," for t in inner):  # texture/surface operand [tex, {coords}]
            return Plist(tuple(_parse_operand(g, scopes, line) for g in _split_commas(inner)))
        base = None
        off = 0
        j = 0
        if inner[0].kind == "id":
            name = scopes.resolve(inner[0].text)
            base = Reg(name) if name.startswith("%") else Sym(name)
            j = 1
        k = j
        sign = 1
        while k < len(inner):
            t = inner[k]
            if t.text == "+":
                sign = 1
            elif t.text == "-":
                sign = -sign
            elif t.kind == "num":
                off += sign * parse_int(t.text)
                sign = 1
            else:
                raise PtxError(f"line {line}: cannot parse address {' '.join(x.text for x in toks)}")
            k += 1
        return Addr(base, off)
    if t0.text == "{":
        items = tuple(_parse_operand(g, scopes, line) for g in _split_commas(toks[1:-1]))
        return Vec(items)
    if t0.text == "(":
        items = tuple(_parse_operand(g, scopes, line) for g in _split_commas(toks[1:-1]))
        return Plist(items)
    if t0.text == "!":
        return Neg(Reg(scopes.resolve(toks[1].text)))
    if t0.text == "-" and len(toks) == 2:
        return parse_number(toks[1].text, neg=True)
    if t0.kind == "num" and len(toks) == 1:
        return parse_number(t0.text)
    if t0.kind == "id":
        name = scopes.resolve(t0.text)
        if len(toks) == 3 and toks[1].text == "|":
            second = scopes.resolve(toks[2].text)
            return PredPair(None if name == "_" else Reg(name), None if second == "_" else Reg(second))
        if name == "_":
            return SINK
        if name.startswith("%"):
            if len(toks) != 1:
                raise PtxError(f"line {line}: cannot parse operand {' '.join(x.text for x in toks)}")
            return Reg(name)
        off = 0
        if len(toks) >= 3 and toks[1].text in "+-":
            off = parse_int(toks[-1].text) * (-1 if toks[1].text == "-" or toks[2].text == "-" else 1)
        if name in ("generic", "global") and len(toks) > 1 and toks[1].text == "(":
            return Sym(scopes.resolve(toks[2].text))
        return Sym(name, off)
    raise PtxError(f"line {line}: cannot parse operand {' '.join(x.text for x in toks)}")


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]
