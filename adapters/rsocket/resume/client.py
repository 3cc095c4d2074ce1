"""Client side of resumption: the reconnect policy, the thread that
reconnects, and ``connect_resumable``.

When the session's transport ends, the session detaches (:mod:`.session`)
and a reconnector opens a new transport, attaches it and sends RESUME. The
:class:`ReconnectPolicy` decides when to try again and when to give up: an
outage starts at the first loss and ends at RESUME_OK; within it, attempts
are spaced by exponential backoff with jitter, and once ``reconnect_timeout``
has passed since the loss the session ends (every outstanding call fails
with ``ConnectionClosed`` naming the reason). A RESUME unanswered within
``resume_timeout`` ends that attempt's transport (:mod:`.engine`) and counts
as a failed attempt.
"""

from __future__ import annotations

import contextlib
import random
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from ...drive.config import LoopConfig
from ...drive.endpoints import LoopChoice, new_driver, pick_loop
from ...drive.errors import ConnectionClosed
from ...transport import Transport, open_transport
from ...transport.urls import Endpoint
from ...transport.websocket.options import WebSocketOptions
from .. import core
from ..client import Client
from ..engine import refuse_async_hooks
from ..options import EngineOptions, options_for
from .engine import EngineLink, SessionEngine, resume_timeout
from .options import ResumeOptions, SessionLoss
from .session import NewDriver, Session, SessionDriver

__all__ = [
    "Outage",
    "ReconnectPolicy",
    "ResumableClient",
    "ThreadReconnector",
    "connect_resumable",
    "new_client_session",
]


class ReconnectPolicy:
    """When to try again within one outage, and when to give up. Time is an
    argument; randomness (jitter) is injected."""

    def __init__(self, options: ResumeOptions, rng: random.Random | None = None) -> None:
        self._options = options
        self._rng = rng if rng is not None else random.Random()
        self._since: float | None = None
        self._delay = options.reconnect_initial
        #: Attempts made in the current outage.
        self.attempts = 0
        self.last_error: str | None = None

    def lost(self, now: float) -> None:
        """The transport ended; starts an outage unless one is under way."""
        if self._since is None:
            self._since = now
            self._delay = self._options.reconnect_initial
            self.attempts = 0
            self.last_error = None

    def resumed(self) -> None:
        """RESUME_OK: the outage is over."""
        self._since = None

    def ends_at(self) -> float | None:
        """When the current outage must be over (None: no outage): every
        wait within it (a delay, a connect, a RESUME) ends by then."""
        if self._since is None:
            return None
        return self._since + self._options.reconnect_timeout

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before the next attempt (0 for the first of an
        outage), or None: give up (the outage lasted ``reconnect_timeout``)."""
        since = self._since if self._since is not None else now
        left = since + self._options.reconnect_timeout - now
        if left <= 0:
            return None
        if self.attempts == 0:
            return 0.0
        delay = self._delay * (0.5 + self._rng.random())
        self._delay = min(self._delay * 2, self._options.reconnect_max)
        return min(delay, left)

    def give_up_reason(self) -> str:
        timeout = self._options.reconnect_timeout
        last = f"; last: {self.last_error}" if self.last_error else ""
        return f"not resumed within {timeout:g} s of the loss ({self.attempts} attempt(s){last})"


def new_client_session(
    options: EngineOptions, resume: ResumeOptions, handler: object
) -> tuple[SessionEngine, Session, ReconnectPolicy]:
    """A resumable client's engine (SETUP with R queued), its lifecycle and policy."""
    conn = core.client(
        options,
        resume_buffer_size=resume.resume_buffer_size,
        resume_timeout=resume_timeout(options, resume),
    )
    engine = SessionEngine(options, conn, resume)
    engine.handler = handler
    session = Session(engine, threading.RLock())
    policy = ReconnectPolicy(resume, resume.rng)
    session.policy = policy
    return engine, session, policy


class Outage:
    """One outage of a client session as steps a reconnector performs
    (sans-IO: the runner waits and opens transports; this decides and
    attaches). ``next_delay(now)`` -> seconds to wait before the next
    attempt, or None: stop (the session is closing, or has given up and
    finished here); then ``opened(transport)`` or ``failed(error)``."""

    def __init__(
        self,
        session: Session,
        policy: ReconnectPolicy,
        make_driver: Callable[[Transport, EngineLink], NewDriver],
    ) -> None:
        self._session = session
        self._policy = policy
        self._make_driver = make_driver
        with session.cond:
            policy.lost(time.monotonic())
            if policy.attempts:  # an attempt's transport ended before RESUME_OK
                policy.last_error = session.detach_reason

    def next_delay(self, now: float) -> float | None:
        session = self._session
        if session.closing:
            return None
        with session.cond:
            delay = self._policy.next_delay(now)
        if delay is None:
            reason = self._policy.give_up_reason()
            session.finish(ConnectionClosed(f"session not resumed: {reason}"), reason)
            return None
        return delay

    def attempt(self, now: float, connect_timeout: float) -> float:
        """The runner is about to open a transport: how long it may take
        (``connect_timeout``, capped by what is left of the outage)."""
        self._policy.attempts += 1
        self._session.options.step("client:reconnect")
        with self._session.cond:
            ends = self._policy.ends_at()
        if ends is None:
            return connect_timeout
        return max(0.001, min(connect_timeout, ends - now))

    def failed(self, error: OSError) -> None:
        self._policy.last_error = str(error) or type(error).__name__

    def opened(self, transport: Transport) -> None:
        """Attach ``transport`` (RESUME goes out on it), or drop it if the
        session ended meanwhile."""
        link = EngineLink(self._session.engine)
        try:
            driver = self._make_driver(transport, link)
        except BaseException:
            transport.abort()
            raise
        if not self._session.attach(link, driver, resume=True, start=driver.start):
            transport.abort()


