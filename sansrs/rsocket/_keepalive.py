"""Keepalive timers (spec: KEEPALIVE Frame, Handling the Unexpected 1).

The client sends KEEPALIVE with R every ``interval``; both ends declare the
peer lost when nothing arrived for longer than ``max_lifetime``. Times are
seconds on the caller's monotonic clock. The timer is anchored at the first
``now`` it sees, so a connection built without a clock still works: until
anchored, ``deadline()`` asks to be called at once (0.0).

``Keepalive`` is a part of ``Connection``: ``start`` when the connection is
established (or resumed), ``stop`` when its transport is gone.
"""

from __future__ import annotations

__all__ = ["Keepalive"]


class Keepalive:
    __slots__ = (
        "interval",
        "last_received",
        "max_lifetime",
        "next_send",
        "received",
        "running",
        "sends",
    )

    def __init__(self) -> None:
        self.running = False  # until the connection is established
        self.interval = 0.0
        self.max_lifetime = 0.0
        self.sends = False  # the client sends; the server only answers
        self.next_send: float | None = None  # None until anchored
        self.last_received: float | None = None
        # Frames arrived since the last tick, time unknown (receive without now).
        self.received = False

    def start(self, interval_ms: int, max_lifetime_ms: int, sends: bool) -> None:
        """Run the timers anew (nothing heard yet) from the next ``tick``."""
        self.running = True
        self.interval = interval_ms / 1000.0
        self.max_lifetime = max_lifetime_ms / 1000.0
        self.sends = sends
        self.next_send = None
        self.last_received = None
        self.received = False

    def stop(self) -> None:
        self.running = False

    def on_receive(self, now: float | None) -> None:
        if now is None:
            self.received = True
        else:
            self.last_received = now if self.last_received is None else max(self.last_received, now)

    def deadline(self) -> float:
        if self.next_send is None or self.last_received is None:
            return 0.0
        lost_at = self.last_received + self.max_lifetime
        return min(self.next_send, lost_at) if self.sends else lost_at

    def tick(self, now: float) -> tuple[bool, bool]:
        """Advance to ``now``: (send a KEEPALIVE now, the peer is lost)."""
        if self.received:
            # Something arrived since the last tick: count it as heard now,
            # never later than it really was.
            self.received = False
            self.last_received = now
        if self.next_send is None or self.last_received is None:
            self.next_send = now + self.interval
            if self.last_received is None:
                self.last_received = now
            return False, False
        if now - self.last_received > self.max_lifetime:
            return False, True
        if self.sends and now >= self.next_send:
            # Never fall behind by more than one interval after a late tick.
            self.next_send = max(self.next_send + self.interval, now)
            if self.next_send <= now:
                self.next_send = now + self.interval
            return True, False
        return False, False
