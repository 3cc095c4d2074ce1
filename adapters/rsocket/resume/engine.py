"""The engine of a resumable session and the link each transport's driver
drives it through.

:class:`SessionEngine` is an :class:`~..engine.RSocketEngine` whose session
outlives its transport: when the transport ends it asks its session
(:class:`Owner`, the lifecycle of :mod:`.session`) what happens next instead
of failing every stream. It also keeps:

- the client's RESUME deadline: from the first turn of a transport that
  carries a RESUME, ``next_deadline()`` includes ``resume_timeout`` (anchored
  at the ``now`` the driver passes in); a RESUME unanswered by then ends that
  transport, and the session tries again within its reconnect policy. The
  core arms the same deadline (``ConnectionConfig.resume_timeout``, set to
  this value); the engine's own keeps it on a core that has none;
- the fire-and-forgets the peer has not confirmed yet (:class:`Unconfirmed`),
  so that a session ending without them says how many (``SessionLoss``).

Each transport brings its framing (:meth:`SessionEngine.drive_with`): a
byte stream, or WebSocket records, one frame per binary message; over
WebSocket a Close ends only the transport unless its code says the protocol
broke (docs/resumption.md, Over WebSocket).

A driver never holds a session engine directly but an :class:`EngineLink`
(one per transport): when a RESUME moves the session to a new transport the
old link goes stale and everything its driver still calls is a no-op that
asks it to close.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from ...drive.endpoints import message_framed
from ...drive.engine import Driver
from ...drive.errors import ConnectionClosed
from ...transport.websocket import messages as ws
from .. import core
from ..engine import RSocketEngine
from ..fast import plain_payloads
from ..options import EngineOptions
from ..types import Payload
from .options import ResumeOptions, SessionLoss

__all__ = ["EngineLink", "Owner", "Registry", "SessionEngine", "Unconfirmed", "resume_timeout"]

log = logging.getLogger("sansrs.adapters.rsocket")

_State = core.ConnectionState
_REJECTED_RESUME = 0x004
_CONNECTION_CLOSE = 0x102
#: Fire-and-forgets sent between two trims of the unconfirmed positions.
_TRIM_EVERY = 1024
#: WebSocket Close codes that say a peer broke the protocol (RFC 6455, 7.4.1:
#: 1002 framing, 1003 data it cannot take, 1007 invalid data, 1008 policy,
#: 1009 too big, 1010 extension): a session resumed after one would send the
#: same bytes again, so it ends. Any other Close (1000, 1001, 1006, 1011, a
#: proxy's 1012-1014, ...) only ends the transport: the session resumes.
_WS_FATAL = frozenset({1002, 1003, 1007, 1008, 1009, 1010})
_LIVE = (_State.ESTABLISHED, _State.RESUMING)


class Owner(Protocol):
    """What a session engine needs from its session's lifecycle (:mod:`.session`)."""

    def link_lost(self, link: EngineLink, error: BaseException) -> None: ...

    def link_exited(self, link: EngineLink) -> None: ...

    def call_soon(self, fn: Callable[[], None], timeout: float | None = None) -> None: ...

    def resumed(self, retransmitted: int) -> None: ...


class Registry(Protocol):
    """What a fresh server connection needs from its server's sessions (:mod:`.server`)."""

    def first_frame(
        self, engine: SessionEngine, frame: bytes, feed: Callable[[], bytes]
    ) -> bytes: ...

    def setup(self, engine: SessionEngine) -> None: ...

    def adopt(self, engine: SessionEngine, session: object) -> None: ...


def resume_timeout(options: EngineOptions, resume: ResumeOptions) -> float:
    """How long a client's RESUME waits for RESUME_OK (seconds)."""
    if resume.resume_timeout is not None:
        return resume.resume_timeout
    return options.max_lifetime + options.keepalive_interval


