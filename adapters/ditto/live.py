"""Live change notifications on the history's WebSocket (``START-SEND-EVENTS``),
engine side: the taps that want a thing's new events, the one
``START-SEND-EVENTS?namespaces=...&filter=...`` that covers them all, and
the routing of Ditto's pushed events to them (connection thread only).

Ditto pushes change notifications without demand (at most once, no
back-pressure), so each tap has ``room``: the events its consumer has room
for (its iterator's window, returned as it consumes). An event beyond it
ends the tap with :class:`LiveOverflow` after the events queued: nothing is
dropped silently, and a follower (:mod:`.follow`) reads the rest from the
history. A tap is told when Ditto has acknowledged the subscription
(``START-SEND-EVENTS:ACK``) by the item :data:`STARTED`: events persisted
after that reach it; everything before is in the history.
"""

from __future__ import annotations

import urllib.parse
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from sansrs.ditto import Envelope

from ..drive import streams

__all__ = [
    "ACK_TIMEOUT",
    "STARTED",
    "START_ACK",
    "STOP_ACK",
    "LiveEvents",
    "LiveNotAcknowledged",
    "LiveOverflow",
    "LiveTap",
    "rql_string",
    "start_send_events",
    "thing_filter",
]

START_ACK: Final = "START-SEND-EVENTS:ACK"
STOP_ACK: Final = "STOP-SEND-EVENTS:ACK"


class _Started:
    def __repr__(self) -> str:
        return "STARTED"


#: The item a tap gets when Ditto acknowledged its ``START-SEND-EVENTS``.
STARTED: Final[Any] = _Started()


#: Seconds a follower waits for ``START-SEND-EVENTS:ACK`` when it has no
#: ``timeout`` of its own (a Ditto, or a proxy, that never answers it).
ACK_TIMEOUT: Final = 30.0


class LiveNotAcknowledged(TimeoutError):
    """Ditto did not acknowledge ``START-SEND-EVENTS`` in time (a server
    that does not serve live events answers it with an error or not at all)."""


class LiveOverflow(Exception):
    """Ditto pushed more live events than the consumer had room for: the tap
    ended after the events it could hold (the rest are in the history)."""


def rql_string(text: str) -> str:
    """``text`` as an RQL string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def thing_filter(thing_id: str, extra: str | None = None) -> str:
    """RQL for ``thing_id``'s events (and ``extra``, a filter of the user's)."""
    own = f"eq(thingId,{rql_string(thing_id)})"
    return own if extra is None else f"and({own},{extra})"


def start_send_events(namespaces: list[str], rql: str | None) -> str:
    """``START-SEND-EVENTS`` with its parameters URL-encoded, as Ditto's docs ask."""
    params = []
    if namespaces:
        params.append("namespaces=" + urllib.parse.quote(",".join(namespaces), safe=","))
    if rql:
        params.append("filter=" + urllib.parse.quote(rql, safe=""))
    return "START-SEND-EVENTS" + ("?" + "&".join(params) if params else "")


class LiveTap:
    """One consumer of a thing's live events."""

    __slots__ = ("done", "filter", "room", "sink", "started", "thing_id")

    def __init__(self, thing_id: str, sink: streams.Sink[Any], room: int,
                 filter: str | None = None) -> None:
        self.thing_id = thing_id
        self.filter = filter
        self.sink = sink
        #: events the consumer has room for (its window; STARTED takes one)
        self.room = room
        self.started = False
        self.done = False


class LiveEvents:
    """The live taps of one client connection; ``send`` queues text messages."""

    def __init__(self, send: Callable[[list[str]], None]) -> None:
        self._send = send
        self._taps: dict[str, list[LiveTap]] = {}
        #: per START-SEND-EVENTS sent, the taps its ACK starts (Ditto answers in order)
        self._awaiting: deque[list[LiveTap]] = deque()
        self._stops = 0

    @property
    def active(self) -> bool:
        """Binding messages may arrive (a START or STOP is outstanding or taps live)."""
        return bool(self._taps or self._awaiting or self._stops)

    @property
    def taps(self) -> int:
        return sum(map(len, self._taps.values()))

    def add(self, tap: LiveTap) -> None:
        self._taps.setdefault(tap.thing_id, []).append(tap)
        self._update([tap])

    def remove(self, tap: LiveTap) -> None:
        """The consumer is gone (cancel): stop Ditto's events for it."""
        if tap.done:
            return
        tap.done = True
        self._drop(tap)
        self._update([])

    def credit(self, tap: LiveTap, n: int) -> None:
        if not tap.done:
            tap.room += n

    def _drop(self, tap: LiveTap) -> None:
        taps = self._taps.get(tap.thing_id)
        if taps is not None and tap in taps:
            taps.remove(tap)
            if not taps:
                del self._taps[tap.thing_id]

    def _update(self, new: list[LiveTap]) -> None:
        """Send the START that covers every tap (Ditto replaces the session's
        filter with it), or STOP when none is left."""
        if not self._taps:
            self._send(["STOP-SEND-EVENTS"])
            self._stops += 1
            return
        namespaces = sorted({t.split(":", 1)[0] for t in self._taps})
        filters = sorted({thing_filter(t.thing_id, t.filter)
                          for taps in self._taps.values() for t in taps})
        rql = filters[0] if len(filters) == 1 else "or(" + ",".join(filters) + ")"
        self._send([start_send_events(namespaces, rql)])
        self._awaiting.append(new)

    def control(self, text: str) -> bool:
        """Take a binding answer; False if ``text`` is none of them."""
        if text == START_ACK:
            if self._awaiting:
                for tap in self._awaiting.popleft():
                    if not tap.done and not tap.started:
                        tap.started = True
                        self._put(tap, STARTED)
            return True
        if text == STOP_ACK:
            self._stops = max(0, self._stops - 1)
            return True
        return text.endswith(":ACK") and text[:1].isalpha() and text.isupper()

    def take_controls(self, texts: list[str]) -> list[str]:
        """``texts`` without the binding answers (taken)."""
        if all(t[:1] == "{" for t in texts):
            return texts
        return [t for t in texts if t[:1] == "{" or not self.control(t)]

    def event(self, envelope: Envelope) -> None:
        """A message Ditto pushed: a thing's event reaches its started taps."""
        parts = envelope.topic.split("/")
        if len(parts) < 6 or parts[2] != "things" or parts[4] != "events":
            return
        taps = self._taps.get(f"{parts[0]}:{parts[1]}")
        if not taps:
            return
        item = envelope.to_json()
        for tap in list(taps):
            if tap.started:
                self._put(tap, item)

    def _put(self, tap: LiveTap, item: Any) -> None:
        if tap.room > 0:
            tap.room -= 1
            tap.sink.put(item)
            return
        tap.done = True
        self._drop(tap)
        tap.sink.finish(LiveOverflow(
            f"more live events of {tap.thing_id} than the consumer had room for"))
        self._update([])

    def finish(self, error: BaseException) -> None:
        """The connection is gone: every tap ends with ``error``."""
        for taps in list(self._taps.values()):
            for tap in taps:
                tap.done = True
                tap.sink.finish(error)
        self._taps.clear()
        self._awaiting.clear()
