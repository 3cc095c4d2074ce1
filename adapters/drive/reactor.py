"""What a driven connection needs from whatever runs it: the :class:`Reactor`.

A reactor is one thread's event source: it watches file descriptors, keeps
timers, runs calls handed over by other threads and tells each connection
(:class:`~.connection.LoopConnection`) and listener
(:class:`~.listener.LoopServer`) when to act. The connection's turn (read,
engine, pump, write, timeouts, close) is written once, in
:mod:`.connection`; reactors differ only in where readiness and time come
from:

- :class:`~.selector.Loop`: a ``selectors`` loop on a thread of its own (and,
  holding one connection, :class:`~.threads.ConnectionThread`);
- :class:`~.aio.AsyncioReactor`: a running asyncio event loop
  (``add_reader`` / ``add_writer`` / ``call_at``).

Nothing here knows a wire protocol.
"""

from __future__ import annotations

import selectors
from collections.abc import Callable
from typing import Protocol

from .config import LoopConfig

__all__ = ["READ", "WRITE", "Driven", "Listening", "Reactor"]

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE


class Driven(Protocol):
    """A connection as its reactor sees it (:class:`~.connection.LoopConnection`).
    The flags are the reactor's bookkeeping, kept on the connection so that
    a turn costs no dictionary look-up."""

    #: A turn is queued for it (``service`` will run once, however often asked).
    scheduled: bool
    #: A wake-up is on its way to the reactor (cleared before the turn).
    woken: bool
    #: The deadline its reactor timer was last set for (lazy deletion).
    timer: float | None

    def on_io(self, mask: int, now: float) -> None:
        """Its descriptor is ready (``READ`` / ``WRITE`` bits); a turn follows
        unless :meth:`needs_turn` says there is nothing for it to do."""

    def needs_turn(self) -> bool:
        """After a read or a write: whether a turn has anything to do."""

    def service(self, now: float) -> None:
        """Run one turn: calls, timers, pump, write, close."""

    def kill(self, error: BaseException) -> None:
        """The reactor is going away: end at once with ``error``."""


class Listening(Protocol):
    """A listener as its reactor sees it (:class:`~.listener.LoopServer`)."""

    def on_acceptable(self) -> None: ...

    def kill(self) -> None:
        """The reactor is going away: stop listening."""


class Reactor(Protocol):
    """The thread that drives connections and listeners (see the module notes).
    Methods marked "owner" are called on the reactor's thread only."""

    config: LoopConfig
    name: str
    #: The reactor thread's ``threading.get_ident()`` (None while none runs it):
    #: read by a connection's ``is_owner`` without a call (asked per fire_and_forget).
    _ident: int | None

    @property
    def in_loop_thread(self) -> bool:
        """True on the reactor's thread."""

    @property
    def started(self) -> bool:
        """True once a thread other than the caller may be running the reactor
        (registration must then be handed over with :meth:`call_soon`)."""

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Any thread: run ``fn()`` on the reactor's thread soon (``LoopClosed``
        once it has stopped)."""

    def watch(self, fd: int, events: int, conn: Driven) -> None:
        """Owner: the readiness of ``fd`` to report to ``conn`` (``READ`` /
        ``WRITE`` bits; 0: none). Called only when the interest changes."""

    def watch_listener(self, fd: int, server: Listening | None) -> None:
        """Owner: report ``fd`` readable to ``server`` (``None``: stop)."""

    def service_soon(self, conn: Driven) -> None:
        """Owner: run a turn for ``conn`` without waiting for I/O."""

    def wake(self, conn: Driven) -> None:
        """Any thread: run a turn for ``conn`` soon (the connection coalesces
        wake-ups: this is called once per wake-up it has not yet seen)."""

    def set_timer(self, conn: Driven, when: float) -> None:
        """Owner: run a turn for ``conn`` at monotonic time ``when`` (earlier
        than the timer it had, if any)."""

    def add(self, conn: Driven) -> None:
        """Owner: ``conn`` is registered (stopped with the reactor)."""

    def discard(self, conn: Driven) -> None:
        """Owner: ``conn`` has ended."""

    def add_server(self, server: Listening) -> None: ...

    def discard_server(self, server: Listening) -> None: ...

    def stop(self, timeout: float | None = 5.0, *, abort: bool = False) -> bool:
        """Close what the reactor drives, gracefully unless ``abort``."""