class EngineLink:
    """The engine one driver (one transport) sees. It forwards to the
    session's engine; once ``stale`` (the session moved to another transport,
    or let this one go) every call is a no-op that asks the driver to close."""

    __slots__ = ("stale", "target")

    def __init__(self, target: SessionEngine) -> None:
        self.target = target
        self.stale = False

    def receive_data(self, data: bytes, now: float) -> None:
        if not self.stale:
            self.target.receive_data(data, now)

    def pump(self) -> bool:
        return False if self.stale else self.target.pump()

    def data_to_send(self) -> bytes:
        return b"" if self.stale else self.target.data_to_send()

    def next_deadline(self) -> float | None:
        return None if self.stale else self.target.next_deadline()

    def handle_timeout(self, now: float) -> None:
        if not self.stale:
            self.target.handle_timeout(now)

    def wants_close(self) -> bool:
        return self.stale or self.target.wants_close()

    def close_reason(self) -> BaseException | None:
        if self.stale:
            return ConnectionClosed("transport superseded: the session went on without it")
        return self.target.close_reason()

    def begin_close(self) -> None:
        if not self.stale:
            self.target.begin_close()

    @property
    def handshaken(self) -> bool:
        return self.stale or self.target.handshaken

    def connection_lost(self, error: BaseException) -> None:
        # The session decides under its lock whether this link still counts.
        self.target.link_lost(self, error)

    def exited(self) -> None:
        """The driver ended (after ``connection_lost``, or instead of it if that failed)."""
        self.target.link_exited(self)


class Unconfirmed:
    """Fire-and-forgets handed to the core that the peer has not confirmed
    receiving: their end positions, trimmed as the peer acknowledges (bounded
    by the retained frames), plus counts of those that cannot be tracked."""

    __slots__ = ("dropped", "ends", "sent_since_trim", "untracked")

    def __init__(self) -> None:
        self.ends: deque[int] = deque()
        self.sent_since_trim = 0
        #: Sent while the session could not resume (nothing retained to check).
        self.untracked = 0
        #: Handed over after the session had ended: never sent.
        self.dropped = 0

    def acknowledge(self, position: int | None) -> None:
        self.sent_since_trim = 0
        if position is None:
            return
        ends = self.ends
        while ends and ends[0] <= position:
            ends.popleft()

    def count(self) -> int:
        return len(self.ends) + self.untracked + self.dropped


