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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import LocalProtocolError
from ._config import ConnectionConfig, Role
from ._core import _CI, ConnectionState
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
from ._lease import Lease
from ._receive import Receiver
from .events import ConnectionClosed, ConnectionLost, Disconnected, ResumeAccepted, Resumed

if TYPE_CHECKING:
    from ._session_store import SessionStore

__all__ = ["Resumable"]

_DISCONNECTED = ConnectionState.DISCONNECTED
_RESUMING = ConnectionState.RESUMING
_ESTABLISHED = ConnectionState.ESTABLISHED


class Resumable(Receiver):
    """The resumption part of ``Connection``."""

    def __init__(
        self,
        role: Role,
        config: ConnectionConfig | None = None,
        *,
        sessions: SessionStore | None = None,
    ) -> None:
        super().__init__(role, config)
        if sessions is not None and role is not Role.SERVER:
            raise LocalProtocolError("sessions: only a server keeps a session store")
        self._sessions = sessions
        self._token: bytes | None = None  # never shown: a secret
        self._detached_at = 0.0
        self._lease_grant: tuple[int, int, bytes | None] | None = None
        self._resumes = 0
        #: Client, RESUMING: when the RESUME counts as unanswered (None: not
        #: anchored yet; the first ``handle_timeout(now)`` anchors it).
        self._resume_deadline: float | None = None

    # ------------------------------------------------------------------
    # inspection

    @property
    def resumable(self) -> bool:
        """True while the session could survive a transport loss."""
        r = self._retained
        return r is not None and not r.overflowed

    @property
    def retained_bytes(self) -> int:
        """Bytes of sent frames kept for a resumption (0 when not resumable)."""
        r = self._retained
        return 0 if r is None else r.size(self.sent_position)

    @property
    def resume_token(self) -> bytes | None:
        """The session's resume identification token (keep it secret)."""
        return self._token

    # ------------------------------------------------------------------
    # detaching

    def _start_retaining(self, token: bytes) -> None:
        self._token = token
        self._retain_start()

    def _unresumable_reason(self) -> str:
        return (
            "the session cannot be resumed: more than "
            f"{self.config.resume_buffer_size} bytes of sent frames were not "
            "acknowledged by the peer (resume_buffer_size)"
        )

    def _on_eof(self) -> None:
        state = self._state
        if self._retained is not None and (state is _ESTABLISHED or state is _RESUMING):
            self._detach("the transport closed", timed_out=False)
            return
        if state is _DISCONNECTED:
            return  # no transport to lose
        super()._on_eof()

    def _detach(self, reason: str, *, timed_out: bool) -> None:
        """Lose the transport but keep the session (when it can resume)."""
        r = self._retained
        assert r is not None
        if r.overflowed and self._client:
            # (A server keeps the session until it expires, so that a RESUME
            # gets REJECTED_RESUME with this reason rather than "unknown".)
            self._transition(_CI.FATAL)
            self._events.append(
                ConnectionLost(
                    reason=f"{reason}; {self._unresumable_reason()}", timed_out=timed_out
                )
            )
            return
        self._transition(_CI.DETACH)
        self._detached = True
        self._hold = 0
        self._out.clear()  # retained frames go again after RESUME_OK
        self._out_size = 0
        self._inbuf.clear()  # a partial frame is not received (spec: Implied Position)
        self._need = 3
        self._keepalive = None
        self._detached_at = self._now
        r.reset_question()
        self._retain_sync(r)
        # Spec: lease semantics restart with a new LEASE after resumption.
        self._peer_lease = Lease()
        self._our_lease = Lease()
        self._events.append(Disconnected(reason=reason, timed_out=timed_out))

    def _expire_detached(self, now: float) -> bool:
        """Server: end the session if it waited too long for a RESUME."""
        store = self._sessions
        if store is None or self._state is not _DISCONNECTED:
            return False
        self._observe(now)
        if now < self._detached_at + store.keep_detached:
            return False
        self._transition(_CI.FATAL)
        self._events.append(
            ConnectionLost(
                reason=f"not resumed within {store.keep_detached:g} s of the transport loss",
                timed_out=True,
            )
        )
        return True

    def _detached_deadline(self) -> float | None:
        """While detached: a client's RESUME deadline (0.0 until anchored), a
        server session's expiry."""
        if self._state is _RESUMING:
            deadline = self._resume_deadline
            return 0.0 if deadline is None else deadline
        store = self._sessions
        if store is None or self._state is not _DISCONNECTED:
            return None
        return self._detached_at + store.keep_detached

    def _resume_timeout(self) -> float:
        timeout = self.config.resume_timeout
        if timeout is not None:
            return timeout
        setup = self._setup
        assert setup is not None
        return (setup.max_lifetime + setup.keepalive_interval) / 1000.0

    def _resume_timed_out(self, now: float) -> bool:
        """Client: a RESUME unanswered by its deadline detaches again (the
        transport carrying it counts as lost: ``resume()`` on another)."""
        if self._state is not _RESUMING:
            return False
        timeout = self._resume_timeout()
        if self._resume_deadline is None:
            self._resume_deadline = now + timeout
            return False
        if now < self._resume_deadline:
            return False
        self._detach(f"RESUME not answered within {timeout:g} s", timed_out=True)
        return True

    def _end_resumption(self) -> None:
        store = self._sessions
        if store is not None and self._token is not None:
            store.release(self._token, self)
        super()._end_resumption()

    # ------------------------------------------------------------------
    # client

    def resume(self) -> None:
        """Client: after ``Disconnected``, queue RESUME for a new transport
        (write ``data_to_send()`` to it). Until RESUME_OK nothing else is
        sent; requests and payloads made meanwhile go out after it."""
        if not self._client:
            raise LocalProtocolError("resume: only a client resumes")
        if self._state is not _DISCONNECTED:
            raise LocalProtocolError(
                f"resume: the session is {self._state.value}, not disconnected"
            )
        r = self._retained
        assert r is not None and self._token is not None
        self._out.clear()
        self._out_size = 0
        # Spec: RESUME Frame: the last position received from the server and
        # the earliest position this client can still send again.
        self._queue(ResumeFrame(self._token, self.received_position, r.start))
        self._hold = len(self._out)
        self._transition(_CI.SEND_RESUME)
        self._resume_deadline = None  # armed: anchored at the next handle_timeout

    def _pre_resumed(self, f: Frame) -> None:
        """A frame while detached: only RESUME_OK or a connection ERROR may
        answer a RESUME (spec: Resume Operation)."""
        if self._state is not _RESUMING:
            return  # no transport: nothing can arrive (ignored)
        if type(f) is ResumeOkFrame:
            self._on_resume_ok(f)
            return
        self._out.clear()  # only our verdict goes out now
        self._out_size = 0
        self._detached = False
        if type(f) is ErrorFrame and f.stream_id == 0:
            # ERROR[REJECTED_RESUME|CONNECTION_ERROR]: never try again.
            code = f.error_code
            what = (
                "resumption rejected" if code == ErrorCode.REJECTED_RESUME else "connection error"
            )
            self._transition(_CI.REJECT)
            self._events.append(
                ConnectionClosed(error_code=code, message=f"{what}: {f.message}", by_peer=True)
            )
            return
        self._fail(ErrorCode.CONNECTION_ERROR, f"{type(f).__name__} before RESUME_OK")

    def _on_resume_ok(self, f: ResumeOkFrame) -> None:
        r = self._retained
        assert r is not None
        position = f.last_received_client_position
        if not r.can_replay(position, self.sent_position):
            self._out.clear()
            self._out_size = 0
            self._detached = False
            # Spec: the client MAY send ERROR[CONNECTION_ERROR] and MUST NOT
            # try again.
            self._fail(
                ErrorCode.CONNECTION_ERROR,
                f"RESUME_OK position {position} cannot be resumed from "
                f"(this client retains {r.start}..{self.sent_position})",
            )
        self._out.clear()  # frames made while resuming are in the replay
        self._out_size = 0
        self._reattach(position, r.replay(position))
        setup = self._setup
        assert setup is not None
        self._keepalive = Keepalive(setup.keepalive_interval, setup.max_lifetime, sends=True)

    def _reattach(self, position: int, pieces: list[bytes]) -> None:
        self._out += pieces
        self._out_size += sum(map(len, pieces))
        r = self._retained
        assert r is not None
        self._detached = False
        self._hold = 0
        self._resumes += 1
        self._transition(_CI.RESUMED)
        self._retain_sync(r)
        self._events.append(
            Resumed(peer_position=position, retransmitted=self.sent_position - position)
        )

    # ------------------------------------------------------------------
    # server

    def _reserve_session(self, f: SetupFrame) -> bool:
        store = self._sessions
        token = f.resume_token
        assert token is not None
        if store is None:
            return super()._reserve_session(f)
        problem = store.reserve(token, self)
        if problem is not None:
            self._refuse_setup(ErrorCode.REJECTED_SETUP, problem)
            return False
        self._start_retaining(token)
        return True

    def _on_resume(self, f: ResumeFrame) -> None:
        if self._client:
            return  # spec 9: unexpected, ignored
        if self._state is not ConnectionState.AWAITING_SETUP:
            # Spec: Resume Operation: a RESUME after SETUP, or after a
            # previous RESUME, SHOULD get ERROR[CONNECTION_ERROR].
            after = "a previous RESUME" if self._resumes else "SETUP"
            self._fail(ErrorCode.CONNECTION_ERROR, f"RESUME after {after}")
        store = self._sessions
        if store is None:
            # Spec: MUST send ERROR[REJECTED_RESUME] without resume support.
            self._refuse_setup(ErrorCode.REJECTED_RESUME, "resumption is not supported")
            return
        if f.major_version != MAJOR_VERSION:
            self._refuse_setup(
                ErrorCode.REJECTED_RESUME,
                f"unsupported version {f.major_version}.{f.minor_version}",
            )
            return
        now = self._now if self._clock_known else None
        session = store.lookup(f.resume_token, now)
        if session is None:
            # Spec: not identified: MUST send ERROR[REJECTED_RESUME].
            self._refuse_setup(
                ErrorCode.REJECTED_RESUME,
                "no resumable session for this token (unknown or expired)",
            )
            return
        problem = session._accept_resume(f, now)
        if problem is not None:
            self._refuse_setup(ErrorCode.REJECTED_RESUME, problem)
            return
        self._handoff = session
        self._transition(_CI.HANDOFF)
        self._events.append(ResumeAccepted(session=session))

    def _accept_resume(self, f: ResumeFrame, now: float | None) -> str | None:
        """Take over a new transport for this session: None when accepted,
        else why not (the session then ends: the client must not retry)."""
        if now is not None:
            self._observe(now)
        if self._state is _ESTABLISHED:
            # The old transport is still open here (half-open after a cut).
            self._detach("superseded by a RESUME on a new transport", timed_out=False)
        r = self._retained
        if self._state is not _DISCONNECTED or r is None:
            return "the session is not resumable"
        sent_from = f.last_received_server_position
        client_from = f.first_available_client_position
        problem = None
        if r.overflowed:
            problem = self._unresumable_reason()
        elif client_from > self.received_position:
            problem = (
                f"the client retains frames from position {client_from} only; "
                f"the server received up to {self.received_position}"
            )
        elif not r.can_replay(sent_from, self.sent_position):
            problem = (
                f"the server cannot send again from position {sent_from} "
                f"(it retains {r.start}..{self.sent_position})"
            )
        if problem is not None:
            self._transition(_CI.FATAL)
            self._events.append(
                ConnectionClosed(
                    error_code=ErrorCode.REJECTED_RESUME,
                    message=f"resumption rejected: {problem}",
                    by_peer=False,
                )
            )
            return problem
        self._out.clear()  # made while detached: in the replay if it counts
        self._out_size = 0
        # Spec: RESUME_OK carries the last position received from the client.
        self._queue(ResumeOkFrame(self.received_position))
        self._reattach(sent_from, r.replay(sent_from))
        setup = self._setup
        assert setup is not None
        self._keepalive = Keepalive(setup.keepalive_interval, setup.max_lifetime, sends=False)
        grant = self._lease_grant
        if self._lease_enabled and grant is not None:
            # Spec: LEASE semantics MUST restart with a new LEASE frame.
            ttl, number, metadata = grant
            self._queue(LeaseFrame(ttl, number, metadata))
            self._our_lease.grant(self._now, ttl, number)
        return None
