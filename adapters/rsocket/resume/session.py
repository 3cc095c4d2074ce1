"""One resumable session's lifecycle, and the driver its application-facing
peer sees.

:class:`Session` owns the :class:`~.lifecycle.Lifecycle` of one session and
takes every step under one lock (a server's registry lock, shared with the
RESUME look-ups; a client's own): attach a transport's driver, let it go
(the transport ended: detach, or finish when the session cannot resume),
hand over to a RESUME on a new transport, finish. Whoever holds the session
in ``ATTACHED`` (its current driver) is the only thread that touches its
core; a step that changes that waits for the lock, so an old transport's
teardown and a new transport's RESUME are serialized, whatever the driver.

Work that calls application code (failing streams, the ``on_loss`` and
``on_disconnected`` callbacks) runs after the lock is released, on the
thread that took the step.

:class:`SessionDriver` is the :class:`~...drive.engine.Driver` a peer object
(``ResumableClient``, a server's peer of a session) holds: calls go to the
session's current driver, wait in the session (in order, bounded) while it
has none, and fail with ``ConnectionClosed`` once it has finished.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ...drive.config import LoopConfig
from ...drive.engine import Call, Driver
from ...drive.errors import ConnectionClosed, seconds
from ...transport import Transport
from .. import core
from .engine import EngineLink, SessionEngine
from .lifecycle import Lifecycle, Phase, Step
from .options import SessionLoss, SessionLost

__all__ = ["NewDriver", "Refusal", "Session", "SessionDriver", "Work"]

log = logging.getLogger("sansrs.adapters.rsocket")

_State = core.ConnectionState
#: What a step leaves to do once the lock is released.
Work = Callable[[], None]
#: Calls kept for the next driver while the session has none (then callers wait).
DEFERRED_CAPACITY = 1024


class NewDriver(Driver, Protocol):
    """A driver not started yet (a transport the session attaches)."""

    def start(self) -> None: ...


class Outage(Protocol):
    """A client's reconnect policy: told when an outage is over, asked when
    it must be over (each RESUME's wait is capped by that)."""

    def resumed(self) -> None: ...

    def ends_at(self) -> float | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why a RESUME is answered ERROR[REJECTED_RESUME] before its session's
    core sees it."""

    reason: str
    #: A newer RESUME for the session took its place: the session goes on
    #: (else the session ends: its old transport never let go).
    superseded: bool


def run_all(work: list[Work | None]) -> None:
    for fn in work:
        if fn is not None:
            fn()


class Session:
    """The lifecycle of one resumable session (see the module notes)."""

    def __init__(
        self,
        engine: SessionEngine,
        lock: threading.RLock,
        *,
        on_detached: Callable[[Session], None] | None = None,
        on_finished: Callable[[Session], None] | None = None,
        on_phase: Callable[[Session], None] | None = None,
    ) -> None:
        self.engine = engine
        self.options = engine.resume
        self.cond = threading.Condition(lock)
        self.life = Lifecycle(time.monotonic())
        self.link: EngineLink | None = None
        #: The current driver, published once it may take calls (read unlocked).
        self.driver: Driver | None = None
        self.transport: Transport | None = None
        self.on_detached = on_detached
        self.on_finished = on_finished
        #: Under the lock, after every phase change (a server's registry
        #: keeps its detached sessions in the order they detached).
        self.on_phase = on_phase
        #: Server: RESUMEs received for this session so far; the newest one
        #: is the only one that may take it over (see let_go_for_resume).
        self.resume_tickets = 0
        #: No more resumption: the application (or the server) is closing it.
        self.closing = False
        #: Finish instead of detaching: a RESUME gave up waiting for the old driver.
        self.doomed: str | None = None
        #: Why it finished, and what was lost then.
        self.error: BaseException | None = None
        self.loss: SessionLoss | None = None
        self.detached_at = 0.0
        self.detach_reason = ""
        #: Client: the reconnect policy (its outage ends at RESUME_OK).
        self.policy: Outage | None = None
        #: True on the one thread every transport of the session runs on (an
        #: asyncio or selector loop; None: a thread per transport). There a
        #: call made while detached runs at once, under the lock, rather
        #: than wait for a transport that thread itself must attach.
        self.home: Callable[[], bool] | None = None
        self.disconnects = 0
        self.resumes = 0
        self._loss_reported = False
        self._deferred: deque[Call] = deque()
        self._exit_callbacks: list[Callable[[], None]] = []
        self._done = False
        engine.session = self

    @property
    def phase(self) -> Phase:
        return self.life.phase

    @property
    def finished(self) -> bool:
        return self.life.finished

    @property
    def reconnects(self) -> int:
        """Transports the session was resumed on (after the first)."""
        return self.life.generation - 1

    def raise_loss_once(self) -> None:
        """Raise :class:`~.options.SessionLost` the first time it is asked
        after the session ended with fire-and-forgets the peer never
        confirmed (a client's ``close()``, sync or asyncio)."""
        loss = self.loss
        if loss is not None and loss.fire_and_forgets and not self._loss_reported:
            self._loss_reported = True
            raise SessionLost(loss)

    def __repr__(self) -> str:  # never the token: it is a secret
        return f"<Session {self.life.phase.value} generation={self.life.generation}>"

    # -- attaching ---------------------------------------------------------------
    def attach_first(self, link: EngineLink, driver: Driver) -> None:
        """The transport the session starts on (before its driver runs; no
        other thread knows the session yet, so no lock: a server's accept
        thread never waits for another session's step)."""
        self.link = link
        self.engine.drive_with(driver, link)
        self.transport = driver.transport
        self.driver = driver

    def attach(
        self,
        link: EngineLink,
        driver: Driver,
        *,
        resume: bool = False,
        start: Callable[[], None] | None = None,
    ) -> bool:
        """DETACHED -> ATTACHED: ``driver`` (through ``link``) drives the
        session from now on. ``resume`` (client): queue RESUME first;
        ``start``: start the driver. False if the session is not detached
        (finished meanwhile)."""
        with self.cond:
            if self.closing or not self.life.take(Step.ATTACH, time.monotonic()):
                return False
            self.link = link
            engine = self.engine
            engine.drive_with(driver, link)
            self.transport = driver.transport
            self._phase_changed()
            if resume:
                engine.conn.resume()  # no driver runs the core: safe under the lock
                policy = self.policy
                engine.arm_resume_deadline(None if policy is None else policy.ends_at())
            if start is not None:
                start()
            self._hand_deferred(driver)
            self.driver = driver  # published last: new calls go behind the deferred ones
            self.cond.notify_all()
        self.options.step("attach")
        return True

    def _hand_deferred(self, driver: Driver) -> None:
        deferred = self._deferred
        while deferred:
            try:
                driver.call_soon(deferred[0])
            except ConnectionClosed:
                return  # it ended at once: they wait for the next one
            deferred.popleft()

    # -- letting a transport go ------------------------------------------------------
    def link_lost(self, link: EngineLink, error: BaseException) -> None:
        """``connection_lost`` from ``link``'s driver (its last call on the engine)."""
        self.options.step("detach:enter")
        with self.cond:
            if link is not self.link or self.life.phase not in (Phase.ATTACHED, Phase.HANDING_OVER):
                link.stale = True  # superseded already: nothing of the session is ours
                work = None
                stale = True
            else:
                work = self._let_go(link, error)
                stale = False
        self.options.step("detach:stale" if stale else "detach:done")
        if work is not None:
            work()

    def link_exited(self, link: EngineLink) -> None:
        """``link``'s driver ended: if it never let go (its ``connection_lost``
        failed), let go now, so no session is left attached to nothing."""
        with self.cond:
            if link is not self.link or self.life.phase not in (Phase.ATTACHED, Phase.HANDING_OVER):
                return
            log.warning("a driver ended without letting go of its session: detaching it")
            work = self._let_go(link, ConnectionClosed("the transport's driver ended"))
        if work is not None:
            work()

    def _let_go(self, link: EngineLink, error: BaseException) -> Work | None:
        """Under the lock, on the thread that owned the core (or with no
        thread running it): the transport is gone. Detach if the session can
        resume, else finish it."""
        now = time.monotonic()
        engine = self.engine
        conn = engine.conn
        if conn.state in (_State.ESTABLISHED, _State.RESUMING, _State.CLOSING):
            engine.receive_data(b"", now)  # the core learns it, and when
        else:
            engine._dispatch_events()
        self.options.step("detach:locked")
        reason = engine._gone or str(error)
        link.stale = True
        engine.drive_with(None)
        self.driver = None
        self.link = None
        resumable = (
            conn.state is _State.DISCONNECTED
            and not self.closing
            and not engine._close_started
            and self.doomed is None
        )
        if not resumable:
            return self._finish(error, self.doomed or reason)
        self.life.take(Step.DETACH, now)
        self._phase_changed()
        self.detached_at = now
        self.detach_reason = reason
        self.disconnects += 1
        self.cond.notify_all()
        return lambda: self._detached(reason)

    def _phase_changed(self) -> None:
        if self.on_phase is not None:
            self.on_phase(self)

    def _detached(self, reason: str) -> None:
        options = self.options
        if options.on_disconnected is not None:
            options.on_disconnected(reason)
        if self.on_detached is not None:
            self.on_detached(self)
        options.step("detached")

    # -- server: a RESUME on a new transport ---------------------------------------
    def let_go_for_resume(self, timeout: float) -> tuple[Refusal | None, Work | None]:
        """Under the lock, on the new transport's thread: make the session
        DETACHED (or see it FINISHED) before its core is touched. An attached
        session's driver is reset; on the same thread it lets go here, on
        another this waits (up to ``timeout``) for it to.

        The newest RESUME for the session wins: one arriving while an older
        one waits here takes its place, and the older one returns refused
        (its client gave that transport up before sending the newer RESUME;
        rsocket-java likewise lets RESUMEs for one session take it over one
        after the other, the latest keeping it). Returns why this RESUME is
        refused (answer it ERROR[REJECTED_RESUME]; None: go on) and work to
        run once the lock is released."""
        self.resume_tickets += 1
        ticket = self.resume_tickets
        self.cond.notify_all()  # an older RESUME waiting below has lost
        life = self.life
        work = None
        if life.phase is Phase.ATTACHED:
            driver = self.driver
            link = self.link
            life.take(Step.SUPERSEDE, time.monotonic())
            self._phase_changed()
            self.options.step("resume:supersede")
            if driver is None or driver.is_owner:
                # The same thread runs both transports: the old one is not
                # in a turn now, so let it go right here.
                assert link is not None
                work = self._let_go(link, ConnectionClosed("superseded by a RESUME"))
                if driver is not None:
                    driver.abort(timeout=0)
            else:
                driver.abort(timeout=0)  # its thread lets go as it ends (link_lost)
        if life.phase is Phase.HANDING_OVER:
            self.options.step("resume:handover-wait")
            let_go = self.cond.wait_for(
                lambda: life.phase is not Phase.HANDING_OVER or self.resume_tickets != ticket,
                timeout,
            )
            if self.resume_tickets != ticket:
                self.options.step("resume:superseded")
                reason = "superseded by a newer RESUME for this session"
                return Refusal(reason=reason, superseded=True), work
            if not let_go:
                self.doomed = (
                    f"the previous transport did not let go within {timeout:g} s of a RESUME"
                )
                self.options.step("resume:handover-timeout")
                return Refusal(reason=self.doomed, superseded=False), work
        if life.phase not in (Phase.DETACHED, Phase.FINISHED):
            # Unreachable: only the newest RESUME gets here, and only it
            # attaches. Refused rather than hand a driven core to the core.
            log.error("a RESUME found its session %s: refusing it", life.phase.value)
            reason = f"the session is {life.phase.value} on another connection"
            return Refusal(reason=reason, superseded=False), work
        return None, work

    # -- finishing ---------------------------------------------------------------
    def finish(self, error: BaseException, reason: str) -> None:
        """End the session now (it must have no driver, or be called by its driver)."""
        with self.cond:
            work = self._finish(error, reason)
        if work is not None:
            work()

    def finish_locked(self, error: BaseException, reason: str) -> Work | None:
        """:meth:`finish` for a caller that holds the lock (run the result after)."""
        return self._finish(error, reason)

    def _finish(self, error: BaseException, reason: str) -> Work | None:
        if not self.life.take(Step.FINISH, time.monotonic()):
            return None
        self._phase_changed()
        self.closing = True
        engine = self.engine
        if self.link is not None:
            self.link.stale = True
        self.link = None
        self.driver = None
        engine.drive_with(None)
        engine.acknowledge()  # before the core forgets what it retained
        # Why it ended: the core's reason if it had one (a peer's ERROR, a
        # lost transport), else ours (closing the core below says only that).
        final = engine._closing if engine._closing is not None else error
        engine.close_core(reason)  # frees a server's store entry, under this lock
        deferred = list(self._deferred)
        self._deferred.clear()
        if self.on_finished is not None:
            self.on_finished(self)
        self.cond.notify_all()
        return lambda: self._finished(final, reason, deferred)

    def _finished(self, final: BaseException, reason: str, deferred: list[Call]) -> None:
        engine = self.engine
        requests = engine.outstanding_requests()  # before they are failed
        if not isinstance(final, ConnectionClosed):
            final = ConnectionClosed(str(final))
        engine._closing = final  # what every outstanding call fails with
        engine.connection_lost(final)
        for fn in deferred:  # they meet the end now: requests fail, fire-and-forgets count
            try:
                fn()
            except Exception:
                log.debug("call dropped at the session's end", exc_info=True)
        loss = engine.loss(reason, requests)
        if loss is not None:
            log.warning("resumable session ended with a loss: %s", loss)
        with self.cond:
            self.error = final
            self.loss = loss
        options = self.options
        if loss is not None and options.on_loss is not None:
            options.on_loss(loss)
        for fn in self._exit_callbacks:
            try:
                fn()
            except Exception:
                log.exception("session exit callback failed")
        options.step("finish")
        with self.cond:
            self._done = True
            self.cond.notify_all()

    def add_exit_callback(self, fn: Callable[[], None]) -> None:
        with self.cond:
            if not self._done:
                self._exit_callbacks.append(fn)
                return
        fn()

    def wait_finished(self, timeout: float | None) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self._done, timeout)

    def close(self, timeout: float | None, *, abort: bool = False) -> None:
        """The application ends the session: an attached one says goodbye on
        its transport (or is reset), a detached one ends here."""
        with self.cond:
            self.closing = True
            driver = self.driver
            work = None
            if self.life.phase is Phase.DETACHED:
                reason = "closed by the application while the session had no transport"
                work = self._finish(ConnectionClosed(reason), reason)
        if work is not None:
            work()
        if driver is not None:
            if abort:
                driver.abort(timeout)
            else:
                driver.close(timeout)
            if driver.is_owner:
                return  # the driver's thread itself: it finishes after this turn
        self.wait_finished(timeout)

    # -- calls for the driving thread ------------------------------------------------
    def call_soon(self, fn: Call, timeout: float | None = None) -> None:
        """Run ``fn`` on the thread driving the session: its current driver,
        or the next one (kept in order while it has none; callers wait
        up to ``timeout`` when too many are kept). ``ConnectionClosed`` once
        finished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.cond:
                life = self.life
                if life.finished:
                    raise ConnectionClosed(f"session ended: {self.error or 'finished'}")
                driver = self.driver
                if driver is None:
                    if self.home is not None and self.home():
                        fn()  # nothing else runs the engine: no driver, and we hold the lock
                        return
                    if len(self._deferred) < DEFERRED_CAPACITY:
                        self._deferred.append(fn)
                        return
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError("session detached and its call queue is full")
                    self.cond.wait(left)
                    continue
            try:
                driver.call_soon(fn, timeout)
                return
            except ConnectionClosed:
                pass  # it is ending: wait until the session let it go
            self._wait_replaced(driver, deadline)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("the session's transport ended and no other took over")

    def _wait_replaced(self, driver: Driver | None, deadline: float | None) -> None:
        with self.cond:
            self.cond.wait_for(
                lambda: self.driver is not driver or self.life.finished,
                None if deadline is None else max(0.0, deadline - time.monotonic()),
            )

    def resumed(self, retransmitted: int) -> None:
        """The core said RESUME_OK (client) or accepted a RESUME (server)."""
        with self.cond:
            self.resumes += 1
            seconds = time.monotonic() - self.detached_at
            if self.policy is not None:
                self.policy.resumed()
        options = self.options
        if options.on_resumed is not None:
            options.on_resumed(seconds)
        options.step("resumed")


class SessionDriver:
    """The driver a session's peer object holds (see the module notes)."""

    __slots__ = ("_config", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self._config: LoopConfig | None = None

    @property
    def config(self) -> LoopConfig:
        """The limits of the session's transports' drivers (the last one
        attached: every transport of a session gets the same)."""
        config = getattr(self.session.driver, "config", None)
        if isinstance(config, LoopConfig):
            self._config = config
        return self._config or LoopConfig()

    @property
    def buffered(self) -> int:
        """Bytes the attached transport's driver holds unwritten (none
        while the session is between transports)."""
        return getattr(self.session.driver, "buffered", 0)

    def wait_until(self, ready: Callable[[], bool], timeout: float | None = None) -> None:
        """Any thread but the driving one: return once ``ready()`` holds,
        checked after each turn of the attached transport's driver (e.g. a
        fire-and-forget waiting for unwritten output to drain below
        ``high_water``, as on a plain connection); a transport that ends
        meanwhile is waited out until another takes over (a pause, not an
        error, as every call of a session). Raises ``ConnectionClosed``
        once the session has ended, ``TimeoutError`` after ``timeout``."""
        session = self.session
        deadline = None if timeout is None else time.monotonic() + timeout
        while not ready():
            if session.finished:
                raise ConnectionClosed(f"session ended: {session.error or 'finished'}")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"not ready within {seconds(timeout or 0.0)}")
            driver = session.driver
            wait = getattr(driver, "wait_until", None)
            if driver is not None and wait is None:
                return  # a driver without a buffer of its own: nothing to wait for
            if driver is None and session.home is not None and session.home():
                return  # the thread that must attach the next transport: never wait here
            if wait is not None:
                try:
                    wait(ready, left)
                    return
                except ConnectionClosed:
                    pass  # that transport ended: the session lets it go
            session._wait_replaced(driver, deadline)

    @property
    def transport(self) -> Transport:
        transport = self.session.transport
        assert transport is not None
        return transport

    @property
    def error(self) -> BaseException | None:
        return self.session.error

    @property
    def is_owner(self) -> bool:
        driver = self.session.driver
        return driver is not None and driver.is_owner

    @property
    def alive(self) -> bool:
        return not self.session.finished

    def call_soon(self, fn: Call, timeout: float | None = None) -> None:
        driver = self.session.driver  # fast path: attached
        if driver is not None:
            with contextlib.suppress(ConnectionClosed):
                driver.call_soon(fn, timeout)
                return
        self.session.call_soon(fn, timeout)

    def wake(self) -> None:
        driver = self.session.driver
        if driver is not None:
            driver.wake()

    def close(self, timeout: float | None = 5.0) -> None:
        self.session.close(timeout)

    def abort(self, timeout: float | None = 5.0) -> None:
        self.session.close(timeout, abort=True)

    def join(self, timeout: float | None = None) -> bool:
        return self.session.wait_finished(timeout)

    def add_exit_callback(self, fn: Callable[[Any], None]) -> None:
        """``fn(self)`` once the session has finished (asyncio peers)."""
        self.session.add_exit_callback(lambda: fn(self))
