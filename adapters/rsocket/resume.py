"""Resumable RSocket over the synchronous API: the application sees at most
a pause when a connection drops.

    server = serve_resumable("tcp://127.0.0.1:0", handler, keep_detached=60)
    with connect_resumable(server.url) as client:
        for item in client.request_stream(b"q"):   # keeps going across drops
            ...

Client: the session is resumable (SETUP with R, a 128-bit token). When its
transport ends (or the server is silent past the max lifetime), a helper
thread reconnects with exponential backoff and jitter (``ResumeOptions``)
and sends RESUME; iterators keep yielding, request-response calls complete,
new calls wait for the new transport. ERROR[REJECTED_RESUME], or no
transport within ``reconnect_timeout``, ends the session: every outstanding
call fails with ``ConnectionClosed`` naming the reason.

Server: sessions live in a ``SessionStore``; a session whose transport ended
is parked (no thread drives it) for ``keep_detached`` seconds, then freed
(its streams fail). A new connection whose first frame is RESUME takes the
session over: the driver of that connection drives the session's engine
from then on (``EngineLink``). A half-open old transport is aborted first.

Byte-stream transports only (TCP, TLS, Unix); docs/rsocket.md (Resumption).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..drive.connection import LoopConnection, LoopServer
from ..drive.endpoints import LoopChoice, new_acceptor, new_driver, pick_loop
from ..drive.engine import Driver
from ..drive.errors import ConnectionClosed
from ..drive.peer import DrivenPeer
from ..drive.selector import Loop
from ..drive.threads import ConnectionThread
from ..transport import Transport, listen, open_transport
from ..transport.urls import Endpoint
from . import core
from .client import Client
from .engine import RSocketEngine
from .options import EngineOptions
from .peer import RSocketPeer
from .server import Server

__all__ = [
    "EngineLink",
    "ResumableClient",
    "ResumableEngine",
    "ResumeOptions",
    "connect_resumable",
    "serve_resumable",
]

log = logging.getLogger("sansrs.adapters.rsocket")

_State = core.ConnectionState
_Driver = ConnectionThread | LoopConnection


@dataclass(kw_only=True)
class ResumeOptions:
    """Resumption settings (seconds for times)."""

    #: Bytes of sent frames kept until the peer acknowledges them.
    resume_buffer_size: int = 8 * 1024 * 1024
    #: Server: how long a session without a transport waits for a RESUME.
    keep_detached: float = 60.0
    #: Client: first reconnect delay, doubled per failed attempt up to the max.
    reconnect_initial: float = 0.05
    reconnect_max: float = 2.0
    #: Client: give up when no transport could be opened for this long.
    reconnect_timeout: float = 60.0
    #: Jitter source (injected for tests).
    rng: random.Random | None = None

    def __post_init__(self) -> None:
        if self.reconnect_initial <= 0 or self.reconnect_max < self.reconnect_initial:
            raise ValueError("need 0 < reconnect_initial <= reconnect_max")
        if self.keep_detached <= 0 or self.reconnect_timeout <= 0:
            raise ValueError("keep_detached and reconnect_timeout must be > 0")


class EngineLink:
    """The engine one driver (one transport) sees. It forwards to the
    session's engine; a link whose transport was superseded is ``stale`` and
    turns every call into a no-op that asks the driver to close."""

    __slots__ = ("stale", "target")

    def __init__(self, target: RSocketEngine) -> None:
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
            return ConnectionClosed("transport superseded by a resumed one")
        return self.target.close_reason()

    def begin_close(self) -> None:
        if not self.stale:
            self.target.begin_close()

    def connection_lost(self, error: BaseException) -> None:
        if not self.stale:
            self.target.connection_lost(error)


class _Registry:
    """Server: the store, the engine of every resumable session, the parked
    ones, and the sweeper that frees sessions never resumed."""

    def __init__(self, options: ResumeOptions) -> None:
        self.store = core.SessionStore(keep_detached=options.keep_detached)
        self.lock = threading.RLock()
        self.engines: dict[object, ResumableEngine] = {}  # session core -> engine
        self._wake = threading.Condition(self.lock)
        self._closed = False
        self._sweeper = threading.Thread(
            target=self._sweep, name="sansrs-resume-sweep", daemon=True
        )
        self._sweeper.start()

    def register(self, engine: ResumableEngine) -> None:
        with self.lock:
            self.engines[engine.conn] = engine

    def forget(self, engine: ResumableEngine) -> None:
        with self._wake:
            if self.engines.get(engine.conn) is engine:
                del self.engines[engine.conn]
            self._wake.notify_all()

    def wait_empty(self, timeout: float | None) -> bool:
        """Wait until no session is kept (all ended or freed)."""
        with self._wake:
            return self._wake.wait_for(lambda: not self.engines and not len(self.store), timeout)

    def parked(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def session_engine(self, token: bytes) -> ResumableEngine | None:
        with self.lock:
            conn = self.store.lookup(token, None)
            return None if conn is None else self.engines.get(conn)

    def _sweep(self) -> None:
        with self._wake:
            while not self._closed:
                deadline = self.store.next_deadline()
                now = time.monotonic()
                if deadline is not None and deadline <= now:
                    for conn in self.store.expire(now):
                        engine = self.engines.pop(conn, None)
                        if engine is not None:
                            engine.expired()
                    continue
                self._wake.wait(None if deadline is None else deadline - now)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self._sweeper.join(5.0)


class ResumableEngine(RSocketEngine):
    """An :class:`RSocketEngine` whose session survives its transport."""

    def __init__(
        self,
        options: EngineOptions,
        conn: core.Connection,
        resume: ResumeOptions,
        *,
        registry: _Registry | None = None,
        reopen: Callable[[], Transport] | None = None,
        make_driver: Callable[[Transport, EngineLink], _Driver] | None = None,
    ) -> None:
        super().__init__(options, conn)
        self.resume = resume
        self.link = EngineLink(self)
        self._registry = registry
        #: Server: the first frame (SETUP or RESUME) received so far.
        self._first_frame = bytearray()
        self._reopen = reopen
        self._make_driver = make_driver
        self._rng = resume.rng if resume.rng is not None else random.Random()
        self._transport_gone = False
        self._attached = threading.Condition()
        self._generation = 0
        self._finished = False
        self._stop = threading.Event()
        self._adopted: ResumableEngine | None = None
        self.reconnects = 0
        # Calls for the driving thread made while no thread drives the session.
        self._deferred: list[Callable[[], None]] = []
        self._defer_lock = threading.Lock()

    # -- which thread drives the session ------------------------------------
    def _set_driver(self, driver: Driver | None) -> None:
        with self._defer_lock:
            self.thread = driver
            if isinstance(self.peer, DrivenPeer) and driver is not None:
                self.peer.move_to(driver)
            calls, self._deferred = self._deferred, []
        if driver is not None:
            for fn in calls:
                with contextlib.suppress(ConnectionClosed):
                    driver.call_soon(fn)

    def _call_soon(self, fn: Callable[[], None]) -> None:
        with self._defer_lock:
            driver = self.thread
            if driver is None:
                if not self._finished:
                    self._deferred.append(fn)  # runs on the next driver
                return
        try:
            driver.call_soon(fn)
        except ConnectionClosed:
            with self._defer_lock:
                if self._finished:
                    return
                self._deferred.append(fn)
                driver = self.thread
            if driver is not None:  # a new driver came meanwhile
                self._set_driver(driver)

    # -- events from the core ------------------------------------------------
    def on_disconnected(self, reason: str, timed_out: bool) -> None:
        log.info("resumable session lost its transport: %s", reason)
        self._transport_gone = True  # the driver closes the transport

    def on_resumed(self, peer_position: int, retransmitted: int) -> None:
        log.info("session resumed (%d bytes sent again)", retransmitted)

    def on_resume_accepted(self, session: object) -> None:
        registry = self._registry
        assert registry is not None
        engine = registry.engines.get(session)
        if engine is None:  # pragma: no cover - every stored session is registered
            return
        self._adopt(engine)

    def on_setup(self, ev: Any) -> None:
        super().on_setup(ev)
        if self._registry is not None and self.conn.resumable:
            self._registry.register(self)

    # -- driver protocol -----------------------------------------------------
    def receive_data(self, data: bytes, now: float) -> None:
        if self._adopted is not None:
            self._adopted.receive_data(data, now)
            return
        super().receive_data(data, now)

    def wants_close(self) -> bool:
        return self._transport_gone or super().wants_close()

    def close_reason(self) -> BaseException | None:
        if self._transport_gone and self._closing is None:
            return ConnectionClosed("transport lost; the session resumes on a new one")
        return super().close_reason()

    def connection_lost(self, error: BaseException) -> None:
        conn = self.conn
        if conn.state in (_State.ESTABLISHED, _State.RESUMING):
            conn.connection_lost()
            self._dispatch_events()
        if conn.state is _State.DISCONNECTED and not self._close_started:
            self._transport_gone = False
            self._set_driver(None)
            if self._reopen is not None:
                threading.Thread(
                    target=self._reconnect, name="sansrs-resume-reconnect", daemon=True
                ).start()
            elif self._registry is not None:
                self._registry.parked()
            return
        self._finish(error)

    def _finish(self, error: BaseException) -> None:
        if self._registry is not None:
            self._registry.forget(self)
        super().connection_lost(error)
        with self._attached:
            self._finished = True
            self._attached.notify_all()

    # -- server --------------------------------------------------------------
    def _feed_setup_first(self, data: bytes, now: float) -> bytes:
        registry = self._registry
        if registry is None:
            return super()._feed_setup_first(data, now)
        # A RESUME must reach the core whole, under the registry's lock: the
        # first frame is collected (in a bytearray: linear, however it is
        # trickled) and handed over once complete.
        pending = self._first_frame
        pending += data
        if len(pending) < 3 or len(pending) < 3 + int.from_bytes(pending[:3], "big"):
            return b""
        data = bytes(pending)
        pending.clear()
        token = core.resume_token_of(data[3 : 3 + int.from_bytes(data[:3], "big")])
        if token is None:
            return super()._feed_setup_first(data, now)
        session = registry.session_engine(token)
        if session is not None:
            session.release()  # a half-open old transport lets go first
        with registry.lock:  # the session's core changes hands here
            rest = super()._feed_setup_first(data, now)
            if session is not None and self._adopted is None:
                session.rejected()  # the RESUME ended it (or found it expired)
        if self._adopted is not None and rest:
            self._adopted.receive_data(rest, now)
            return b""
        return rest

    def release(self) -> None:
        """Make the driver of this session (if any) let go of it."""
        driver = self.thread
        if driver is None or self.conn.state is not _State.ESTABLISHED:
            return
        if driver.is_owner:  # the same loop thread: park it right here
            self.link.stale = True
            self.conn.connection_lost()
            self._dispatch_events()
            self._transport_gone = False
            self._set_driver(None)
        else:
            driver.abort(5.0)  # its end parks the session (connection_lost)

    def _adopt(self, session: ResumableEngine) -> None:
        """Drive ``session`` on this engine's driver from now on."""
        self._adopted = session
        self.link.target = session
        session.link.stale = True
        session.link = self.link
        session._transport_gone = False
        session._set_driver(self.thread)

    def rejected(self) -> None:
        """Server: a RESUME for this parked session was refused; if that
        ended the session, fail its streams now (no driver will)."""
        if self.thread is None and not self._finished and self.conn.state is _State.CLOSED:
            self._dispatch_events()
            self._finish(self._closing or ConnectionClosed("resumption rejected"))

    def expired(self) -> None:
        """Server: the session was not resumed in time (sweeper thread)."""
        self._dispatch_events()
        self._finish(
            ConnectionClosed(f"not resumed within {self.resume.keep_detached:g} s of the drop")
        )

    # -- client --------------------------------------------------------------
    def _reconnect(self) -> None:
        assert self._reopen is not None and self._make_driver is not None
        opts = self.resume
        deadline = time.monotonic() + opts.reconnect_timeout
        delay = opts.reconnect_initial
        while not self._stop.is_set():
            try:
                transport = self._reopen()
            except OSError as exc:
                if time.monotonic() + delay > deadline:
                    self._give_up(f"no transport within {opts.reconnect_timeout:g} s: {exc}")
                    return
                self._stop.wait(delay * (0.5 + self._rng.random()))
                delay = min(delay * 2, opts.reconnect_max)
                continue
            if self._stop.is_set():
                transport.abort()
                break
            self.reconnects += 1
            self.conn.resume()  # no thread drives the engine: safe here
            link = EngineLink(self)
            self.link.stale = True
            self.link = link
            driver = self._make_driver(transport, link)
            self._set_driver(driver)
            with self._attached:
                self._generation += 1
                self._attached.notify_all()
            driver.start()
            return
        self._give_up("the client was closed while reconnecting")

    def _give_up(self, reason: str) -> None:
        with contextlib.suppress(core.LocalProtocolError):
            self.conn.close(reason, error_code=0x101)  # CONNECTION_ERROR
        self._dispatch_events()
        self._closing = ConnectionClosed(f"session not resumed: {reason}")
        self._finish(self._closing)

    def stop_resuming(self) -> None:
        self._stop.set()

    def wait_finished(self, timeout: float | None) -> bool:
        with self._attached:
            return self._attached.wait_for(lambda: self._finished, timeout)

    def wait_attached(self, generation: int, timeout: float | None) -> bool:
        """Wait for a driver newer than ``generation``; False if the session ended."""
        with self._attached:
            self._attached.wait_for(
                lambda: self._finished or self._generation > generation, timeout
            )
            return not self._finished and self._generation > generation

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def finished(self) -> bool:
        return self._finished


