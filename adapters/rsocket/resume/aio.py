"""Resumable RSocket under asyncio: ``await connect_resumable(url)``,
``await serve_resumable(url, handler)``.

The same sessions as the synchronous API (:mod:`.session`, :mod:`.engine`),
driven by the running event loop's :class:`~...drive.aio.AsyncioReactor`:
every transport of a session, old and new, runs on the loop's thread, so a
RESUME finds an old transport's driver idle and takes the session over at
once. The client reconnects in a task (the TCP connect on a worker thread),
the server expires detached sessions with the loop's timers. Requests are
coroutines and async iterators as in :mod:`..aio`; calls made while the
session has no transport wait for the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from ...drive.aio import AsyncioReactor, AsyncServer
from ...drive.config import LoopConfig
from ...drive.connecting import awaitable_context
from ...drive.listener import LoopServer
from ...transport import Transport, listen, open_transport
from ...transport.urls import Endpoint
from ...transport.websocket.options import WebSocketOptions
from ..aio import AsyncClient, AsyncRSocketPeer, _wrap_handler
from ..options import options_for
from .client import Outage, ReconnectPolicy, new_client_session
from .engine import EngineLink
from .options import ResumeOptions, SessionLoss
from .server import SessionRegistry, new_server_engine
from .session import Session, SessionDriver

__all__ = [
    "AsyncReconnector",
    "AsyncResumableClient",
    "AsyncResumableServer",
    "AsyncSweeper",
    "connect_resumable",
    "serve_resumable",
]


class AsyncReconnector:
    """Reconnects a detached client session in a task on the event loop."""

    def __init__(
        self,
        session: Session,
        policy: ReconnectPolicy,
        reopen: Callable[[float], Awaitable[Transport]],
        make_driver: Callable[[Transport, EngineLink], Any],
        loop: asyncio.AbstractEventLoop,
        connect_timeout: float,
    ) -> None:
        self._session = session
        self._connect_timeout = connect_timeout
        self._policy = policy
        self._reopen = reopen
        self._make_driver = make_driver
        self._loop = loop
        self._task: asyncio.Task[None] | None = None
        session.on_detached = self.start

    def start(self, _: Session) -> None:
        self._loop.call_soon_threadsafe(self._spawn)

    def _spawn(self) -> None:
        self._task = self._loop.create_task(self._run())

    def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _run(self) -> None:
        outage = Outage(self._session, self._policy, self._make_driver)
        while (delay := outage.next_delay(time.monotonic())) is not None:
            if delay:
                await asyncio.sleep(delay)
            timeout = outage.attempt(time.monotonic(), self._connect_timeout)
            try:
                transport = await self._reopen(timeout)
            except OSError as exc:
                outage.failed(exc)
                continue
            outage.opened(transport)
            return


class AsyncSweeper:
    """Runs :meth:`~.server.SessionRegistry.sweep` on the event loop's timers."""

    def __init__(self, registry: SessionRegistry, loop: asyncio.AbstractEventLoop) -> None:
        self._registry = registry
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = False
        registry.wake_sweeper = self.wake

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to sweep
            self._loop.call_soon_threadsafe(self._sweep)

    def _sweep(self) -> None:
        if self._stopped:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        next_at = self._registry.sweep(now)
        if next_at is not None:
            self._timer = self._loop.call_later(max(0.0, next_at - now), self._sweep)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()


class AsyncResumableClient(AsyncClient):
    """An :class:`~..aio.AsyncClient` whose calls wait out a reconnection;
    ``close()`` raises :class:`~.options.SessionLost` after a loss of
    fire-and-forgets (as :class:`~.client.ResumableClient`)."""

    def __init__(self, session: Session, engine: Any) -> None:
        super().__init__(cast(Any, SessionDriver(session)), engine)
        self._session = session

    # The asyncio twin of ResumableClient's read-outs (see there).
    @property
    def session(self) -> Session:
        return self._session

    @property
    def reconnects(self) -> int:
        return self._session.reconnects

    @property
    def resumes(self) -> int:
        return self._session.resumes

    @property
    def loss(self) -> SessionLoss | None:
        return self._session.loss

    async def close(self, timeout: float | None = 5.0) -> None:
        await super().close(timeout)
        self._session.raise_loss_once()


