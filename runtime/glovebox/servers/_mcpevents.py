"""Resumable SSE streams for ``glovebox mcp --transport http``: a bounded event store.

The SDK's streamable-HTTP transport, given an event store, opens every SSE stream
with a priming event (an event id and empty data, with the ``retry`` the server
sets) and gives each message an id; a client whose stream broke reconnects with
``Last-Event-ID`` and gets what it missed. This store keeps the newest events in
memory, at most ``max_events`` and ``max_bytes`` of them (the oldest go first; a
client asking to resume from an event no longer kept starts afresh). Event ids are
random (128 bits), so that no client can resume a stream it was never sent.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict, deque

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

__all__ = ["BoundedEventStore"]


class BoundedEventStore(EventStore):
    """The newest events of every stream, in memory, within a count and a byte bound."""

    def __init__(self, *, max_events: int = 4096, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None, int]] = OrderedDict()
        self._streams: dict[StreamId, deque[EventId]] = {}
        self._bytes = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = secrets.token_urlsafe(16)
        size = 0 if message is None else len(message.model_dump_json(by_alias=True, exclude_none=True))
        self._events[event_id] = (stream_id, message, size)
        self._streams.setdefault(stream_id, deque()).append(event_id)
        self._bytes += size
        while len(self._events) > self.max_events or self._bytes > self.max_bytes:
            self._forget_oldest()
        return event_id

    def _forget_oldest(self) -> None:
        event_id, (stream_id, _, size) = self._events.popitem(last=False)
        self._bytes -= size
        stream = self._streams[stream_id]
        stream.popleft()  # the oldest event of all is the oldest of its stream
        if not stream:
            del self._streams[stream_id]

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        entry = self._events.get(last_event_id)
        if entry is None:
            return None
        stream_id = entry[0]
        later = list(self._streams[stream_id])
        for event_id in later[later.index(last_event_id) + 1 :]:
            message = self._events[event_id][1]
            if message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id