class _ResilientDriver:
    """What a :class:`ResumableClient` sees as its driver: the current one,
    with ``call_soon`` waiting out a reconnection instead of failing."""

    def __init__(self, engine: ResumableEngine) -> None:
        self._engine = engine
        self.current: Any = None

    def call_soon(self, fn: Callable[[], object], timeout: float | None = None) -> None:
        engine = self._engine
        while True:
            generation = engine.generation
            try:
                self.current.call_soon(fn, timeout)
                return
            except ConnectionClosed:
                wait = engine.resume.reconnect_timeout if timeout is None else timeout
                if not engine.wait_attached(generation, wait):
                    raise

    @property
    def is_owner(self) -> bool:
        return bool(self.current.is_owner)

    @property
    def alive(self) -> bool:
        return not self._engine.finished

    @property
    def transport(self) -> Transport:
        transport: Transport = self.current.transport
        return transport

    def wake(self) -> None:
        self.current.wake()

    def close(self, timeout: float | None = 5.0) -> None:
        self._engine.stop_resuming()
        self.current.close(timeout)
        if self._engine.thread is None:  # between transports: end it here
            self._engine._give_up("closed by the application")

    def abort(self, timeout: float | None = 5.0) -> None:
        self._engine.stop_resuming()
        self.current.abort(timeout)
        if self._engine.thread is None:
            self._engine._give_up("aborted by the application")

    def join(self, timeout: float | None = None) -> bool:
        return self._engine.wait_finished(timeout)


