"""Opening connections and servers on any driver: the one place every
protocol's ``connect`` / ``serve`` (synchronous and asyncio) goes through.

A protocol passes two callables: ``new_engine(transport)`` (its
:class:`~.engine.Engine` for that transport; a message transport such as
WebSocket says so with :func:`message_framed`) and ``new_peer(driver,
engine)`` (its application-facing object, which also attaches the engine to
the driver). Everything else is the same for every protocol:

- ``loop=`` (synchronous API) chooses the driver: ``"thread"`` (the default:
  a :class:`~.threads.ConnectionThread` per connection, and an accept thread
  for a server), ``"selector"`` (the process-wide
  :func:`~.selector.default_loop`), a :class:`~.selector.Loop` of the
  application's (one thread for many connections), or ``None`` (the same as
  ``"thread"``);
- under asyncio the driver is the running event loop's
  :class:`~.aio.AsyncioReactor`; a client's transport is opened (TCP connect,
  TLS and WebSocket handshakes) on a worker thread, so the event loop never
  blocks;
- a server keeps the live peers (a connection's end removes its peer).

Nothing here knows a wire protocol.

Each protocol's public ``connect`` / ``serve`` (synchronous and asyncio)
keeps its keyword arguments explicit, typed and documented where users read
them, and forwards the transport's to the functions here: those forwarding
calls look alike from protocol to protocol by choice, not by copy.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..transport import Listener, Transport, listen, open_transport
from ..transport.urls import Endpoint
from ..transport.websocket.options import WebSocketOptions
from .aio import AsyncioReactor
from .config import LoopConfig
from .connection import LoopConnection
from .engine import Driver, Engine
from .listener import LoopServer
from .selector import Loop, default_loop
from .threads import ConnectionThread, ServerThread

__all__ = [
    "Attachable",
    "LoopChoice",
    "attaching",
    "message_framed",
    "new_acceptor",
    "new_driver",
    "open_connection",
    "open_connection_async",
    "open_server",
    "open_server_async",
    "pick_loop",
]

LoopChoice = str | Loop | None
E = TypeVar("E", bound=Engine)
P = TypeVar("P")
D = TypeVar("D", bound=ConnectionThread | LoopConnection)


class Attachable(Engine, Protocol):
    """An engine told its driver before the application's peer is made."""

    def attach(self, driver: Driver) -> None: ...


A = TypeVar("A", bound=Attachable)
DR = TypeVar("DR", bound=Driver)


def pick_loop(loop: LoopChoice) -> Loop | None:
    """``"thread"`` or ``None`` -> None (a thread per connection),
    ``"selector"`` -> the process-wide selector loop, a Loop -> itself."""
    if isinstance(loop, Loop):
        return loop
    if loop is None or loop == "thread":
        return None
    if loop == "selector":
        return default_loop()
    raise ValueError(f"loop must be 'thread', 'selector' or a selector.Loop, not {loop!r}")


def _check_config(loop: Loop | None, config: LoopConfig | None) -> None:
    if loop is not None and config is not None:
        raise ValueError("config= applies to loop='thread'; a selector Loop has its own config")


def new_driver(
    loop: Loop | None,
    transport: Transport,
    engine: Engine,
    name: str,
    on_exit: Callable[[Any], None] | None = None,
    config: LoopConfig | None = None,
) -> ConnectionThread | LoopConnection:
    """The (not yet started) driver of one connection: its own thread when
    ``loop`` is None (``name`` names the thread), else a connection on ``loop``."""
    if loop is None:
        return ConnectionThread(transport, engine, name=name, on_exit=on_exit, config=config)
    return loop.add_connection(transport, engine, on_exit=on_exit)


def new_acceptor(
    loop: Loop | None,
    listener: Listener,
    make_connection: Callable[[Transport], ConnectionThread | LoopConnection],
    config: LoopConfig | None = None,
) -> LoopServer:
    """The (not yet started) acceptor of a server: its own thread when ``loop``
    is None (with ``config``'s connection limit), else accepting on ``loop``."""
    if loop is None:
        return ServerThread(listener, make_connection, config=config)
    return LoopServer(loop, listener, make_connection)


def attaching(peer: Callable[[DR, A], P]) -> Callable[[DR, A], P]:
    """A ``new_peer`` for an :class:`Attachable` engine: attach it to the
    driver, then make ``peer(driver, engine)`` (a peer class will do)."""

    def new_peer(driver: DR, engine: A) -> P:
        engine.attach(driver)
        return peer(driver, engine)

    return new_peer


def message_framed(transport: Transport) -> bool:
    """A message transport (WebSocket) says so; byte streams have no such flag."""
    return bool(getattr(transport, "message_framed", False))


