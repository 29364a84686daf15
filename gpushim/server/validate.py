"""Every frame a peer sends is checked here, by type and range, before anything reads it. The schema is
gpushim/protocol.py's (ARG_SPECS, HELLO_FIELDS, STATUS_FIELDS): one source of truth for the shim, the
server and the documentation. Each check returns why a frame is malformed, or None; the caller ends
that connection or session with the reason.

msgpack decodes to exactly int, bytes, str, list, dict, bool, float and None, so exact type checks are
enough (a bool is not an int here). Bulk arguments may arrive as a memoryview (decoded in place)."""

from __future__ import annotations

from typing import Any

from gpushim.protocol import (
    CALL,
    HELLO,
    HELLO_FIELDS,
    MAX_MAP_KEYS,
    OPS,
    OPS_BY_ID,
    POST,
    SEQ,
    STATUS,
    STATUS_FIELDS,
    Field,
    Op,
    arg_spec,
)

# op id -> ((name, field), ...), compiled once: this is on every call's path.
_COMPILED: dict[int, tuple[tuple[str, Field], ...]] = {op.id: tuple((a, arg_spec(op, a)) for a in op.args)
                                                       for op in OPS}


def _fast_test(var: str, f: Field) -> str | None:
    """A Python expression true when var fits f, or None when f is not worth a fast test (the full check
    runs). The expression may be false for a value that fits (the full check then says so); never true for one
    that does not."""
    if f.type is int:
        test = f"type({var}) is int and {f.lo} <= {var} <= {f.hi}"
    elif f.type is bytes:
        test = f"(type({var}) is bytes or type({var}) is memoryview) and {f.lo} <= len({var}) <= {f.hi}"
    elif f.type is str:
        test = f"type({var}) is str and {f.lo} <= len({var}) <= {f.hi}"
    elif f.type is list and f.lo == f.hi <= 4:  # grid, block: unrolled
        lo, hi = f.item_range
        items = " and ".join(f"type({var}[{i}]) is int and {lo} <= {var}[{i}] <= {hi}" for i in range(f.lo))
        test = f"type({var}) is list and len({var}) == {f.lo}" + (f" and {items}" if items else "")
    else:
        return None
    return f"({var} is None or {test})" if f.nullable else f"({test})"


def _fast_validator(spec: tuple[tuple[str, Field], ...]) -> Any:
    """One generated function per operation: True when args fit its schema (the common case, checked without
    a loop or attribute lookups), False when the full check must run. Built from the same Fields."""
    tests = [_fast_test(f"a{i}", f) for i, (_, f) in enumerate(spec)]
    if any(t is None for t in tests):
        return None
    names = [f"a{i}" for i in range(len(spec))]
    if not names:
        src = "def ok(args):\n    return not args\n"
    else:
        src = (f"def ok(args):\n    if len(args) != {len(names)}:\n        return False\n"
               f"    {', '.join(names)}, = args\n    return {' and '.join(tests)}\n")
    scope: dict[str, Any] = {"memoryview": memoryview}
    exec(compile(src, "<gpushim schema>", "exec"), scope)  # noqa: S102 - source built from the schema above
    return scope["ok"]


# op id -> the generated fast check (None: the op has an argument only the full check handles)
_FAST = {op_id: _fast_validator(spec) for op_id, spec in _COMPILED.items()}
_SEQ_LO, _SEQ_HI = SEQ.lo, SEQ.hi


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_value(what: str, value: Any, f: Field) -> str | None:
    """Why value does not fit f, or None."""
    t = type(value)
    if value is None and f.nullable:
        return None
    if t is not f.type and not (f.type is bytes and t is memoryview):
        return f"{what} must be {f.type.__name__}, got {t.__name__}"
    if t is int:
        if not f.lo <= value <= f.hi:
            return f"{what} = {_describe(value)} is out of range [{f.lo}, {f.hi}]"
        return None
    n = len(value)
    if not f.lo <= n <= f.hi:
        return f"{what} has length {n}, which is not in [{f.lo}, {f.hi}]"
    if t is list:
        lo, hi = f.item_range
        for v in value:
            if type(v) is not int or not lo <= v <= hi:
                return f"{what} must be a list of integers in [{lo}, {hi}], got {_describe(value)}"
    return None