class ResumableClient(Client):
    """A :class:`Client` whose calls wait out a reconnection (a pause, not
    an error); it fails only once the session ends."""

    _engine: ResumableEngine

    def __init__(self, thread: _Driver, engine: ResumableEngine) -> None:
        self._resilient = _ResilientDriver(engine)
        super().__init__(thread, engine)

    @property
    def _thread(self) -> Any:
        return self._resilient

    @_thread.setter
    def _thread(self, driver: Any) -> None:
        self._resilient.current = driver

    @property
    def reconnects(self) -> int:
        return self._engine.reconnects


def _driver_factory(
    loop: Loop | None, name: str, on_exit: Callable[[Any], None] | None = None
) -> Callable[[Transport, EngineLink], _Driver]:
    def make(transport: Transport, link: EngineLink) -> _Driver:
        return new_driver(loop, transport, link, name, on_exit)

    return make


def connect_resumable(
    url: str | Endpoint,
    *,
    handler: object = None,
    connect_timeout: float = 10.0,
    loop: LoopChoice = "thread",
    resume: ResumeOptions | None = None,
    **setup: Any,
) -> ResumableClient:
    """Like :func:`~.client.connect`, with a resumable session (TCP,
    TLS defaults, Unix). ``resume``: :class:`ResumeOptions`."""
    options = EngineOptions(**setup)
    resume = resume if resume is not None else ResumeOptions()
    make_driver = _driver_factory(pick_loop(loop), f"sansrs-client {url}")

    def reopen() -> Transport:
        return open_transport(url, connect_timeout)

    transport = reopen()
    conn = core.client(options, resume_buffer_size=resume.resume_buffer_size)
    engine = ResumableEngine(options, conn, resume, reopen=reopen, make_driver=make_driver)
    engine.handler = handler
    driver = make_driver(transport, engine.link)
    client = ResumableClient(driver, engine)
    engine.attach(driver, client)
    driver.start()
    return client


