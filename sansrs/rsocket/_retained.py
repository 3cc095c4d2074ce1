"""The retained-frames buffer of a resumable session (spec: Resuming
Operation, Implied Position).

Every frame with an implied position that this end sends is kept, exactly as
it was queued for the transport, until the peer says (KEEPALIVE or
RESUME_OK position) it received it. After a transport loss the frames from
the peer's position on are queued again. The buffer is bounded in bytes:
past ``limit`` it drops everything and the session can no longer be resumed
(``overflowed``) -- never unbounded memory.

The connection extends ``frames`` itself on its hot path (the pieces of each
frame as queued: prefix+header and body for length-prefixed framing, the
frame alone for messages; flat ``bytes``, so the garbage collector never
scans them) and calls ``check`` only once its sent position passes
``check_at``; the end of the buffer is always the connection's
``sent_position`` (passed in as ``end``).

The sessions of one server also share a :class:`RetainedBudget`
(``SessionStore(max_retained=...)``): a session whose buffer grows while
the sessions together retain more than it allows is given up (no longer
resumable) like one past its own limit, so sessions that read without
acknowledging and then vanish hold at most that much between them. Such a
session checks its size every ``SOFT`` bytes, so the budget is overrun by at
most that much per session sending at the same moment.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

__all__ = ["RetainedBudget", "RetainedFrames"]

_NEVER = float("inf")
#: Retained bytes at which an end asks the peer for its position.
SOFT = 64 * 1024


class RetainedBudget:
    """Bytes retained by all the sessions of one server, at their last check."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("max_retained must be >= 1")
        self.limit = limit
        self.held = 0


class RetainedFrames:
    __slots__ = (
        "ask",
        "asked",
        "check_at",
        "counted",
        "frames",
        "limit",
        "overflowed",
        "prefixed",
        "shared",
        "soft",
        "start",
    )

    def __init__(
        self, limit: int, prefixed: bool, start: int = 0, shared: RetainedBudget | None = None
    ) -> None:
        #: The pieces of the retained frames, in order (see the module docstring).
        self.frames: list[bytes] = []
        self.prefixed = prefixed
        self.start = start  # position of the first retained frame
        self.limit = limit
        # Past SOFT (at most half the limit), ask the peer for its position,
        # once at a time: the buffer stays small, the limit is for a slow peer.
        self.soft = min(limit // 2, SOFT)
        self.ask = False
        self.asked = False
        self.overflowed = False
        self.check_at: float = start + self.soft
        #: The server-wide budget, and what this buffer counts in it.
        self.shared = shared
        self.counted = 0

    def size(self, end: int) -> int:
        """Bytes retained (frame lengths, the positions they span)."""
        return 0 if self.overflowed else end - self.start

    def _rearm(self) -> None:
        if self.overflowed:
            self.check_at = _NEVER
        elif self.shared is not None and (self.ask or self.asked):
            # Shared budget: look again every SOFT bytes past the last
            # check (start + counted), not only at the limit.
            self.check_at = self.start + min(self.limit, self.counted + self.soft)
        else:
            self.check_at = self.start + (self.limit if self.ask or self.asked else self.soft)

    def _count(self, size: int) -> bool:
        """Update this buffer's share of the server's budget; False if the
        sessions together are over it."""
        shared = self.shared
        if shared is None:
            return True
        shared.held += size - self.counted
        self.counted = size
        return shared.held <= shared.limit

    def check(self, end: int) -> None:
        """The sent position passed ``check_at``: ask for the peer's
        position, or give up past the limit (its own or the server's)."""
        size = end - self.start
        if size > self.limit or not self._count(size):
            self.give_up()
            return
        if size > self.soft and not self.asked:
            self.ask = True
        self._rearm()

    def give_up(self) -> None:
        """Drop every frame: the session can no longer be resumed (and no
        longer counts in the server's budget)."""
        self.frames.clear()
        self.overflowed = True
        self._count(0)
        self._rearm()

    def answered(self) -> None:
        """A KEEPALIVE from the peer arrived (our question is answered)."""
        self.asked = False
        self._rearm()

    def reset_question(self) -> None:
        self.ask = self.asked = False
        self._rearm()

    def trim(self, position: int) -> None:
        """Forget the frames that end at or before ``position`` (the peer has them)."""
        pieces, span = self._frames_until(position)
        if pieces:
            del self.frames[:pieces]  # one memmove; the list is small (SOFT)
            self.start += span
            if self.shared is not None and not self.overflowed:
                self._count(max(0, self.counted - span))
        self._rearm()

    def _frames_until(self, position: int) -> tuple[int, int]:
        """(pieces, bytes) of the retained frames that end at or before
        ``position``. C-speed sums and a bisection: no per-frame Python loop."""
        target = position - self.start
        frames = self.frames
        if target <= 0 or not frames:
            return 0, 0
        acc = list(accumulate(map(len, frames)))
        if not self.prefixed:
            k = bisect_right(acc, target)
            return k, acc[k - 1] if k else 0
        # Two pieces per frame, each frame 3 prefix bytes longer than its position span.
        k = bisect_right(range(len(acc) // 2), target, key=lambda i: acc[2 * i + 1] - 3 * (i + 1))
        return 2 * k, (acc[2 * k - 1] - 3 * k) if k else 0

    def can_replay(self, position: int, end: int) -> bool:
        """True when every frame from ``position`` on is still here and
        ``position`` is a frame boundary."""
        if self.overflowed or not self.start <= position <= end:
            return False
        return self.start + self._frames_until(position)[1] == position

    def replay(self, position: int) -> list[bytes]:
        """The queued pieces of every frame from ``position`` on (checked
        with ``can_replay``); older frames are dropped."""
        self.trim(position)
        return list(self.frames)