def check_args(op: Op, args: list) -> str | None:
    """Why args do not fit op, or None."""
    spec = _COMPILED[op.id]
    if len(args) != len(spec):
        return f"{op.name} takes {len(spec)} arguments, got {len(args)}"
    for (name, f), value in zip(spec, args, strict=True):
        # the common cases, an in-range int or a bin/str of a fitting length, without a function call
        t = type(value)
        if t is f.type and (f.lo <= value <= f.hi if t is int else t is not list and f.lo <= len(value) <= f.hi):
            continue
        problem = check_value(f"{op.name}: argument {name}", value, f)
        if problem:
            return problem
    return None


def check_call(msg: Any) -> str | None:
    """A CALL or POST frame after the handshake: [kind, seq, op, [args...]]."""
    # the fast path: a well-formed frame of an operation with a generated check (every check is the schema's)
    if type(msg) is list and len(msg) == 4:
        kind, seq, op_id, args = msg
        if (type(kind) is int and (kind == CALL or kind == POST) and type(seq) is int and _SEQ_LO <= seq <= _SEQ_HI
                and type(op_id) is int and type(args) is list):
            ok = _FAST.get(op_id)
            if ok is not None and ok(args):
                return None
    return _check_call_full(msg)


def _check_call_full(msg: Any) -> str | None:
    if type(msg) is not list or len(msg) != 4 or msg[0] not in (CALL, POST) or type(msg[0]) is not int:
        return f"expected [CALL|POST, seq, op, args], got {_describe(msg)}"
    _, seq, op_id, args = msg
    problem = check_value("seq", seq, SEQ)
    if problem:
        return problem
    op = OPS_BY_ID.get(op_id) if type(op_id) is int else None
    if op is None:
        return f"unknown operation {_describe(op_id)}"
    if type(args) is not list:
        return f"{op.name}: the arguments must be a list, got {type(args).__name__}"
    return check_args(op, args)


def check_map(what: str, body: Any, fields: dict[str, Field], required: tuple[str, ...] = ()) -> \
        dict[str, Any] | str:
    """A map frame body: the known fields checked, unknown ones dropped. Returns the fields or why not."""
    if type(body) is not dict:
        return f"{what} must be a map, got {type(body).__name__}"
    if len(body) > MAX_MAP_KEYS:
        return f"{what} has {len(body)} fields (at most {MAX_MAP_KEYS})"
    out: dict[str, Any] = {}
    for key, value in body.items():
        if type(key) is not str:
            return f"{what}: field names must be strings, got {_describe(key)}"
        f = fields.get(key)
        if f is None:
            continue
        problem = check_value(f"{what} field {key}", value, f)
        if problem:
            return problem
        if value is not None:
            out[key] = value
    for key in required:
        if key not in out:
            return f"{what} lacks the field {key}"
    return out


def first_frame_kind(msg: Any) -> int | str:
    """The kind of a connection's first frame (HELLO or STATUS), or why it is neither."""
    if type(msg) is not list or len(msg) != 2 or type(msg[0]) is not int or msg[0] not in (HELLO, STATUS):
        return f"the first frame must be a gpushim HELLO or STATUS, got {_describe(msg)}"
    return msg[0]


def check_hello(body: Any) -> dict[str, Any] | str:
    """A HELLO's map: its fields with their defaults, or why it is malformed."""
    out = check_map("HELLO", body, HELLO_FIELDS, required=("proto",))
    if isinstance(out, str):
        return out
    return {"runtime": 0, "pid": 0, "program": "?", "devices": "", "priority": 0, "token": None,
            "soname": "", "shim": ""} | out


def check_status(body: Any) -> dict[str, Any] | str:
    return check_map("STATUS", body, STATUS_FIELDS)
