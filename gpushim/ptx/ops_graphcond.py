"""cudaGraphSetConditional(handle, value): the device runtime's call that sets a conditional graph node's
value. On gpushim a handle is the device address of the node's 4-byte condition cell (shim/api_graph_cond.c),
so the call stores value there; the server reads it when the graph reaches the conditional node. Racing calls
are undefined behaviour in CUDA; here the last thread in thread order wins."""

from __future__ import annotations

import numpy as np

from gpushim.ptx.nodes import Instr
from gpushim.ptx.operands import Ctx
from gpushim.ptx.ops_mem import scatter
from gpushim.ptx.ops_sys import _slot_reader


def compile_set_conditional(ctx: Ctx, ins: Instr):
    _, args = ins.args
    if len(args.items) != 2:
        raise ctx.error("cudaGraphSetConditional takes a handle and a value")
    rh = _slot_reader(ctx, args.items[0], 8)
    rv = _slot_reader(ctx, args.items[1], 4)
    what = f"cudaGraphSetConditional (line {ins.line})"

    def set_conditional(st, idx):
        n = st.n if idx is None else idx.size
        h = np.broadcast_to(rh(st, idx), (n,))
        v = np.broadcast_to(rv(st, idx), (n,)).astype(np.uint32)
        scatter(st, idx, "global", np.ascontiguousarray(h), np.dtype(np.uint32), [np.ascontiguousarray(v)], what)

    return set_conditional
