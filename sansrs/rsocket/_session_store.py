"""Server-side store of resumable sessions, keyed by resume identification
token (spec: Resuming Operation, Identification Token Handling).

Sans-IO like the connections: time enters as ``now``. A session stays in the
store from its SETUP (with R) until it ends; while it has no transport it is
kept ``keep_detached`` seconds, then ``expire(now)`` (or a RESUME arriving
later) ends it and frees it. Tokens are secrets: the store never shows them
(its repr counts sessions only).

One store serves every connection of a server. Each call is a single dict
operation plus work on one session, but a session must not be driven by two
threads at once: an adapter running connections on several threads
serializes RESUME handling with the thread that owns the old session (the
sansrs adapters do it under one lock).
"""

from __future__ import annotations

from typing import Protocol

from ._retained import RetainedBudget
from ._state import ConnectionState

__all__ = ["SessionStore", "StoredSession"]

_DISCONNECTED = ConnectionState.DISCONNECTED
_CLOSED = ConnectionState.CLOSED


class StoredSession(Protocol):
    """What the store asks of a session (a server ``Connection``): only its
    public API. Detached, its ``next_deadline()`` is when it expires and
    ``handle_timeout(now)`` ends it then."""

    @property
    def state(self) -> ConnectionState: ...

    def next_deadline(self) -> float | None: ...

    def handle_timeout(self, now: float) -> None: ...


class SessionStore:
    """Resumable sessions by token; see the module docstring."""

    def __init__(
        self,
        *,
        keep_detached: float = 60.0,
        max_sessions: int = 10_000,
        max_retained: int = 64 * 1024 * 1024,
    ) -> None:
        if keep_detached <= 0:
            raise ValueError("keep_detached must be > 0 seconds")
        if max_sessions < 1:
            raise ValueError("max_sessions must be >= 1")
        #: Seconds a session without a transport waits for a RESUME.
        self.keep_detached = keep_detached
        #: Most sessions kept at once; beyond it a SETUP with R is rejected.
        self.max_sessions = max_sessions
        #: Bytes of sent frames all the sessions together retain for
        #: resumption (each also within its ``resume_buffer_size``); a
        #: session growing past it is no longer resumable.
        self.retained = RetainedBudget(max_retained)
        self._sessions: dict[bytes, StoredSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __repr__(self) -> str:
        return (
            f"<SessionStore sessions={len(self._sessions)} keep_detached={self.keep_detached:g}s>"
        )

    def reserve(self, token: bytes, session: StoredSession) -> str | None:
        """Register a new session; the reason when it cannot be (token live)."""
        if len(self._sessions) >= self.max_sessions:
            return "too many resumable sessions"
        if self._sessions.setdefault(token, session) is not session:
            return "the resume token is already in use"
        return None

    def release(self, token: bytes, session: StoredSession) -> None:
        """Forget an ended session (only if ``token`` still names it)."""
        if self._sessions.get(token) is session:
            del self._sessions[token]

    def lookup(self, token: bytes, now: float | None) -> StoredSession | None:
        """The live session for ``token``; None when unknown, ended or
        expired (an expired one is ended and freed here)."""
        session = self._sessions.get(token)
        if session is None:
            return None
        if now is not None and _expired(session, now):
            return None
        return session

    def expire(self, now: float) -> list[StoredSession]:
        """End and free every session detached for ``keep_detached`` seconds
        or more at ``now``; returns them (each has a terminal
        ``ConnectionLost(timed_out=True)`` event)."""
        return [s for s in list(self._sessions.values()) if _expired(s, now)]

    def next_deadline(self) -> float | None:
        """When ``expire`` next has something to do (None: nothing detached)."""
        deadlines = [
            deadline
            for s in self._sessions.values()
            if s.state is _DISCONNECTED and (deadline := s.next_deadline()) is not None
        ]
        return min(deadlines) if deadlines else None


def _expired(session: StoredSession, now: float) -> bool:
    """Let a detached session see ``now``: True when that ended it (it
    waited ``keep_detached`` seconds; ending it released it from the store)."""
    if session.state is not _DISCONNECTED:
        return False
    session.handle_timeout(now)
    return session.state is _CLOSED