class SessionEngine(RSocketEngine):
    """An :class:`RSocketEngine` whose session survives its transport (see
    the module notes). ``registry``: a server's sessions, for a fresh server
    connection (its first frame may be SETUP or RESUME)."""

    def __init__(
        self,
        options: EngineOptions,
        conn: core.Connection,
        resume: ResumeOptions,
        *,
        registry: Registry | None = None,
    ) -> None:
        super().__init__(options, conn)
        self.resume = resume
        self.link = EngineLink(self)
        self.session: Owner | None = None
        self._registry = registry
        #: Server: the first frame (SETUP or RESUME) received so far, in a
        #: bytearray: linear however it is trickled (docs/security.md).
        self._first_frame = bytearray()
        #: Why this transport is done while the session goes on (None: it is not).
        self._gone: str | None = None
        self._resume_armed = False
        self._resume_deadline: float | None = None
        #: Client: when the current outage must be over (``reconnect_timeout``
        #: after the loss): no RESUME waits past it.
        self._outage_ends: float | None = None
        #: What the armed RESUME's deadline says when it passes.
        self._resume_waits = ""
        self.unconfirmed = Unconfirmed()
        #: Server, fresh connection: the session it handed its transport to.
        self.adopted: object = None
        #: Server, fresh connection: an ERROR frame for a RESUME refused here.
        self._refusal = b""
        #: The session ended by the CONNECTION_CLOSE exchange (and who began it).
        self._graceful = False
        self._graceful_by_peer = False
        self._peer_closed = False

    # -- the driver of the moment -----------------------------------------------
    def drive_with(self, driver: Driver | None, link: EngineLink | None = None) -> None:
        """Session lifecycle, under its lock: ``driver`` (through ``link``)
        drives this engine from now on; None: nothing does."""
        self.thread = driver
        self._write_now = getattr(driver, "write_now", None)
        if driver is not None:
            # Each transport its own framing: WebSocket records (one frame
            # per binary message) or a byte stream; the core's positions
            # count frame bytes without a length prefix either way (spec:
            # Implied Position), so they mean the same over both.
            framed = message_framed(driver.transport)
            self._records = ws.MessageReader(keep_runs=True) if framed else None
            self._ws_close = None
        # (Byte streams only: a message transport's engine frames its output.)
        self._write_bytes = (
            getattr(driver, "write_bytes", None) if self._records is None else None
        )
        if link is not None:
            link.target = self
            self.link = link
            self._gone = None
            self._peer_closed = False

    def arm_resume_deadline(self, outage_ends: float | None = None) -> None:
        """Client: a RESUME goes out on the transport attached now; it waits
        ``resume_timeout`` for RESUME_OK, and never past ``outage_ends``
        (monotonic seconds: the reconnect policy's end of the outage)."""
        self._resume_armed = True
        self._resume_deadline = None  # anchored at the first turn's ``now``
        self._outage_ends = outage_ends

    @property
    def resume_timeout(self) -> float:
        return resume_timeout(self.options, self.resume)

    def _anchor_resume_deadline(self, now: float) -> None:
        wait = self.resume_timeout
        ends = self._outage_ends
        if ends is not None and ends - now < wait:
            # What is left of the outage caps this RESUME's wait: the
            # session ends within reconnect_timeout of the loss, as promised.
            wait = max(0.0, ends - now)
            self._resume_waits = (
                "RESUME not answered when reconnect_timeout "
                f"({self.resume.reconnect_timeout:g} s) ran out"
            )
        else:
            self._resume_waits = f"RESUME not answered within {wait:g} s"
        self._resume_deadline = now + wait

    def _transport_gone(self, reason: str) -> None:
        """This transport is done; the session may resume on another. Unsent
        bytes are useless (the retained frames go again): reset it now rather
        than wait for a stalled peer to drain them."""
        self._gone = reason
        driver = self.thread
        if driver is not None:
            driver.abort(timeout=0)

    # -- Engine protocol ---------------------------------------------------------
    def next_deadline(self) -> float | None:
        deadline = super().next_deadline()
        if self._resume_armed:
            at = 0.0 if self._resume_deadline is None else self._resume_deadline
            if deadline is None or at < deadline:
                return at
        return deadline

    def handle_timeout(self, now: float) -> None:
        if self._resume_armed:
            if self._resume_deadline is None:
                self._anchor_resume_deadline(now)
            elif now >= self._resume_deadline and self.conn.state is _State.RESUMING:
                self._resume_armed = False
                self.resume.step("client:resume-timeout")
                self._transport_gone(self._resume_waits)
        super().handle_timeout(now)

    def receive_data(self, data: bytes, now: float) -> None:
        if not data:
            self._peer_closed = True
        super().receive_data(data, now)

    def wants_close(self) -> bool:
        if self._gone is not None:
            return True
        if self._close_started and self._graceful and not self._peer_closed:
            # Our goodbye went out: close once the peer has read it and
            # closed too (bounded by the driver's close_timeout). Closing at
            # once, with its answer unread, would reset the connection and
            # might lose the goodbye: the peer would keep a detached session.
            return False
        return super().wants_close()

    def close_reason(self) -> BaseException | None:
        if self._gone is not None and self._closing is None:
            return ConnectionClosed(f"transport lost ({self._gone}); the session resumes")
        return super().close_reason()

    def pieces_to_send(self, at_least: int) -> list[bytes] | None:
        if self._refusal:
            return None  # (``data_to_send`` puts the refusal first)
        return super().pieces_to_send(at_least)

    def data_to_send(self) -> bytes:
        if self._refusal:
            out, self._refusal = self._refusal, b""
            if self._records is not None:
                out = ws.encode_run(out)
            return out + super().data_to_send()
        return super().data_to_send()

    def _ws_closed(self, code: int, reason: str) -> None:
        """A WebSocket Close: on a resumable session only the transport ends
        (the peer's Close 1011 of an aborted connection, a proxy's 1001),
        like a TCP FIN or reset; a Close saying the protocol broke
        (``_WS_FATAL``) ends the session."""
        target = self.link.target
        if target is not self:  # handed over within this read: it is the session's
            target._ws_closed(code, reason)
            return
        self._peer_closed = True
        conn = self.conn
        detail = f" ({reason})" if reason else ""
        if code in _WS_FATAL:
            if conn.resumable:  # not a mere transport loss: the session ends here
                self.close_core(f"WebSocket closed: {code}{detail}")
        elif conn.resumable and conn.state in _LIVE:
            self._gone = f"WebSocket closed: {code}{detail}"
            conn.connection_lost()  # Disconnected: the session detaches, then resumes
            self._dispatch_events()
            if conn.state is _State.DISCONNECTED:
                return
            self._gone = None  # the core ended the session instead (it cannot resume)
        super()._ws_closed(code, reason)

    def _receive_stream(self, data: bytes, now: float) -> None:
        target = self.link.target
        if target is not self:
            # Server: a RESUME earlier in this read handed the transport to a
            # resumed session (WebSocket: the records after it are its input).
            target._now = now
            target._receive_stream(data, now)
            return
        super()._receive_stream(data, now)

    def link_lost(self, link: EngineLink, error: BaseException) -> None:
        """``connection_lost`` from ``link``'s driver: the session decides."""
        if self.session is None:
            if link.target is self and not link.stale:
                self.connection_lost(error)  # a plain connection, or no SETUP yet
            return
        self.session.link_lost(link, error)

    def link_exited(self, link: EngineLink) -> None:
        if self.session is not None:
            self.session.link_exited(link)

    # -- what the session reads at its end ------------------------------------------
    def acknowledge(self) -> None:
        self.unconfirmed.acknowledge(core.acknowledged_position(self.conn))

    def outstanding_requests(self) -> int:
        return len(self._requests) + self.leases.waiting_requests()

    def loss(self, reason: str, requests: int) -> SessionLoss | None:
        """What ending now loses: ``requests`` outstanding, fire-and-forgets
        unconfirmed (None: nothing, or a graceful close)."""
        self.acknowledge()
        # Clean: the peer began the close exchange, or answered ours by
        # closing the transport (so it read everything before our goodbye).
        clean = self._graceful and (self._graceful_by_peer or self._peer_closed)
        fire_and_forgets = 0 if clean else self.unconfirmed.count()
        if clean or not (requests or fire_and_forgets):
            return None
        return SessionLoss(reason=reason, fire_and_forgets=fire_and_forgets, requests=requests)

    def close_core(self, reason: str) -> None:
        """Make sure the core has ended too (its server store entry is freed)."""
        if self.conn.state is not _State.CLOSED:
            with contextlib.suppress(core.LocalProtocolError):
                self.conn.close(reason, error_code=0x101)  # CONNECTION_ERROR
        self._dispatch_events()

    # -- fire-and-forgets: counted until the peer confirms them -------------------
    def fire_and_forget(self, payload: Payload) -> None:
        if self._closing is not None:
            self.unconfirmed.dropped += 1  # the session is over: never sent
            return
        conn = self.conn
        before = conn.sent_position
        try:
            super().fire_and_forget(payload)
        except core.LocalProtocolError:
            self.unconfirmed.dropped += 1
            return
        if conn.sent_position != before:  # (else: waiting for a lease; counted then)
            self._sent_fnf(conn)

    def fire_and_forget_data(self, data: list[bytes]) -> None:
        # Each is counted until confirmed: the frame-by-frame path below.
        self.fire_and_forget_many(plain_payloads(data))

    def fire_and_forget_many(self, payloads: list[Payload]) -> None:
        if self.leases.in_force() or self._closing:
            for payload in payloads:
                self.fire_and_forget(payload)
            return
        conn = self.conn
        request_fnf = conn.request_fnf
        sent = self._sent_fnf
        for i, payload in enumerate(payloads):
            try:
                request_fnf(payload.data, payload.metadata)
            except core.LocalProtocolError:
                self.unconfirmed.dropped += len(payloads) - i
                return
            sent(conn)

    def _sent_fnf(self, conn: core.Connection) -> None:
        unconfirmed = self.unconfirmed
        if not conn.resumable:
            unconfirmed.untracked += 1
            return
        unconfirmed.ends.append(conn.sent_position)
        unconfirmed.sent_since_trim += 1
        if unconfirmed.sent_since_trim >= _TRIM_EVERY:
            self.acknowledge()

    # -- calls for the driving thread ---------------------------------------------
    def _call_soon(self, fn: Callable[[], None]) -> None:
        session = self.session
        if session is None:
            super()._call_soon(fn)
            return
        with contextlib.suppress(ConnectionClosed):  # the session ended: dropped
            session.call_soon(fn)

    # -- events from the core --------------------------------------------------------
    def on_disconnected(self, reason: str, timed_out: bool) -> None:
        log.info("resumable session lost its transport: %s", reason)
        self.acknowledge()
        self._resume_armed = False
        # (A reason given first, e.g. the RESUME deadline, says more than the EOF it caused.)
        self._transport_gone(self._gone or reason)

    def on_resumed(self, peer_position: int, retransmitted: int) -> None:
        log.info("session resumed (%d bytes sent again)", retransmitted)
        self._resume_armed = False
        self.acknowledge()
        if self.session is not None:
            self.session.resumed(retransmitted)

    def on_closed(self, code: int, message: str, by_peer: bool) -> None:
        self._graceful = code == _CONNECTION_CLOSE
        self._graceful_by_peer = self._graceful and by_peer
        super().on_closed(code, message, by_peer)

    # -- server: the first frame of a fresh connection ---------------------------
    def _feed_setup_first(self, data: bytes, now: float) -> bytes:
        registry = self._registry
        if registry is None:
            return super()._feed_setup_first(data, now)
        pending = self._first_frame
        pending += data
        if len(pending) < 3 or len(pending) < 3 + int.from_bytes(pending[:3], "big"):
            return b""
        buf = bytes(pending)
        pending.clear()

        def feed() -> bytes:
            return RSocketEngine._feed_setup_first(self, buf, now)

        rest = registry.first_frame(self, buf[3 : 3 + int.from_bytes(buf[:3], "big")], feed)
        if self.link.target is not self:  # handed over to a resumed session
            if rest:
                self._receive_stream(rest, now)  # the rest is its input
            return b""
        return rest

    def refuse_resume(self, message: str) -> None:
        """Server, fresh connection: answer its RESUME with
        ERROR[REJECTED_RESUME] and close, without its core (never silence)."""
        log.warning("RESUME refused: %s", message)
        self._refusal = core.error_frame(_REJECTED_RESUME, message)
        self._closing = ConnectionClosed(f"resumption refused: {message}")

    def on_setup(self, ev: Any) -> None:
        super().on_setup(ev)
        registry = self._registry
        if registry is not None and self.conn.state is _State.ESTABLISHED:
            registry.setup(self)

    def on_resume_accepted(self, session: object) -> None:
        assert self._registry is not None  # only a server with sessions hands over
        self._registry.adopt(self, session)


# -- resumption events: only this engine takes them ---------------------------
SessionEngine.EVENTS = {
    **RSocketEngine.EVENTS,
    core.events.Disconnected: lambda en, ev: en.on_disconnected(ev.reason, ev.timed_out),
    core.events.Resumed: lambda en, ev: en.on_resumed(ev.peer_position, ev.retransmitted),
    core.events.ResumeAccepted: lambda en, ev: en.on_resume_accepted(ev.session),
}
