"""The lifecycle of one resumable session as the adapter sees it: which
transport's driver may touch the session's core, as a table that runs.

The core knows the protocol states (ESTABLISHED, DISCONNECTED, RESUMING,
...); this table knows the threads. ``ATTACHED`` means one driver (the
session's current :class:`~.engine.EngineLink`) drives the core and nothing
else may touch it; ``DETACHED`` means no driver does (a RESUME may take the
session over, the sweeper may expire it); ``HANDING_OVER`` means a RESUME
on a new transport found the session still attached to its old transport
and waits (bounded) for that driver to let go; ``FINISHED`` is terminal.

Every step is taken under the session's lock (a server's registry lock,
shared by all its sessions and by RESUME look-ups; a client's own lock), so
no interleaving of an old transport's teardown and a new transport's RESUME
can finish a live session (docs/resumption.md).
"""

from __future__ import annotations

import enum

__all__ = ["TRANSITIONS", "Lifecycle", "Phase", "Step"]


class Phase(enum.Enum):
    ATTACHED = "attached"
    HANDING_OVER = "handing-over"
    DETACHED = "detached"
    FINISHED = "finished"


class Step(enum.Enum):
    #: The current transport's driver let go (its ``connection_lost``, or its
    #: exit if that failed), the session can resume.
    DETACH = "detach"
    #: Server: a RESUME on a new transport found the session attached.
    SUPERSEDE = "supersede"
    #: A new transport's driver drives the session (server: RESUME accepted;
    #: client: RESUME sent on a new transport).
    ATTACH = "attach"
    #: The session is over (closed, rejected, expired, given up).
    FINISH = "finish"


_P = Phase
_S = Step

#: (phase, step) -> next phase; a missing pair is refused (``Lifecycle.take``
#: returns False and changes nothing).
TRANSITIONS: dict[tuple[Phase, Step], Phase] = {
    (_P.ATTACHED, _S.DETACH): _P.DETACHED,
    (_P.ATTACHED, _S.SUPERSEDE): _P.HANDING_OVER,
    (_P.ATTACHED, _S.FINISH): _P.FINISHED,
    (_P.HANDING_OVER, _S.DETACH): _P.DETACHED,
    (_P.HANDING_OVER, _S.FINISH): _P.FINISHED,
    (_P.DETACHED, _S.ATTACH): _P.ATTACHED,
    (_P.DETACHED, _S.FINISH): _P.FINISHED,
}


class Lifecycle:
    """The phase and generation of one session (see the module notes). Not
    thread-safe by itself: its owner takes every step under one lock."""

    __slots__ = ("generation", "phase", "since")

    def __init__(self, now: float) -> None:
        self.phase = Phase.ATTACHED
        #: Bumped by every ATTACH: which transport is the current one.
        self.generation = 1
        #: When the phase last changed (monotonic seconds).
        self.since = now

    def take(self, step: Step, now: float) -> bool:
        """Take ``step`` if the table allows it from the current phase."""
        nxt = TRANSITIONS.get((self.phase, step))
        if nxt is None:
            return False
        self.phase = nxt
        self.since = now
        if step is Step.ATTACH:
            self.generation += 1
        return True

    @property
    def finished(self) -> bool:
        return self.phase is Phase.FINISHED

    def __repr__(self) -> str:
        return f"<Lifecycle {self.phase.value} generation={self.generation}>"
