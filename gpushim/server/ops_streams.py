"""Streams, events and host functions. A mixin of gpushim.server.session.Session: the methods use the session's
backend session (`self.bs`), handle tables and helpers (`_dev`, `_stream`, ...)."""

from __future__ import annotations

from typing import Any

from gpushim.cuda_errors import CudaError, Err
from gpushim.protocol import CALLBACK, HANDLE_BASE
from gpushim.server.wait import Wait


class StreamOps:
    def op_stream_create(self, dev: int, flags: int, priority: int) -> list[Any]:
        if flags & ~1:
            raise CudaError(Err.INVALID_VALUE, f"invalid stream flags {flags:#x}")
        h = self._new_handle()
        self.streams[h] = self.bs.stream_create(self._dev(dev), flags, priority)
        return [h]

    def op_stream_destroy(self, stream: int) -> list[Any]:
        s = self.streams.pop(stream, None)
        if s is None:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{stream:#x} is not a stream of this session")
        self.bs.stream_destroy(s)
        return []

    def op_stream_sync(self, stream: int) -> Wait:
        return Wait(self._sync_point(stream))

    def op_stream_query(self, stream: int) -> list[Any]:
        if not self._sync_point(stream)():
            raise CudaError(Err.NOT_READY, "work is pending")
        return []

    def op_stream_wait_event(self, stream: int, event: int, flags: int) -> list[Any]:
        self.bs.stream_wait_event(self._stream(stream), self._event(event))
        return []

    def op_stream_get_priority(self, stream: int) -> list[Any]:
        return [0 if stream < HANDLE_BASE else self._stream(stream).priority]

    def op_stream_get_flags(self, stream: int) -> list[Any]:
        return [0 if stream < HANDLE_BASE else self._stream(stream).flags]

    def op_stream_host_func(self, stream: int, callback_id: int) -> list[Any]:
        s = self._stream(stream)
        self.callbacks[callback_id] = self.bs.host_func(s, lambda: self.send([CALLBACK, stream, callback_id]))
        return []

    def op_callback_done(self, callback_id: int) -> list[Any]:
        done = self.callbacks.pop(callback_id, None)
        if done is None:
            raise CudaError(Err.INVALID_VALUE, f"unknown host callback {callback_id}")
        done()
        self.progress()
        return []

    def op_event_create(self, dev: int, flags: int) -> list[Any]:
        if flags & ~0x0F:
            raise CudaError(Err.INVALID_VALUE, f"invalid event flags {flags:#x}")
        h = self._new_handle()
        self.events[h] = self.bs.event_create(self._dev(dev), flags)
        return [h]

    def op_event_record(self, event: int, stream: int, flags: int) -> list[Any]:
        e = self._event(event)
        self.bs.event_record(e, self._stream(stream, self._client_dev(e.device)))
        return []

    def op_event_sync(self, event: int) -> Wait:
        e = self._event(event)
        return Wait(lambda: self.bs.event_idle(e))

    def op_event_query(self, event: int) -> list[Any]:
        if not self.bs.event_idle(self._event(event)):
            raise CudaError(Err.NOT_READY, "the event has not completed")
        return []

    def op_event_elapsed(self, start: int, end: int) -> list[Any]:
        return [self.bs.event_elapsed_ms(self._event(start), self._event(end))]

    def op_event_destroy(self, event: int) -> list[Any]:
        e = self.events.pop(event, None)
        if e is None:
            raise CudaError(Err.INVALID_RESOURCE_HANDLE, f"{event:#x} is not an event of this session")
        self.bs.event_destroy(e)
        return []
