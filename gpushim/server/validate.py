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
