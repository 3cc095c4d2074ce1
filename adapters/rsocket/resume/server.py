"""Server side of resumption: the sessions a server holds, their expiry, and
``serve_resumable``.

:class:`SessionRegistry` keeps every resumable session (by its core, the
core's ``SessionStore`` keeps them by token) under one lock: a fresh
connection's first frame (SETUP or RESUME) is handled under it, and so is
every lifecycle step of every session (:mod:`.session`). A RESUME makes its
session let go of an old transport (waiting, bounded, for another thread's
driver to do so) before the core touches the session, so the session the
core hands the new transport to is always one the registry holds: the "no
engine" case cannot arise, and if it did the RESUME would be answered
ERROR[REJECTED_RESUME] and the connection closed, never left in silence.
Of two RESUMEs for one session the newer wins; the older is answered
ERROR[REJECTED_RESUME] at once (:meth:`.session.Session.let_go_for_resume`).

Sessions are bounded (``max_sessions``, any phase: a SETUP with R at the cap
evicts the session detached the longest, so a flood of dropped sessions
never locks a new client out) and expire whatever their phase: a detached
one after ``keep_detached`` (a sweeper: a thread, or the event loop's timers
under asyncio), an attached one as soon as its driver ends (its exit lets go
of it even if its ``connection_lost`` failed). docs/resumption.md.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...drive.config import LoopConfig
from ...drive.endpoints import LoopChoice, new_acceptor, new_driver, pick_loop
from ...drive.errors import ConnectionClosed
from ...drive.listener import LoopServer
from ...transport import Transport, listen
from ...transport.urls import Endpoint
from ...transport.websocket.options import WebSocketOptions
from .. import core
from ..engine import refuse_async_hooks
from ..options import EngineOptions, options_for
from ..peer import RSocketPeer
from ..server import Server
from .engine import SessionEngine
from .lifecycle import Phase
from .options import ResumeOptions
from .session import Session, SessionDriver, Work, run_all

__all__ = [
    "ResumableServer",
    "SessionRegistry",
    "SessionState",
    "ThreadSweeper",
    "serve_resumable",
]

log = logging.getLogger("sansrs.adapters.rsocket")

_State = core.ConnectionState


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionState:
    """One session as :meth:`SessionRegistry.snapshot` shows it (never its token)."""

    phase: str
    generation: int
    resumes: int
    #: Seconds since its transport ended (None while attached).
    detached_for: float | None


@dataclass(kw_only=True)
class RegistryStats:
    """What happened to the sessions of one server (counts)."""

    started: int = 0
    resumed: int = 0
    expired: int = 0
    #: Detached sessions ended to make room for a new one (``max_sessions``).
    evicted: int = 0
    rejected: int = 0
    #: RESUMEs refused because a newer RESUME for the same session came (the
    #: session went on with that one).
    superseded: int = 0
    finished: int = 0
    #: Fire-and-forgets the server sent that clients never confirmed (sessions that ended).
    unconfirmed: int = 0


class SessionRegistry:
    """Every resumable session of one server (see the module notes)."""

    def __init__(self, options: ResumeOptions, peers: list[Any] | None = None) -> None:
        self.options = options
        self.store = core.session_store(
            keep_detached=options.keep_detached,
            max_sessions=options.max_sessions,
            max_retained=options.max_retained,
        )
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.stats = RegistryStats()
        self._sessions: dict[object, Session] = {}  # session core -> session
        #: The detached sessions, the one detached the longest first (expiry
        #: and eviction take them in this order).
        self._detached: dict[Session, None] = {}
        self._peers = peers if peers is not None else []
        #: Wakes the sweeper (set by it): a session detached.
        self.wake_sweeper: Callable[[], None] = lambda: None
        self._closed = False

    def __len__(self) -> int:
        with self.lock:
            return len(self._sessions)

    def new_session(self, engine: SessionEngine) -> Session:
        """The lifecycle of a fresh connection's engine (registered at SETUP)."""
        return Session(
            engine,
            self.lock,
            on_detached=self._on_detached,
            on_finished=self._forget,
            on_phase=self._on_phase,
        )

    # -- fresh connections: the first frame ---------------------------------------
    def first_frame(self, engine: SessionEngine, frame: bytes, feed: Callable[[], bytes]) -> bytes:
        """Under the lock: the core handles the first frame (``frame``,
        without its length) through ``feed``. A RESUME's session lets go of
        its old transport first; a SETUP with R finds room (evicting) first."""
        token = core.resume_token_of(frame)
        work: list[Work | None] = []
        if token is None:
            with self.lock:
                if core.is_resumable_setup(frame):
                    work += self._make_room()
                rest = feed()
            run_all(work)
            return rest
        step = self.options.step
        step("resume:enter")
        rest = b""
        with self.cond:
            session = self._find(token)
            if session is not None:
                refused, let_go = session.let_go_for_resume(self.options.handover_timeout)
                work.append(let_go)
                if refused is not None:
                    if refused.superseded:
                        self.stats.superseded += 1  # the session goes on with the newer RESUME
                    else:
                        self.stats.rejected += 1
                    engine.refuse_resume(refused.reason)
                    session = None
            if engine._closing is None:
                step("resume:locked")
                rest = feed()
                if session is not None and engine.adopted is None:
                    self.stats.rejected += 1
                    if session.engine.conn.state is _State.CLOSED:  # the core ended it
                        reason = "its RESUME was rejected"
                        work.append(
                            session.finish_locked(ConnectionClosed(f"session {reason}"), reason)
                        )
        run_all(work)
        if engine.adopted is not None:
            step("resume:attached")
        return rest

    def _find(self, token: bytes) -> Session | None:
        conn = self.store.lookup(token, None)
        if not isinstance(conn, core.Connection):
            return None
        session = self._sessions.get(conn)
        if session is None:
            # Unreachable: a session enters the store and the registry under
            # this lock and leaves both under it. Should it happen, end the
            # stray core so that the RESUME is answered REJECTED_RESUME.
            log.error("a stored session has no engine: ending it")
            conn.close("session without an engine", error_code=0x101)
        return session

    def _make_room(self) -> list[Work | None]:
        """Under the lock, before a SETUP with R: while the server holds
        ``max_sessions``, end the session detached the longest (a flood of
        SETUPs whose connections drop makes only detached sessions: they go
        first, so a new client is never refused for them). Attached sessions
        are never evicted: with every session attached the SETUP is refused
        (ERROR[REJECTED_SETUP])."""
        work: list[Work | None] = []
        store = self.store
        detached = self._detached
        while len(store) >= store.max_sessions and detached:
            oldest = next(iter(detached))
            del detached[oldest]
            reason = (
                f"evicted: the server holds max_sessions ({store.max_sessions}) and this "
                "session was the one without a transport for the longest"
            )
            work.append(oldest.finish_locked(ConnectionClosed(reason), reason))
            self.stats.evicted += 1
        return work

    def setup(self, engine: SessionEngine) -> None:
        """Under the lock: a SETUP was accepted; with R, hold its session."""
        session = engine.session
        assert isinstance(session, Session)
        if engine.conn.resumable:
            self._sessions[engine.conn] = session
            self.stats.started += 1
        if engine.peer is not None:
            self._peers.append(engine.peer)

    def adopt(self, engine: SessionEngine, conn: object) -> None:
        """Under the lock: the core accepted a RESUME on ``engine``'s
        transport for the session of ``conn``: its driver drives it now (if
        the session can be attached; else the RESUME is answered
        ERROR[REJECTED_RESUME] and counts as no resume)."""
        session = self._sessions.get(conn)
        if session is None or engine.thread is None:
            # Unreachable (see _find); answered rather than left silent.
            log.error("a resumed session has no engine: refusing the RESUME")
            if isinstance(conn, core.Connection) and conn.state is not _State.CLOSED:
                conn.close("session without an engine", error_code=0x101)
            engine.refuse_resume("the session has no engine on this server")
            return
        if not session.attach(engine.link, engine.thread):
            # Unreachable (first_frame hands the core only a detached
            # session): the core took this transport for a session that is
            # finished, closing, or driven by another connection. Answered,
            # and a session left in that state ends as its driver lets go.
            log.error("a resumed session could not be attached: refusing the RESUME")
            engine.refuse_resume(f"the session is {session.phase.value}, it cannot be resumed")
            self.stats.rejected += 1
            if session.doomed is None:
                session.doomed = "a RESUME was accepted for it while it was not detached"
            driver = session.driver
            if driver is not None:
                driver.abort(timeout=0)
            return
        engine.adopted = session
        self.stats.resumed += 1

    # -- lifecycle callbacks ----------------------------------------------------------
    def _on_detached(self, session: Session) -> None:
        self.wake_sweeper()

    def _on_phase(self, session: Session) -> None:
        """Under the lock: keep ``_detached`` in the order sessions detached."""
        if session.phase is Phase.DETACHED and session.engine.conn in self._sessions:
            self._detached[session] = None
        else:
            self._detached.pop(session, None)

    def _forget(self, session: Session) -> None:
        """Under the lock: ``session`` finished."""
        peer = session.engine.peer
        if peer in self._peers:
            self._peers.remove(peer)
        self._detached.pop(session, None)
        if self._sessions.pop(session.engine.conn, None) is None:
            return  # a plain connection, or a fresh one that never held a session
        self.stats.finished += 1
        session.add_exit_callback(lambda: self._count_loss(session))
        self.cond.notify_all()

    def _count_loss(self, session: Session) -> None:
        if session.loss is not None:
            with self.lock:
                self.stats.unconfirmed += session.loss.fire_and_forgets

    # -- expiry -------------------------------------------------------------------
    def sweep(self, now: float) -> float | None:
        """Expire the detached sessions due at ``now``; when to sweep next.
        They are taken in the order they detached and ``keep_detached`` is
        the same for all, so the walk stops at the first one not due (a
        sweep costs the sessions it expires, not all the sessions held)."""
        work: list[Work | None] = []
        next_at: float | None = None
        keep = self.options.keep_detached
        with self.cond:
            due_now: list[Session] = []
            for session in self._detached:
                due = session.engine.conn.next_deadline()
                if due is None:
                    due = session.life.since + keep
                if due > now:
                    next_at = due
                    break
                due_now.append(session)
            for session in due_now:
                session.engine.conn.handle_timeout(now)  # the core ends it (ConnectionLost)
                reason = f"not resumed within {keep:g} s of the transport loss"
                work.append(session.finish_locked(ConnectionClosed(reason), reason))
                self.stats.expired += 1
        run_all(work)
        return next_at

    def snapshot(self) -> list[SessionState]:
        now = time.monotonic()
        with self.lock:
            return [
                SessionState(
                    phase=s.phase.value,
                    generation=s.life.generation,
                    resumes=s.resumes,
                    detached_for=now - s.detached_at if s.phase is Phase.DETACHED else None,
                )
                for s in self._sessions.values()
            ]

    def wait_empty(self, timeout: float | None) -> bool:
        """Wait until no session is held (all ended or expired)."""
        with self.cond:
            return self.cond.wait_for(lambda: not self._sessions and not len(self.store), timeout)

    def close(self) -> None:
        """The server is closing: end every session without a transport (the
        attached ones end with their connections)."""
        work: list[Work | None] = []
        with self.cond:
            self._closed = True
            for session in list(self._sessions.values()):
                session.closing = True
                if session.phase is Phase.DETACHED:
                    reason = "the server closed"
                    work.append(session.finish_locked(ConnectionClosed(reason), reason))
        run_all(work)


