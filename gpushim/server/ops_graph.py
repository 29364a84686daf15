"""Executable graphs, uploaded once and launched with one frame. A mixin of gpushim.server.session.Session.

The shim uploads each segment of an executable graph (shim/api_graph_exec.c) as a list of ordinary calls
(GRAPH_UPLOAD); GRAPH_LAUNCH runs them in order through the session's own handlers, on the launch stream,
so every backend runs a graph as the stream work it is made of (the emulator, the cuda backend alike).
The calls are checked when uploaded: only stream-ordered operations, with arguments of the right types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from gpushim.cuda_errors import CudaError, Err
from gpushim.protocol import OPS_BY_NAME, check_args

# op name -> index of its stream argument
STREAM_ARG = {"LAUNCH": 6, "MEMSET": 3, "MEMSET2D": 5, "MEMSET_WIDE": 6, "STREAM_WAIT_VALUE": 0,
              "EVENT_RECORD": 1, "STREAM_WAIT_EVENT": 0, "MEMCPY_H2D": 1, "MEMCPY_D2D": 3, "MEMCPY2D_H2D": 4,
              "MEMCPY2D_D2D": 6, "STREAM_HOST_FUNC": 0}
STREAM_ARG["GRAPH_COND"] = 3
# what a conditional node's bodies may hold (CUDA: kernels, memsets, copies between device memory, nested
# conditionals; the bodies of cudaConditionalNodeParams)
BODY_OPS = {"LAUNCH", "MEMSET", "MEMSET2D", "MEMSET_WIDE", "MEMCPY_D2D", "MEMCPY2D_D2D", "GRAPH_COND"}
MAX_COND_DEPTH = 8
# cudaGraphConditionalNodeType: IF (1 or 2 bodies), WHILE (1), SWITCH (1 or more)
COND_BODIES = {0: (1, 2), 1: (1, 1), 2: (1, 1 << 16)}
# ops whose data argument (index) comes from the launch: the upload carries its length
DATA_ARG = {"MEMCPY_H2D": 2, "MEMCPY2D_H2D": 5}
MAX_SEGMENT_BYTES = 256 << 20  # all of a session's uploaded segments together
MAX_SEGMENTS = 1 << 16


@dataclass
class Segment:
    calls: list[tuple[int, list[Any]]]  # (op id, args with placeholders)
    data_bytes: int  # host-to-device bytes a launch brings
    callbacks: int  # host functions a launch brings ids for
    size: int  # the upload's size, for the session's limit


class GraphOps:
    def _segments(self) -> dict[int, Segment]:
        segs = getattr(self, "graph_segments", None)
        if segs is None:
            segs = self.graph_segments = {}
        return segs

    def op_graph_upload(self, graph: int, calls: bytes) -> list[Any]:
        segs = self._segments()
        used = sum(s.size for s in segs.values())
        if len(segs) >= MAX_SEGMENTS or used + len(calls) > MAX_SEGMENT_BYTES:
            raise CudaError(Err.MEMORY_ALLOCATION, f"too many uploaded graph segments ({len(segs)}, {used} bytes)")
        try:
            items = msgpack.unpackb(bytes(calls), raw=False, strict_map_key=False)
        except Exception as e:  # noqa: BLE001 - any malformed upload is the client's error
            raise CudaError(Err.INVALID_VALUE, f"GRAPH_UPLOAD: malformed calls: {e}") from None
        if type(items) is not list:
            raise CudaError(Err.INVALID_VALUE, "GRAPH_UPLOAD: calls must be an array")
        out, data_bytes, callbacks = self._parse_calls(items, "", 0)
        segs[graph] = Segment(out, data_bytes, callbacks, len(calls))
        return []

    def _parse_calls(self, items: list, where: str, depth: int) -> tuple[list[tuple[int, list[Any]]], int, int]:
        """Checks the calls of a segment (depth 0) or of a conditional node's body: (calls, host-to-device
        data bytes, host functions)."""
        out: list[tuple[int, list[Any]]] = []
        data_bytes = callbacks = 0
        for i, item in enumerate(items):
            at = f"{where}call {i}"
            if type(item) is not list or len(item) != 2 or type(item[0]) is not int or type(item[1]) is not list:
                raise CudaError(Err.INVALID_VALUE, f"GRAPH_UPLOAD: {at} is not [op, args]")
            op_id, args = item
            op = next((o for o in (OPS_BY_NAME.get(n) for n in STREAM_ARG) if o and o.id == op_id), None)
            if op is None or (depth and op.name not in BODY_OPS):
                where_ = "a conditional node's body" if depth else "a graph"
                raise CudaError(Err.INVALID_VALUE, f"GRAPH_UPLOAD: {at}: operation {op_id} cannot be in {where_}")
            probe = list(args)
            if op.name in DATA_ARG:
                k = DATA_ARG[op.name]
                if k >= len(probe) or type(probe[k]) is not int or probe[k] < 0:
                    raise CudaError(Err.INVALID_VALUE, f"GRAPH_UPLOAD: {at}: {op.name} needs its data length")
                data_bytes += probe[k]
                probe[k] = b""
            if op.name == "STREAM_HOST_FUNC":
                callbacks += 1
            problem = check_args(op, probe)
            if problem:
                raise CudaError(Err.INVALID_VALUE, f"GRAPH_UPLOAD: {at}: {problem}")
            if op.name == "GRAPH_COND":
                args = self._parse_cond(args, at, depth)
            out.append((op_id, args))
        return out, data_bytes, callbacks

    def _parse_cond(self, args: list[Any], at: str, depth: int) -> list[Any]:
        """GRAPH_COND [handle, kind, bodies, stream]: bodies (a msgpack array of call arrays) parsed once."""
        if getattr(self.bs, "graph_conditional", None) is None:
            raise CudaError(Err.NOT_SUPPORTED, "conditional graph nodes: not supported by this backend (the "
                            "emulator runs them)")
        if depth >= MAX_COND_DEPTH:
            raise CudaError(Err.INVALID_VALUE, f"GRAPH_UPLOAD: conditional nodes nested over {MAX_COND_DEPTH} deep")
        handle, kind, packed, stream = args
        try:
            bodies = msgpack.unpackb(bytes(packed), raw=False, strict_map_key=False)
        except Exception as e:  # noqa: BLE001 - the client's error
            raise CudaError(Err.INVALID_VALUE, f"GRAPH_UPLOAD: {at}: malformed bodies: {e}") from None
        lo, hi = COND_BODIES.get(kind, (1, 0))
        if type(bodies) is not list or not lo <= len(bodies) <= hi or any(type(b) is not list for b in bodies):
            raise CudaError(Err.INVALID_VALUE, f"GRAPH_UPLOAD: {at}: conditional type {kind} with bodies "
                            f"{type(bodies).__name__} of {len(bodies) if type(bodies) is list else '?'}")
        parsed = [self._parse_calls(b, f"{at}, body {j}, ", depth + 1)[0] for j, b in enumerate(bodies)]
        return [handle, kind, parsed, stream]

    def _run_calls(self, calls: list[tuple[int, list[Any]]], stream: int, view: memoryview, callbacks: list[int],
                   off: int = 0, cb: int = 0) -> None:
        for op_id, template in calls:
            op, handler, refusal = self.routes[op_id]
            if refusal is not None:
                raise refusal
            args = list(template)
            args[STREAM_ARG[op.name]] = stream
            k = DATA_ARG.get(op.name)
            if k is not None:
                n = template[k]
                args[k] = view[off:off + n]
                off += n
            elif op.name == "STREAM_HOST_FUNC":
                args[1] = callbacks[cb]
                cb += 1
            elif op.name == "GRAPH_COND":
                handle, kind, bodies, _ = template
                self.bs.graph_conditional(self._stream(stream), handle, kind, len(bodies),
                                          lambda i, b=bodies: self._run_calls(b[i], stream, view, callbacks))
                continue
            handler(*args)  # stream-ordered: queued on the stream, never a Wait

    def op_graph_cond(self, handle: int, kind: int, bodies: bytes, stream: int) -> list[Any]:
        raise CudaError(Err.INVALID_VALUE, "GRAPH_COND runs only inside an uploaded graph segment")

    def op_graph_launch(self, graph: int, stream: int, event: int, callbacks: list[int], data: bytes) -> list[Any]:
        seg = self._segments().get(graph)
        if seg is None:
            raise CudaError(Err.INVALID_VALUE, f"{graph:#x} is not an uploaded graph of this session")
        if len(data) != seg.data_bytes or len(callbacks) != seg.callbacks:
            raise CudaError(Err.INVALID_VALUE, f"GRAPH_LAUNCH: the segment takes {seg.data_bytes} data bytes and "
                            f"{seg.callbacks} callbacks, got {len(data)} and {len(callbacks)}")
        self._stream(stream)  # a bad stream or event fails before any node runs
        if event:
            self._event(event)
        self.bs.graph_segment = True  # the backend's launches know they belong to a graph (device tail launches)
        try:
            self._run_calls(seg.calls, stream, memoryview(data), callbacks)
        finally:  # even after a failed call: what the kernels that ran tail-launched is not left for later
            self.bs.graph_segment = False
            flush = getattr(self.bs, "flush_device_tails", None)
            if flush is not None:
                flush(self._stream(stream))
        if event:  # what orders the next launch of this graph on another stream after this one
            self.op_event_record(event, stream, 0)
        return []

    def op_graph_free(self, graph: int) -> list[Any]:
        if self._segments().pop(graph, None) is None:
            raise CudaError(Err.INVALID_VALUE, f"{graph:#x} is not an uploaded graph of this session")
        devs = getattr(self, "device_graphs", {})
        for handle in [h for h, g in devs.items() if g == graph]:
            del devs[handle]
            self.bs.device_graph(handle, None)
        return []

    def op_graph_device(self, handle: int, graph: int) -> list[Any]:
        """A graph instantiated for device launch (CUDA Programming Guide, "Device Graph Launch"): its one
        segment, of kernels, memsets and device-to-device copies only, becomes what cudaGraphLaunch(handle)
        in a kernel runs."""
        seg = self._segments().get(graph)
        if seg is None:
            raise CudaError(Err.INVALID_VALUE, f"{graph:#x} is not an uploaded graph of this session")
        if getattr(self.bs, "device_graph", None) is None:
            raise CudaError(Err.NOT_SUPPORTED, "device graph launch: not supported by this backend (the emulator "
                            "runs it)")
        items: list[tuple] = []
        for op_id, args in seg.calls:
            name = self.routes[op_id][0].name
            if name == "LAUNCH":
                dev, key, kernel, grid, block, shared, _, params = args
                items.append(("kernel", dev, key, kernel, grid, block, shared, params))
            elif name == "MEMSET":
                items.append(("set", args[0], args[1] & 0xFF, args[2]))
            elif name == "MEMCPY_D2D":
                items.append(("copy", args[0], args[1], args[2]))
            else:
                raise CudaError(Err.INVALID_VALUE, f"a graph for device launch holds kernels, byte memsets and "
                                f"copies between device memory only, not {name}")
        self.bs.device_graph(handle, items)
        if not hasattr(self, "device_graphs"):
            self.device_graphs = {}
        self.device_graphs[handle] = graph
        return []
