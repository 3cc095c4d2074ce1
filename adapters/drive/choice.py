"""Which driver runs a connection, chosen the same way by every protocol's
synchronous API (``rsocket_sync``, ``rsio_sync``, ``ditto_sync``).

``loop=`` takes ``"thread"`` (the default: a :class:`~.threads.ConnectionThread`
per connection, and an accept thread for a server), ``"selector"`` (the
process-wide :func:`~.selector.default_loop`), a :class:`~.selector.Loop` of
the application's (one thread for many connections), or ``None`` (the same as
``"thread"``). Nothing here knows a wire protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, Self, TypeVar

from ..transport import Listener, Transport
from ..transport.urls import Endpoint
from .selector import Driver, Engine, Loop, LoopConnection, LoopServer, default_loop
from .threads import ConnectionThread, ServerThread

__all__ = [
    "DrivenPeer",
    "ListeningServer",
    "LoopChoice",
    "PeersServer",
    "message_framed",
    "new_acceptor",
    "new_driver",
    "pick_loop",
]

LoopChoice = str | Loop | None


class _Peer(Protocol):
    @property
    def closed(self) -> bool: ...


P = TypeVar("P", bound=_Peer)


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


def new_driver(
    loop: Loop | None,
    transport: Transport,
    engine: Engine,
    name: str,
    on_exit: Callable[[Any], None] | None = None,
) -> ConnectionThread | LoopConnection:
    """The (not yet started) driver of one connection: its own thread when
    ``loop`` is None (``name`` names the thread), else a connection on ``loop``."""
    if loop is None:
        return ConnectionThread(transport, engine, name=name, on_exit=on_exit)
    return loop.add_connection(transport, engine, on_exit=on_exit)


def new_acceptor(
    loop: Loop | None,
    listener: Listener,
    make_connection: Callable[[Transport], ConnectionThread | LoopConnection],
) -> LoopServer:
    """The (not yet started) acceptor of a server: its own thread when ``loop``
    is None, else accepting on ``loop``."""
    if loop is None:
        return ServerThread(listener, make_connection)
    return LoopServer(loop, listener, make_connection)


def message_framed(transport: Transport) -> bool:
    """A message transport (WebSocket) says so; byte streams have no such flag."""
    return bool(getattr(transport, "message_framed", False))


class DrivenPeer:
    """One connection as the application sees it, whatever the protocol: its
    calls run on the thread that drives the connection. Thread-safe."""

    def __init__(self, driver: Driver) -> None:
        self._thread = driver

    def _submit(self, fn: Callable[[], object], timeout: float | None = None) -> None:
        if self._thread.is_owner:
            fn()  # called from the connection thread itself (a handler, a publisher)
        else:
            self._thread.call_soon(fn, timeout)

    @property
    def closed(self) -> bool:
        return not self._thread.alive

    def close(self, timeout: float | None = 5.0) -> None:
        """Graceful: the protocol's goodbye (RSocket ERROR[CONNECTION_CLOSE], rsio
        goodbye, WebSocket close), flush, close. Outstanding requests fail."""
        self._thread.close(timeout)

    def abort(self, timeout: float | None = 5.0) -> None:
        """Abrupt: reset the connection at once."""
        self._thread.abort(timeout)

    def wait_closed(self, timeout: float | None = None) -> bool:
        return self._thread.join(timeout)


class ListeningServer:
    """What every protocol's listening server offers: its URL, a graceful (or
    aborting) close, waiting for the end, and ``with`` (closes on exit)."""

    def __init__(self, accept: LoopServer) -> None:
        self._accept = accept
        self.endpoint: Endpoint = accept.listener.endpoint

    @property
    def url(self) -> str:
        return self.endpoint.url

    def close(self, timeout: float = 5.0, *, abort: bool = False) -> None:
        """Stop accepting and close every connection (``abort``: reset them)."""
        self._accept.close(timeout, abort=abort)

    def wait_closed(self, timeout: float | None = None) -> bool:
        return self._accept.wait_closed(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PeersServer(ListeningServer, Generic[P]):
    """A :class:`ListeningServer` that keeps a peer object per connection
    (``make_connection`` appends it to ``peers``, its driver's exit removes it)."""

    def __init__(self, accept: LoopServer, peers: list[P]) -> None:
        super().__init__(accept)
        self._peers = peers

    @property
    def peers(self) -> list[P]:
        """Live connections (e.g. for server-initiated requests)."""
        return [p for p in list(self._peers) if not p.closed]
