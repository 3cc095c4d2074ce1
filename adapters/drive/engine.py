"""The engine contract: what a protocol engine offers every driver, and what
a driver offers engines and application-facing peers.

Every protocol (``rsocket``, ``rsio``, ``ditto``) implements :class:`Engine`;
every driver (a thread per connection, the ``selectors`` loop, asyncio) runs
any engine through it and implements :class:`Driver`. Nothing here knows a
wire protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..transport import Transport

__all__ = ["Call", "Driver", "Engine", "Startable"]


class Engine(Protocol):
    """What a protocol engine offers a driver. Called on the owning thread only.

    An engine may also have a ``handshaken`` attribute (False while a server
    waits for the protocol's opening: RSocket SETUP, the rsio hello); the
    drivers drop a connection whose handshake exceeds
    ``LoopConfig.handshake_timeout``. And a ``quiet()`` method: True when
    ``pump`` would do nothing and ``data_to_send`` is empty (a direct call
    that read its answer then skips both). And a ``settled`` attribute: set
    by a ``receive_data`` (or a request written at once) that moved no
    deadline earlier, only the keepalive's, later (a lone request answered
    at once, a lone answer taken whole): the driver then need not ask
    ``next_deadline`` whether a turn is owed; it clears it. And a
    ``pieces_to_send(at_least)`` method: ``data_to_send()`` as a list of
    pieces, not joined, when at least that many bytes are queued (None
    otherwise): a transport with ``send_pieces`` writes them at once; such
    an engine also has ``queued_output`` (bytes it holds unsent: a driver
    whose socket is full leaves them there, and counts them against
    ``LoopConfig.high_water`` with its own)."""

    def receive_data(self, data: bytes, now: float) -> None:
        """Bytes from the peer (``b""`` at end of stream): parse and dispatch."""

    def pump(self) -> bool:
        """Produce outbound items within the peer's credit. True if more is ready now."""

    def data_to_send(self) -> bytes: ...

    def next_deadline(self) -> float | None: ...

    def handle_timeout(self, now: float) -> None: ...

    def wants_close(self) -> bool:
        """True once the engine is done: flush what is queued, then close."""

    def close_reason(self) -> BaseException | None:
        """Why the engine wants to close (given to callers that arrive late)."""

    def begin_close(self) -> None:
        """A graceful close was asked locally: queue any goodbye for the peer."""

    def connection_lost(self, error: BaseException) -> None:
        """Fail everything outstanding with ``error``; the loop is ending."""


Call = Callable[[], object]


class Driver(Protocol):
    """What engines and peers need from whatever drives a connection
    (:class:`~.connection.LoopConnection`, :class:`~.threads.ConnectionThread`).
    Every method is safe from any thread."""

    @property
    def transport(self) -> Transport: ...

    @property
    def error(self) -> BaseException | None:
        """Why the connection ended (``None`` while it runs)."""

    @property
    def is_owner(self) -> bool:
        """True on the thread that drives the engine (calls run inline there)."""

    @property
    def alive(self) -> bool: ...

    def call_soon(self, fn: Call, timeout: float | None = None) -> None:
        """Run ``fn()`` on the owning thread; :class:`ConnectionClosed` once gone."""

    def wake(self) -> None:
        """Make the owner run a turn for this connection (a source has items)."""

    def close(self, timeout: float | None = 5.0) -> None:
        """Graceful; from another thread, returns once ended: reset after
        ``timeout`` (``0``: no wait), ``TimeoutError`` if even that fails."""

    def abort(self, timeout: float | None = 5.0) -> None:
        """Reset; from another thread, ``TimeoutError`` if not ended within ``timeout``."""

    def join(self, timeout: float | None = None) -> bool: ...


class Startable(Protocol):
    """A driver a server starts and tracks (:class:`LoopConnection`, ``ConnectionThread``)."""

    @property
    def alive(self) -> bool: ...

    @property
    def handshaken(self) -> bool:
        """The transport and protocol openings are done (False: a server
        may shed it under descriptor pressure, see ``LoopConfig.shed_batch``)."""

    def add_exit_callback(self, fn: Callable[[Any], None]) -> None:
        """Call ``fn(driver)`` when the connection ends (before it starts,
        or on its owning thread)."""

    def start(self) -> None: ...

    def close(self, timeout: float | None = 5.0) -> None: ...

    def abort(self, timeout: float | None = 5.0) -> None: ...

    def join(self, timeout: float | None = None) -> bool: ...