class ThreadSweeper:
    """Runs :meth:`SessionRegistry.sweep` on a daemon thread, at each due time."""

    def __init__(self, registry: SessionRegistry) -> None:
        self._registry = registry
        self._cond = threading.Condition()
        self._woken = False
        self._stopped = False
        registry.wake_sweeper = self.wake
        self._thread = threading.Thread(target=self._run, name="sansrs-resume-sweep", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            next_at = self._registry.sweep(time.monotonic())
            with self._cond:
                if self._stopped:
                    return
                if not self._woken:
                    wait = None if next_at is None else max(0.0, next_at - time.monotonic())
                    self._cond.wait(wait)
                self._woken = False
                if self._stopped:
                    return

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(5.0)


class ResumableServer(Server):
    """A :class:`~..server.Server` holding resumable sessions: ``registry``
    (their lifecycle, ``snapshot()``, ``stats``). ``close()`` also ends the
    detached ones and stops the sweeper."""

    def __init__(
        self,
        accept: LoopServer,
        peers: list[RSocketPeer],
        registry: SessionRegistry,
        sweeper: ThreadSweeper,
    ) -> None:
        super().__init__(accept, peers)
        self.registry = registry
        self._sweeper = sweeper

    def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        super().close(timeout, abort=abort)
        self.registry.close()
        self._sweeper.stop()


def new_server_engine(
    options: EngineOptions, resume: ResumeOptions, registry: SessionRegistry
) -> SessionEngine:
    """A fresh server connection's engine and its lifecycle (a session once SETUP says so)."""
    conn = core.server(
        options, sessions=registry.store, resume_buffer_size=resume.resume_buffer_size
    )
    engine = SessionEngine(options, conn, resume, registry=registry)
    engine._before_setup = b""
    registry.new_session(engine)
    return engine


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
def serve_resumable(
    url: str | Endpoint,
    handler: object = None,
    *,
    handler_factory: Callable[[RSocketPeer], object] | None = None,
    loop: LoopChoice = "thread",
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
    resume: ResumeOptions | None = None,
    **options: Any,
) -> ResumableServer:
    """Like :func:`~..server.serve`, accepting resumable sessions (and
    plain ones) on any transport (TCP, TLS, Unix, ``ws://``, ``wss://``;
    ``websocket``: :class:`~...transport.websocket.WebSocketOptions`).
    ``resume``: :class:`~.options.ResumeOptions` (``keep_detached``,
    ``max_sessions``, ``resume_buffer_size``, ...). ``handler_factory(peer)``
    makes one handler per session; ``server.peers`` are the live sessions
    (a detached one included: its calls wait for a RESUME). ``interceptors``
    as for ``serve`` (:class:`~..interceptors.Interceptors`): docs/interceptors.md
    tells what they see of a resumable session (built and tested for plain
    connections only)."""
    if handler is not None and handler_factory is not None:
        raise TypeError("pass handler or handler_factory, not both")
    refuse_async_hooks(handler)
    engine_options = options_for(serve_resumable, options)
    resume = resume if resume is not None else ResumeOptions()
    peers: list[RSocketPeer] = []
    registry = SessionRegistry(resume, peers)
    driver_loop = pick_loop(loop)

    def make_connection(transport: Transport) -> Any:
        engine = new_server_engine(engine_options, resume, registry)
        link = engine.link
        name = f"sansrs-server {transport.peer}"
        exited = lambda _: link.exited()  # noqa: E731
        driver = new_driver(driver_loop, transport, link, name, exited, loop_config)
        session = engine.session
        assert isinstance(session, Session)
        if driver_loop is not None:
            session.home = lambda: driver_loop.in_loop_thread
        session.attach_first(link, driver)
        peer = RSocketPeer(SessionDriver(session), engine)
        engine.attach(driver, peer, handler_factory(peer) if handler_factory else handler)
        return driver

    accept = new_acceptor(
        driver_loop, listen(url, ssl_context=ssl_context, websocket=websocket),
        make_connection,
        loop_config,
    )
    sweeper = ThreadSweeper(registry)
    accept.start()
    return ResumableServer(accept, peers, registry, sweeper)
