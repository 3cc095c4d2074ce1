"""Resumption (spec: Resuming Operation): a resumable session outlives its
transport.

Client: ``setup(resume=True)`` sends SETUP with R and a token. When the
transport ends (or the peer is silent past the max lifetime) the session is
``DISCONNECTED`` (event ``Disconnected``) instead of closed; ``resume()``
queues RESUME for a new transport, and nothing else leaves until RESUME_OK,
which retransmits the retained frames from the server's position. An
ERROR[REJECTED_RESUME] (or any connection ERROR) ends the session for good.
A RESUME unanswered for ``config.resume_timeout`` detaches the session again
(``next_deadline()`` says when; ``Disconnected(timed_out=True)``).

Server: a ``Connection(Role.SERVER, sessions=store)`` accepts SETUP with R
(the token is registered in the ``SessionStore``); on transport loss the
session waits in the store. A fresh server connection whose first frame is
RESUME finds the session, checks the positions (both sides must still hold
what the other lacks) and hands itself over: ``ResumeAccepted(session=...)``
on the fresh connection, RESUME_OK plus the retransmitted frames queued on
the session, which the adapter drives from then on. docs/rsocket.md has the
details and every choice made here.

``Resumption`` is the part of ``Connection`` that does all this; the
retained frames themselves are kept by ``Output`` (``_retained.py``), the
sessions by the server's ``SessionStore`` (``_session_store.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from .._errors import LocalProtocolError
from ._context import Context
from ._frames import (
    MAJOR_VERSION,
    ErrorCode,
    ErrorFrame,
    Frame,
    LeaseFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
)
from ._keepalive import Keepalive
from ._lease import Leases
from ._session_store import SessionStore, StoredSession
from ._state import ConnectionInput, ConnectionState
from .events import Disconnected, ResumeAccepted, Resumed

__all__ = ["Resumption"]

_CI = ConnectionInput
_DISCONNECTED = ConnectionState.DISCONNECTED
_RESUMING = ConnectionState.RESUMING
_ESTABLISHED = ConnectionState.ESTABLISHED


class Resumption:
    """The resume part of one ``Connection`` (see the module docstring).

    - ``start(token)``: the session is resumable (SETUP with R);
    - ``on_transport_end()`` / ``detach(...)``: the transport is gone;
    - ``resume()``, ``pre_resumed(f)``: the client's RESUME and its answer;
    - ``reserve(f)``, ``on_resume(f)``, ``accept_resume(f, now)``: the
      server's SETUP with R, a RESUME on a fresh connection, the session
      taking that connection over (``handoff``);
    - ``expire(now)`` / ``deadline()``: a detached server session's end;
      ``resume_timed_out(now)``: a client's RESUME left unanswered;
    - ``before_send()``: what may leave while detached; the question for
      the peer's position when retained frames pile up.
    """

    __slots__ = (
        "_ctx",
        "_keepalive",
        "_leases",
        "_output",
        "_part_of",
        "detached",
        "detached_at",
        "handoff",
        "hold",
        "owner",
        "resume_deadline",
        "resumes",
        "sessions",
        "token",
    )

    def __init__(
        self,
        ctx: Context,
        keepalive: Keepalive,
        leases: Leases,
        sessions: SessionStore | None,
        owner: StoredSession,
        part_of: Callable[[StoredSession], Resumption | None],
    ) -> None:
        self._ctx = ctx
        self._output = ctx.output
        self._keepalive = keepalive
        self._leases = leases
        #: Server: where resumable sessions wait (None: no resumption).
        self.sessions = sessions
        #: The connection this is part of: what the store keeps, and what
        #: ``ResumeAccepted`` hands over.
        self.owner = owner
        # The resume part of a session the store returned.
        self._part_of = part_of
        self.token: bytes | None = None  # never shown: a secret
        # DISCONNECTED / RESUMING: only the first ``hold`` output items (the
        # RESUME) may reach the transport; the rest is retained anyway.
        self.detached = False
        self.hold = 0
        self.detached_at = 0.0
        self.resumes = 0
        #: Client, RESUMING: when the RESUME counts as unanswered (None: not
        #: anchored yet; the first ``handle_timeout(now)`` anchors it).
        self.resume_deadline: float | None = None
        #: Server, fresh connection: the session its RESUME went to.
        self.handoff: Resumption | None = None
        ctx.on_closed.append(self._closed)

    # ------------------------------------------------------------------
    # inspection

    @property
    def resumable(self) -> bool:
        """True while the session could survive a transport loss."""
        r = self._output.retained
        return r is not None and not r.overflowed

    @property
    def retained_bytes(self) -> int:
        """Bytes of sent frames kept for a resumption (0 when not resumable)."""
        r = self._output.retained
        return 0 if r is None else r.size(self._output.sent_position)

    def deadline(self) -> float | None:
        """While detached: a client's RESUME deadline (0.0 until anchored), a
        server session's expiry."""
        state = self._ctx.state
        if state is _RESUMING:
            deadline = self.resume_deadline
            return 0.0 if deadline is None else deadline
        store = self.sessions
        if store is None or state is not _DISCONNECTED:
            return None
        return self.detached_at + store.keep_detached

    # ------------------------------------------------------------------
    # retaining and detaching

    def start(self, token: bytes) -> None:
        self.token = token
        store = self.sessions  # a server's sessions share one retained budget
        self._output.start_retaining(None if store is None else store.retained)

    def _unresumable_reason(self) -> str:
        return (
            "the session cannot be resumed: more than "
            f"{self._ctx.config.resume_buffer_size} bytes of sent frames were not "
            "acknowledged by the peer (resume_buffer_size)"
        )

    def peer_position(self, position: int) -> None:
        """A KEEPALIVE from the peer: it has every frame up to ``position``
        (spec: Keepalive Position Field); our question is answered."""
        r = self._output.retained
        if r is not None:
            r.answered()
            self._output.trim_retained(position)

    def on_transport_end(self) -> bool:
        """The transport ended: True when the session lives on (detached
        now, or it had no transport)."""
        state = self._ctx.state
        if self._output.retained is not None and (state is _ESTABLISHED or state is _RESUMING):
            self.detach("the transport closed", timed_out=False)
            return True
        return state is _DISCONNECTED

    def detach(self, reason: str, *, timed_out: bool) -> None:
        """Lose the transport but keep the session (when it can resume)."""
        ctx = self._ctx
        out = self._output
        r = out.retained
        assert r is not None
        if r.overflowed and ctx.client:
            # (A server keeps the session until it expires, so that a RESUME
            # gets REJECTED_RESUME with this reason rather than "unknown".)
            ctx.lose(_CI.FATAL, f"{reason}; {self._unresumable_reason()}", timed_out=timed_out)
            return
        ctx.transition(_CI.DETACH)
        self.detached = True
        self.hold = 0
        out.clear()  # retained frames go again after RESUME_OK
        ctx.drop_input()  # a partial frame is not received (spec: Implied Position)
        self._keepalive.stop()
        self.detached_at = ctx.now
        r.reset_question()
        out.sync_retained()
        # Spec: lease semantics restart with a new LEASE after resumption.
        self._leases.restart()
        ctx.events.append(Disconnected(reason=reason, timed_out=timed_out))

    def _resume_timeout(self) -> float:
        timeout = self._ctx.config.resume_timeout
        if timeout is not None:
            return timeout
        setup = self._ctx.setup
        assert setup is not None
        return (setup.max_lifetime + setup.keepalive_interval) / 1000.0

    def resume_timed_out(self, now: float) -> bool:
        """Client: a RESUME unanswered by its deadline detaches again (the
        transport carrying it counts as lost: ``resume()`` on another)."""
        if self._ctx.state is not _RESUMING:
            return False
        timeout = self._resume_timeout()
        if self.resume_deadline is None:
            self.resume_deadline = now + timeout
            return False
        if now < self.resume_deadline:
            return False
        self.detach(f"RESUME not answered within {timeout:g} s", timed_out=True)
        return True

    def expire(self, now: float) -> bool:
        """Server: end the session if it waited too long for a RESUME."""
        store = self.sessions
        ctx = self._ctx
        if store is None or ctx.state is not _DISCONNECTED:
            return False
        ctx.observe(now)
        if now < self.detached_at + store.keep_detached:
            return False
        reason = f"not resumed within {store.keep_detached:g} s of the transport loss"
        ctx.lose(_CI.FATAL, reason, timed_out=True)
        return True

    def close_detached(self) -> bool:
        """``close()`` while detached: nothing can drain; True if detached."""
        if not self.detached:
            return False
        self._output.clear()
        self.detached = False
        self.hold = 0
        return True

    def _closed(self) -> None:
        """The session is over: free the retained frames and the store entry."""
        if self._output.retained is None:
            return
        store = self.sessions
        if store is not None and self.token is not None:
            store.release(self.token, self.owner)
        self._output.stop_retaining()
        self.detached = False
        self.hold = 0

    def before_send(self) -> None:
        """Before output leaves: while detached only the held RESUME may go;
        when retained frames pile up, ask the peer for its position."""
        out = self._output
        if self.detached:
            out.keep_first(self.hold)
            self.hold = 0
            return
        r = out.retained
        if r is not None and r.ask and self._ctx.state is _ESTABLISHED:
            # KEEPALIVE with R: the peer's answer carries its received
            # position, which trims the retained frames (spec: Keepalive
            # Position Field); one question outstanding at a time.
            r.ask = False
            r.asked = True
            self._ctx.queue_keepalive_request()

    # ------------------------------------------------------------------
    # client

    def resume(self) -> None:
        """Client: queue RESUME (see ``Connection.resume``)."""
        ctx = self._ctx
        out = self._output
        if not ctx.client:
            raise LocalProtocolError("resume: only a client resumes")
        if ctx.state is not _DISCONNECTED:
            raise LocalProtocolError(f"resume: the session is {ctx.state.value}, not disconnected")
        r = out.retained
        assert r is not None and self.token is not None
        out.clear()
        # Spec: RESUME Frame: the last position received from the server and
        # the earliest position this client can still send again.
        out.queue(ResumeFrame(self.token, ctx.received_position, r.start))
        self.hold = len(out.pieces)
        ctx.transition(_CI.SEND_RESUME)
        self.resume_deadline = None  # armed: anchored at the next handle_timeout

    def pre_resumed(self, f: Frame) -> None:
        """A frame while detached: only RESUME_OK or a connection ERROR may
        answer a RESUME (spec: Resume Operation)."""
        ctx = self._ctx
        if ctx.state is not _RESUMING:
            return  # no transport: nothing can arrive (ignored)
        if type(f) is ResumeOkFrame:
            self._on_resume_ok(f)
            return
        self._output.clear()  # only our verdict goes out now
        self.detached = False
        if type(f) is ErrorFrame and f.stream_id == 0:
            # ERROR[REJECTED_RESUME|CONNECTION_ERROR]: never try again.
            code = f.error_code
            what = (
                "resumption rejected" if code == ErrorCode.REJECTED_RESUME else "connection error"
            )
            ctx.end(_CI.REJECT, code, f"{what}: {f.message}", by_peer=True)
            return
        ctx.fail(ErrorCode.CONNECTION_ERROR, f"{type(f).__name__} before RESUME_OK")

    def _on_resume_ok(self, f: ResumeOkFrame) -> None:
        ctx = self._ctx
        out = self._output
        r = out.retained
        assert r is not None
        position = f.last_received_client_position
        if not r.can_replay(position, out.sent_position):
            out.clear()
            self.detached = False
            # Spec: the client MAY send ERROR[CONNECTION_ERROR] and MUST NOT
            # try again.
            ctx.fail(
                ErrorCode.CONNECTION_ERROR,
                f"RESUME_OK position {position} cannot be resumed from "
                f"(this client retains {r.start}..{out.sent_position})",
            )
        out.clear()  # frames made while resuming are in the replay
        self._reattach(position, r.replay(position))
        setup = ctx.setup
        assert setup is not None
        self._keepalive.start(setup.keepalive_interval, setup.max_lifetime, sends=True)

    def _reattach(self, position: int, pieces: list[bytes]) -> None:
        out = self._output
        out.pieces += pieces
        out.size += sum(map(len, pieces))
        self.detached = False
        self.hold = 0
        self.resumes += 1
        self._ctx.transition(_CI.RESUMED)
        out.sync_retained()
        self._ctx.events.append(
            Resumed(peer_position=position, retransmitted=out.sent_position - position)
        )

    # ------------------------------------------------------------------
    # server

    def reserve(self, f: SetupFrame) -> bool:
        """A SETUP with R: register the session (False: refused)."""
        store = self.sessions
        token = f.resume_token
        assert token is not None
        if store is None:
            # Spec: SETUP Frame, NOTE: no resumption without a session store.
            self._ctx.refuse(ErrorCode.REJECTED_SETUP, "resumption is not supported")
            return False
        problem = store.reserve(token, self.owner)
        if problem is not None:
            self._ctx.refuse(ErrorCode.REJECTED_SETUP, problem)
            return False
        self.start(token)
        return True

    def on_resume(self, f: ResumeFrame) -> None:
        """A RESUME received (not while detached)."""
        ctx = self._ctx
        if ctx.client:
            return  # spec 9: unexpected, ignored
        if ctx.state is not ConnectionState.AWAITING_SETUP:
            # Spec: Resume Operation: a RESUME after SETUP, or after a
            # previous RESUME, SHOULD get ERROR[CONNECTION_ERROR].
            after = "a previous RESUME" if self.resumes else "SETUP"
            ctx.fail(ErrorCode.CONNECTION_ERROR, f"RESUME after {after}")
        store = self.sessions
        if store is None:
            # Spec: MUST send ERROR[REJECTED_RESUME] without resume support.
            ctx.refuse(ErrorCode.REJECTED_RESUME, "resumption is not supported")
            return
        # rsocket-js 1.0 (alpha) writes its RESUME's version fields swapped
        # (major 0, minor 1) for the 1.0 its SETUP said: that is version 1.0.
        swapped = (f.major_version, f.minor_version) == (0, MAJOR_VERSION)
        if f.major_version != MAJOR_VERSION and not swapped:
            ctx.refuse(
                ErrorCode.REJECTED_RESUME,
                f"unsupported version {f.major_version}.{f.minor_version}",
            )
            return
        now = ctx.now if ctx.clock_known else None
        session = store.lookup(f.resume_token, now)
        part = None if session is None else self._part_of(session)
        if part is None:
            # Spec: not identified: MUST send ERROR[REJECTED_RESUME].
            ctx.refuse(
                ErrorCode.REJECTED_RESUME,
                "no resumable session for this token (unknown or expired)",
            )
            return
        problem = part.accept_resume(f, now)
        if problem is not None:
            ctx.refuse(ErrorCode.REJECTED_RESUME, problem)
            return
        self.handoff = part
        ctx.transition(_CI.HANDOFF)
        ctx.events.append(ResumeAccepted(session=part.owner))

    def take_input(self, data: bytes | memoryview) -> None:
        """Bytes that followed the RESUME on the fresh connection: this
        session parses them with its next input (their errors are its)."""
        self._ctx.inbuf += data

    def accept_resume(self, f: ResumeFrame, now: float | None) -> str | None:
        """Take over a new transport for this session: None when accepted,
        else why not (the session then ends: the client must not retry)."""
        ctx = self._ctx
        out = self._output
        if now is not None:
            ctx.observe(now)
        if ctx.state is _ESTABLISHED:
            # The old transport is still open here (half-open after a cut).
            self.detach("superseded by a RESUME on a new transport", timed_out=False)
        r = out.retained
        if ctx.state is not _DISCONNECTED or r is None:
            return "the session is not resumable"
        sent_from = f.last_received_server_position
        client_from = f.first_available_client_position
        problem = None
        if r.overflowed:
            problem = self._unresumable_reason()
        elif client_from > ctx.received_position:
            problem = (
                f"the client retains frames from position {client_from} only; "
                f"the server received up to {ctx.received_position}"
            )
        elif not r.can_replay(sent_from, out.sent_position):
            problem = (
                f"the server cannot send again from position {sent_from} "
                f"(it retains {r.start}..{out.sent_position})"
            )
        if problem is not None:
            message = f"resumption rejected: {problem}"
            ctx.end(_CI.FATAL, ErrorCode.REJECTED_RESUME, message, by_peer=False)
            return problem
        out.clear()  # made while detached: in the replay if it counts
        # Spec: RESUME_OK carries the last position received from the client.
        out.queue(ResumeOkFrame(ctx.received_position))
        self._reattach(sent_from, r.replay(sent_from))
        setup = ctx.setup
        assert setup is not None
        self._keepalive.start(setup.keepalive_interval, setup.max_lifetime, sends=False)
        leases = self._leases
        grant = leases.last_grant
        if leases.enabled and grant is not None:
            # Spec: LEASE semantics MUST restart with a new LEASE frame.
            ttl, number, metadata = grant
            out.queue(LeaseFrame(ttl, number, metadata))
            leases.ours.grant(ctx.now, ttl, number)
        return None
