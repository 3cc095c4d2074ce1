"""What a resumable session is set up with (:class:`ResumeOptions`) and what
the application learns when a session ends having lost something
(:class:`SessionLoss`, :class:`SessionLost`). docs/resumption.md."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ...drive.errors import ConnectionClosed
from ...transport.urls import Endpoint, parse_url

__all__ = ["ResumeOptions", "SessionLoss", "SessionLost", "Step", "byte_stream_only"]

#: ``on_step`` receives the name of each lifecycle step as it is taken
#: (docs/resumption.md lists them); tests block in it to force interleavings.
Step = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionLoss:
    """A resumable session ended and some of what was handed over to it may
    not have reached the peer."""

    #: Why the session ended.
    reason: str
    #: Fire-and-forgets handed over that the peer had not confirmed receiving
    #: (an upper bound: some may have arrived; none will be sent again).
    fire_and_forgets: int
    #: Requests still outstanding; each one failed with ``ConnectionClosed``.
    requests: int

    def __str__(self) -> str:
        return (
            f"{self.fire_and_forgets} fire-and-forget(s) unconfirmed and "
            f"{self.requests} request(s) failed: {self.reason}"
        )


class SessionLost(ConnectionClosed):
    """``close()`` of a resumable client whose session ended with
    fire-and-forgets the server never confirmed (``loss`` says how many)."""

    def __init__(self, loss: SessionLoss) -> None:
        super().__init__(f"session lost: {loss}")
        self.loss = loss


@dataclass(kw_only=True)
class ResumeOptions:
    """Resumption settings (seconds for times); docs/resumption.md.

    Both ends: ``resume_buffer_size`` (bytes of sent frames retained until
    the peer acknowledges them; past it the session cannot resume).

    Server: ``keep_detached`` (how long a session without a transport waits
    for a RESUME), ``max_sessions`` (resumable sessions held at once, any
    phase; a SETUP with R beyond it evicts the session detached the longest,
    and is rejected only when none is detached), ``max_retained`` (bytes all the
    sessions retain together; a session growing past it can no longer
    resume: docs/security.md), ``handover_timeout`` (how long a RESUME waits
    for the session's previous transport to let go).

    Client: ``reconnect_initial`` / ``reconnect_max`` (backoff, doubled per
    failed attempt, jitter from ``rng``), ``reconnect_timeout`` (give up when
    the session is not resumed within this long of the loss: it bounds the
    whole outage, every connect and RESUME in it included),
    ``resume_timeout`` (a RESUME not answered within it, or within what is
    left of ``reconnect_timeout`` if less, is a failed attempt; ``None``: the
    session's ``max_lifetime`` plus its ``keepalive_interval``).

    Callbacks (on a driver or helper thread; they must not block):
    ``on_loss(SessionLoss)`` when a session ends having lost something,
    ``on_disconnected(reason)``, ``on_resumed(seconds_detached)``, and
    ``on_step(name)`` for every lifecycle step (tracing and tests).
    """

    resume_buffer_size: int = 8 * 1024 * 1024
    keep_detached: float = 60.0
    max_sessions: int = 10_000
    max_retained: int = 64 * 1024 * 1024
    handover_timeout: float = 5.0
    reconnect_initial: float = 0.05
    reconnect_max: float = 2.0
    reconnect_timeout: float = 60.0
    resume_timeout: float | None = None
    rng: random.Random | None = None
    on_loss: Callable[[SessionLoss], None] | None = None
    on_disconnected: Callable[[str], None] | None = None
    on_resumed: Callable[[float], None] | None = None
    on_step: Step | None = None

    def __post_init__(self) -> None:
        if self.reconnect_initial <= 0 or self.reconnect_max < self.reconnect_initial:
            raise ValueError("need 0 < reconnect_initial <= reconnect_max")
        for name in ("keep_detached", "reconnect_timeout", "handover_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0 seconds")
        if self.resume_timeout is not None and self.resume_timeout <= 0:
            raise ValueError("resume_timeout must be > 0 seconds (or None)")
        if self.max_sessions < 1 or self.resume_buffer_size < 1 or self.max_retained < 1:
            raise ValueError("max_sessions, resume_buffer_size and max_retained must be >= 1")

    def step(self, name: str) -> None:
        if self.on_step is not None:
            self.on_step(name)


def byte_stream_only(url: str | Endpoint) -> None:
    """Resumption needs a byte-stream transport: the positions count bytes
    of length-prefixed frames (WebSocket would need the same hand-over of
    its record layer)."""
    endpoint = url if isinstance(url, Endpoint) else parse_url(url)
    if endpoint.scheme in ("ws", "wss"):
        raise ValueError("resumable sessions need a byte-stream transport (tcp, tls, unix)")
