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
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate

__all__ = ["RetainedFrames"]

_NEVER = float("inf")
#: Retained bytes at which an end asks the peer for its position.
SOFT = 64 * 1024


class RetainedFrames:
    __slots__ = (
        "ask",
        "asked",
        "check_at",
        "frames",
        "limit",
        "overflowed",
        "prefixed",
        "soft",
        "start",
    )

    def __init__(self, limit: int, prefixed: bool, start: int = 0) -> None:
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

    def size(self, end: int) -> int:
        """Bytes retained (frame lengths, the positions they span)."""
        return 0 if self.overflowed else end - self.start

    def _rearm(self) -> None:
        if self.overflowed:
            self.check_at = _NEVER
        else:
            self.check_at = self.start + (self.limit if self.ask or self.asked else self.soft)

    def check(self, end: int) -> None:
        """The sent position passed ``check_at``: ask for the peer's
        position, or give up past the limit."""
        size = end - self.start
        if size > self.limit:
            self.frames.clear()
            self.overflowed = True
        elif size > self.soft and not self.asked:
            self.ask = True
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