class AsyncResumableServer(AsyncServer[AsyncRSocketPeer]):
    """An :class:`~...drive.aio.AsyncServer` holding resumable sessions
    (``registry``); ``close()`` also ends the detached ones."""

    def __init__(
        self,
        accept: LoopServer,
        peers: list[AsyncRSocketPeer],
        registry: SessionRegistry,
        sweeper: AsyncSweeper,
    ) -> None:
        super().__init__(accept, peers)
        self.registry = registry
        self._sweeper = sweeper

    async def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        await super().close(timeout, abort=abort)
        self.registry.close()
        self._sweeper.stop()


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
@awaitable_context
async def connect_resumable(
    url: str | Endpoint,
    *,
    handler: object = None,
    connect_timeout: float = 10.0,
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
    resume: ResumeOptions | None = None,
    **setup: Any,
) -> AsyncResumableClient:
    """:func:`~.client.connect_resumable` under asyncio (``handler`` may be
    async); ``interceptors`` as there (docs/interceptors.md)."""
    options = options_for(connect_resumable, setup)
    resume = resume if resume is not None else ResumeOptions()
    reactor = AsyncioReactor.current(loop_config)

    async def reopen(timeout: float) -> Transport:
        return await asyncio.to_thread(
            open_transport,
            url,
            timeout,
            ssl_context=ssl_context,
            server_hostname=server_hostname,
            websocket=websocket,
        )

    def make_driver(transport: Transport, link: EngineLink) -> Any:
        return reactor.add_connection(transport, link, on_exit=lambda _: link.exited())

    transport = await reopen(connect_timeout)
    engine, session, policy = new_client_session(options, resume, _wrap_handler(handler))
    session.home = lambda: reactor.in_loop_thread
    driver = make_driver(transport, engine.link)
    session.attach_first(engine.link, driver)
    client = AsyncResumableClient(session, engine)
    engine.attach(driver, client)
    reconnector = AsyncReconnector(
        session, policy, reopen, make_driver, reactor.loop, connect_timeout
    )
    session.add_exit_callback(reconnector.stop)
    driver.start()
    return client


# Keywords written out where users read them, forwarded: alike by choice (drive/endpoints.py).
@awaitable_context
async def serve_resumable(
    url: str | Endpoint,
    handler: object = None,
    *,
    handler_factory: Callable[[AsyncRSocketPeer], object] | None = None,
    loop_config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
    resume: ResumeOptions | None = None,
    **options: Any,
) -> AsyncResumableServer:
    """:func:`~.server.serve_resumable` under asyncio (handlers may be
    async); ``interceptors`` as there (docs/interceptors.md)."""
    if handler is not None and handler_factory is not None:
        raise TypeError("pass handler or handler_factory, not both")
    engine_options = options_for(serve_resumable, options)
    resume = resume if resume is not None else ResumeOptions()
    reactor = AsyncioReactor.current(loop_config)
    peers: list[AsyncRSocketPeer] = []
    registry = SessionRegistry(resume, peers)
    sweeper = AsyncSweeper(registry, reactor.loop)

    def make_connection(transport: Transport) -> Any:
        engine = new_server_engine(engine_options, resume, registry)
        link = engine.link
        driver = reactor.add_connection(transport, link, on_exit=lambda _: link.exited())
        session = engine.session
        assert isinstance(session, Session)
        session.home = lambda: reactor.in_loop_thread
        session.attach_first(link, driver)
        peer = AsyncRSocketPeer(cast(Any, SessionDriver(session)), engine)
        chosen = handler_factory(peer) if handler_factory is not None else handler
        engine.attach(driver, peer, _wrap_handler(chosen))
        return driver

    accept = LoopServer(
        reactor, listen(url, ssl_context=ssl_context, websocket=websocket), make_connection
    )
    accept.start()
    return AsyncResumableServer(accept, peers, registry, sweeper)