class ThreadReconnector:
    """Reconnects a detached client session on a helper thread (one outage
    at a time: the session detaches again only once attached)."""

    def __init__(
        self,
        session: Session,
        policy: ReconnectPolicy,
        reopen: Callable[[float], Transport],
        make_driver: Callable[[Transport, EngineLink], NewDriver],
        connect_timeout: float,
    ) -> None:
        self._session = session
        self._connect_timeout = connect_timeout
        self._policy = policy
        self._reopen = reopen
        self._make_driver = make_driver
        self._stop = threading.Event()
        session.on_detached = self.start

    def start(self, _: Session) -> None:
        threading.Thread(target=self._run, name="sansrs-resume-reconnect", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        outage = Outage(self._session, self._policy, self._make_driver)
        while (delay := outage.next_delay(time.monotonic())) is not None:
            if delay and self._stop.wait(delay):
                return
            timeout = outage.attempt(time.monotonic(), self._connect_timeout)
            try:
                transport = self._reopen(timeout)
            except OSError as exc:
                outage.failed(exc)
                continue
            outage.opened(transport)
            return


class ResumableClient(Client):
    """A :class:`~..client.Client` whose calls wait out a reconnection (a
    pause, not an error); they fail only once the session ends. ``close()``
    raises :class:`~.options.SessionLost` if the session had ended with
    fire-and-forgets the server never confirmed."""

    def __init__(self, session: Session, engine: SessionEngine) -> None:
        super().__init__(SessionDriver(session), engine)
        self._session = session

    # The same read-outs as AsyncResumableClient's by choice: each twin
    # documents its public API; the logic is the Session's.
    @property
    def session(self) -> Session:
        return self._session

    @property
    def reconnects(self) -> int:
        """Transports the session was resumed on (after the first)."""
        return self._session.reconnects

    @property
    def resumes(self) -> int:
        return self._session.resumes

    @property
    def loss(self) -> SessionLoss | None:
        """What the ended session lost (None: nothing, or still running)."""
        return self._session.loss

    def close(self, timeout: float | None = 5.0) -> None:
        super().close(timeout)
        self._session.raise_loss_once()

    def abort(self, timeout: float | None = 5.0) -> None:
        super().abort(timeout)
        self._session.raise_loss_once()


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
def connect_resumable(
    url: str | Endpoint,
    *,
    handler: object = None,
    connect_timeout: float = 10.0,
    loop: LoopChoice = "thread",
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
    resume: ResumeOptions | None = None,
    **setup: Any,
) -> ResumableClient:
    """Like :func:`~..client.connect`, with a resumable session (``tcp://``,
    ``tls://``, ``unix://``, ``ws://``, ``wss://``: one frame per binary
    message, every reconnection a new upgrade with the same ``websocket``
    options). ``resume``:
    :class:`~.options.ResumeOptions` (reconnect policy, ``resume_timeout``,
    callbacks). ``interceptors`` as for ``connect``
    (:class:`~..interceptors.Interceptors`): docs/interceptors.md tells
    what they see of a resumable session (built and tested for plain
    connections only)."""
    refuse_async_hooks(handler)
    options = options_for(connect_resumable, setup)
    resume = resume if resume is not None else ResumeOptions()
    driver_loop = pick_loop(loop)
    name = f"sansrs-client {url}"

    def reopen(timeout: float) -> Transport:
        return open_transport(
            url,
            timeout,
            ssl_context=ssl_context,
            server_hostname=server_hostname,
            websocket=websocket,
        )

    def make_driver(transport: Transport, link: EngineLink) -> NewDriver:
        return new_driver(driver_loop, transport, link, name, lambda _: link.exited(), loop_config)

    transport = reopen(connect_timeout)
    engine, session, policy = new_client_session(options, resume, handler)
    if driver_loop is not None:
        session.home = lambda: driver_loop.in_loop_thread
    with contextlib.ExitStack() as undo:
        undo.callback(transport.abort)
        driver = make_driver(transport, engine.link)
        session.attach_first(engine.link, driver)
        client = ResumableClient(session, engine)
        engine.attach(driver, client)
        reconnector = ThreadReconnector(session, policy, reopen, make_driver, connect_timeout)
        session.add_exit_callback(reconnector.stop)
        undo.pop_all()
    driver.start()
    return client