class ResumableServer(Server):
    """A :class:`Server` that also stops its session sweeper."""

    def __init__(self, accept: LoopServer, peers: list[RSocketPeer], registry: _Registry) -> None:
        super().__init__(accept, peers)
        self.registry = registry

    def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        super().close(timeout, abort=abort)
        self.registry.close()


def serve_resumable(
    url: str | Endpoint,
    handler: object = None,
    *,
    loop: LoopChoice = "thread",
    resume: ResumeOptions | None = None,
    **options: Any,
) -> ResumableServer:
    """Like :func:`~.server.serve` (one shared ``handler``), accepting
    resumable sessions (and plain ones)."""
    engine_options = EngineOptions(**options)
    resume = resume if resume is not None else ResumeOptions()
    registry = _Registry(resume)
    peers: list[RSocketPeer] = []
    driver_loop = pick_loop(loop)

    def make_connection(transport: Transport) -> _Driver:
        conn = core.server(
            engine_options,
            sessions=registry.store,
            resume_buffer_size=resume.resume_buffer_size,
        )
        engine = ResumableEngine(engine_options, conn, resume, registry=registry)
        engine._before_setup = b""
        peer_box: list[RSocketPeer] = []

        def exited(_: object) -> None:
            for p in peer_box:
                if p in peers:
                    peers.remove(p)

        make = _driver_factory(driver_loop, f"sansrs-server {transport.peer}", on_exit=exited)
        driver = make(transport, engine.link)
        peer = RSocketPeer(driver, engine)
        peer_box.append(peer)
        engine.attach(driver, peer, handler)
        peers.append(peer)
        return driver

    accept = new_acceptor(driver_loop, listen(url), make_connection)
    accept.start()
    return ResumableServer(accept, peers, registry)


# -- resumption events: only this engine takes them ---------------------------
ResumableEngine.EVENTS = {
    **RSocketEngine.EVENTS,
    core.events.Disconnected: lambda en, ev: en.on_disconnected(ev.reason, ev.timed_out),
    core.events.Resumed: lambda en, ev: en.on_resumed(ev.peer_position, ev.retransmitted),
    core.events.ResumeAccepted: lambda en, ev: en.on_resume_accepted(ev.session),
}