# The transport keywords every protocol forwards: alike by choice (module notes).
def open_connection(
    url: str | Endpoint,
    new_engine: Callable[[Transport], E],
    new_peer: Callable[[Driver, E], P],
    *,
    name: str,
    loop: LoopChoice = "thread",
    config: LoopConfig | None = None,
    connect_timeout: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
) -> P:
    """Connect to ``url`` and start driving the engine; returns the peer.
    ``name`` names the connection's thread (with the peer's address);
    ``config``: the thread driver's limits and timeouts."""
    driver_loop = pick_loop(loop)
    _check_config(driver_loop, config)
    transport = open_transport(
        url,
        connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=websocket,
    )

    def add_driver(t: Transport, engine: E) -> ConnectionThread | LoopConnection:
        return new_driver(driver_loop, t, engine, f"{name} {t.peer}", config=config)

    return _start(transport, new_engine, add_driver, new_peer)


# The transport keywords every protocol forwards: alike by choice (module notes).
def open_server(
    url: str | Endpoint,
    new_engine: Callable[[Transport], E],
    new_peer: Callable[[Driver, E], P],
    *,
    name: str,
    loop: LoopChoice = "thread",
    config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
) -> tuple[LoopServer, list[P]]:
    """Listen on ``url``; each accepted connection gets an engine, a driver
    and a peer. Returns the running acceptor and the live peers' list.
    ``config``: the thread driver's limits and timeouts."""
    driver_loop = pick_loop(loop)
    _check_config(driver_loop, config)

    def add_driver(
        transport: Transport, engine: E, on_exit: Callable[[Any], None]
    ) -> ConnectionThread | LoopConnection:
        return new_driver(
            driver_loop, transport, engine, f"{name} {transport.peer}", on_exit, config
        )

    make_connection, peers = _tracking(new_engine, new_peer, add_driver)
    listener = listen(url, ssl_context=ssl_context, websocket=websocket)
    accept = new_acceptor(driver_loop, listener, make_connection, config)
    accept.start()
    return accept, peers


def _start(
    transport: Transport,
    new_engine: Callable[[Transport], E],
    add_driver: Callable[[Transport, E], D],
    new_peer: Callable[[D, E], P],
) -> P:
    """A client's engine, driver and peer over an open ``transport``, started."""
    try:
        engine = new_engine(transport)
        driver = add_driver(transport, engine)
        peer = new_peer(driver, engine)
    except BaseException:
        transport.abort()
        raise
    driver.start()
    return peer


def _tracking(
    new_engine: Callable[[Transport], E],
    new_peer: Callable[[D, E], P],
    add_driver: Callable[[Transport, E, Callable[[Any], None]], D],
) -> tuple[Callable[[Transport], D], list[P]]:
    """A server's ``make_connection`` and the list of live peers it keeps."""
    peers: list[P] = []

    def make_connection(transport: Transport) -> D:
        engine = new_engine(transport)
        box: list[P] = []

        def forget(_: object) -> None:
            if box and box[0] in peers:
                peers.remove(box[0])

        driver = add_driver(transport, engine, forget)
        box.append(new_peer(driver, engine))
        peers.append(box[0])
        return driver

    return make_connection, peers


# The transport keywords every protocol forwards: alike by choice (module notes).
async def open_connection_async(
    url: str | Endpoint,
    new_engine: Callable[[Transport], E],
    new_peer: Callable[[LoopConnection, E], P],
    *,
    config: LoopConfig | None = None,
    connect_timeout: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    websocket: WebSocketOptions | None = None,
) -> P:
    """:func:`open_connection` on the running event loop (the transport is
    opened on a worker thread, the connection driven by the loop)."""
    reactor = AsyncioReactor.current(config)
    transport = await asyncio.to_thread(
        open_transport,
        url,
        connect_timeout,
        ssl_context=ssl_context,
        server_hostname=server_hostname,
        websocket=websocket,
    )
    return _start(transport, new_engine, reactor.add_connection, new_peer)


# The transport keywords every protocol forwards: alike by choice (module notes).
async def open_server_async(
    url: str | Endpoint,
    new_engine: Callable[[Transport], E],
    new_peer: Callable[[LoopConnection, E], P],
    *,
    config: LoopConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    websocket: WebSocketOptions | None = None,
) -> tuple[LoopServer, list[P]]:
    """:func:`open_server` on the running event loop."""
    reactor = AsyncioReactor.current(config)

    def add_driver(
        transport: Transport, engine: E, on_exit: Callable[[Any], None]
    ) -> LoopConnection:
        return reactor.add_connection(transport, engine, on_exit=on_exit)

    make_connection, peers = _tracking(new_engine, new_peer, add_driver)
    listener = listen(url, ssl_context=ssl_context, websocket=websocket)
    accept = LoopServer(reactor, listener, make_connection)
    accept.start()
    return accept, peers
