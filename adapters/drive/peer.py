"""What every protocol's application-facing objects share: a connection as
the application sees it (:class:`DrivenPeer`: calls handed to the thread that
drives it, graceful close, abort, waiting for the end) and a listening server
(:class:`ListeningServer`, :class:`PeersServer`). Nothing here knows a wire
protocol."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, Generic, Protocol, Self, TypeVar, cast

from ..transport.urls import Endpoint
from .engine import Driver
from .listener import LoopServer

__all__ = ["DrivenPeer", "ListeningServer", "PeersServer", "carrying_context"]


def _answered() -> bool:
    return True  # a direct call that waits for nothing


class _Peer(Protocol):
    @property
    def closed(self) -> bool: ...


P = TypeVar("P", bound=_Peer)


class DrivenPeer:
    """One connection as the application sees it, whatever the protocol: its
    calls run on the thread that drives the connection. Thread-safe; a
    context manager that closes on exit."""

    def __init__(self, driver: Driver) -> None:
        self._thread = driver

    def _submit(self, fn: Callable[[], object], timeout: float | None = None) -> None:
        if self._thread.is_owner:
            fn()  # called from the connection thread itself (a handler, a publisher)
        else:
            self._thread.call_soon(fn, timeout)

    def _submit_direct(self, fn: Callable[[], object], timeout: float | None = None) -> None:
        """:meth:`_submit`, but while the connection is idle ``fn`` runs on
        this thread and what it queued is written at once (a direct call
        that waits for nothing): no hand-over to the connection's thread,
        no wake-up of it. A stream's consumer asks for more this way."""
        thread = self._thread
        if thread.is_owner:
            fn()
        elif not self._call_direct(fn, _answered, 0.0):
            thread.call_soon(fn, timeout)

    def _call_direct(
        self, fn: Callable[[], object], until: Callable[[], bool], timeout: float | None
    ) -> bool:
        """Run ``fn`` on this thread and read the connection here until
        ``until()`` or ``timeout`` (:meth:`.LoopConnection.call_direct`), if
        the driver allows it and the connection is idle; False: nothing was
        done (hand ``fn`` over instead)."""
        direct = getattr(self._thread, "call_direct", None)  # (the driver of the moment)
        return direct is not None and bool(direct(fn, until, timeout))

    def move_to(self, driver: Driver) -> None:
        """From now on ``driver`` drives this connection (a resumed RSocket
        session taken over by a new transport's driver)."""
        self._thread = driver

    @property
    def closed(self) -> bool:
        return not self._thread.alive

    def close(self, timeout: float | None = 5.0) -> None:
        """Graceful: the protocol's goodbye (RSocket ERROR[CONNECTION_CLOSE], rsio
        goodbye, WebSocket close), flush, close. Outstanding requests fail.
        Returns once closed, within ``timeout`` seconds: a connection the
        graceful close could not end by then is reset (``TimeoutError`` if
        even that cannot happen: the thread driving it runs no turn)."""
        self._thread.close(timeout)

    def abort(self, timeout: float | None = 5.0) -> None:
        """Abrupt: reset the connection at once."""
        self._thread.abort(timeout)

    def wait_closed(self, timeout: float | None = None) -> bool:
        return self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _CarryingContext:
    """A driver whose ``call_soon`` runs each call in the calling thread's
    ``contextvars`` context (copied at the call); everything else is the
    driver's own."""

    __slots__ = ("driver",)

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def call_soon(self, fn: Callable[[], object], timeout: float | None = None) -> None:
        self.driver.call_soon(_in_context(contextvars.copy_context(), fn), timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.driver, name)


def _in_context(context: contextvars.Context, fn: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        context.run(fn)

    return run


def carrying_context(driver: Driver) -> Driver:
    """``driver``, its hand-overs carrying the caller's ``contextvars``: what
    the connection's thread runs for a call made on another thread sees the
    caller's context variables (e.g. the current tracing span). Calls run
    inline on the owning thread keep its context as they are."""
    if isinstance(driver, _CarryingContext):
        return driver
    return cast(Driver, _CarryingContext(driver))


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
