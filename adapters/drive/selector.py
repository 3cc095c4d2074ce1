"""The ``selectors`` reactor: one thread drives many connections.

A :class:`Loop` owns one selector, one :class:`~.queues.Wakeup` and a heap of
timers; its connections (:class:`~.connection.LoopConnection`) and listeners
(:class:`~.listener.LoopServer`) run their turn when it says so. Every
iteration: ``select`` (timeout = the earliest timer) -> read what is
readable -> run calls handed over by application threads -> fire due timers
-> a turn for each connection touched.

* Timers: each connection's earliest deadline is kept in one heap (lazy
  deletion, compacted when stale entries pile up).
* Wake-ups: application threads wake a connection (its
  :class:`~.queues.Inbox` has a call, a source has items); the loop is woken
  through one shared socketpair, once per burst.

The same loop serves the thread-per-connection driver:
:class:`~.threads.ConnectionThread` is a :class:`Loop` holding exactly one
connection on its own thread. It is also the model for plugging a core into
any custom event loop (``examples/custom_loop.py``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import math
import select
import selectors
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from ..transport import Transport
from .config import LoopConfig
from .connection import LoopConnection, close_all
from .engine import Call, Engine
from .errors import ConnectionClosed, LoopClosed
from .queues import Wakeup
from .reactor import READ, WRITE, Driven, Listening

__all__ = ["Loop", "default_loop"]

_get_ident = threading.get_ident  # (a global less per in_loop_thread: per fire_and_forget)
_NOT_IN = ~select.EPOLLIN
_NOT_OUT = ~select.EPOLLOUT

log = logging.getLogger("sansrs.adapters")


class Loop:
    """One thread, many connections (a :class:`~.reactor.Reactor`).
    ``start()`` runs it on a daemon thread; ``run()`` on the calling thread
    until :meth:`stop`."""

    #: Another thread may drive one of its connections for a while
    #: (:meth:`.LoopConnection.call_direct`): ``watch`` may then be called
    #: from that thread (the selector's registrations are changed by single
    #: system calls, its table under the GIL).
    direct_calls = True

    @property
    def idempotent_pause(self) -> bool:
        """:meth:`pause` and :meth:`resume` may be repeated in any order by
        the loop and a thread in a direct call (epoll: each sets the
        kernel's interest; other selectors unregister and register)."""
        return self._epoll is not None

    def __init__(self, config: LoopConfig | None = None, *, name: str = "sansrs-loop") -> None:
        self.config = config or LoopConfig()
        self.name = name
        self._sel = selectors.DefaultSelector()
        # The epoll object under an EpollSelector: pause() / resume() change
        # the kernel's interest in one call, without the selector's Python
        # bookkeeping (the latency path of a direct call).
        self._epoll: Any = (
            getattr(self._sel, "_selector", None)
            if isinstance(self._sel, selectors.EpollSelector)
            else None
        )
        #: The selector's fd -> key table (what ``_ready`` looks keys up in).
        self._keys: Any = getattr(self._sel, "_fd_to_key", {})
        self._wakeup = Wakeup()
        self._sel.register(self._wakeup.fileno(), READ, None)
        self._calls: deque[Call] = deque()
        self._woken: deque[Driven] = deque()
        self._next: list[Driven] = []  # to service on the next turn, no wait
        self._timers: list[tuple[float, int, weakref.ref[Driven]]] = []
        self._seq = itertools.count()
        self._connections: set[Driven] = set()
        self._servers: set[Listening] = set()
        self._thread: threading.Thread | None = None
        self._ident: int | None = None
        self._stopping = False
        self._stopped = threading.Event()
        self._lock = threading.Lock()

    # -- any thread ----------------------------------------------------------
    def start(self) -> Loop:
        """Run the loop on a new daemon thread (named after the loop)."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("loop already started")
            self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()
        return self

    @property
    def in_loop_thread(self) -> bool:
        return _get_ident() == self._ident

    @property
    def started(self) -> bool:
        return self._thread is not None or self._ident is not None

    @property
    def running(self) -> bool:
        return self._ident is not None and not self._stopped.is_set()

    @property
    def connections(self) -> list[LoopConnection]:
        # tuple() copies in one C call (the loop thread may add or discard
        # meanwhile); iterating the set itself from another thread could fail.
        return [c for c in tuple(self._connections) if isinstance(c, LoopConnection)]

    def call_soon(self, fn: Call) -> None:
        """Run ``fn()`` on the loop thread soon. Raises :class:`LoopClosed` once stopped."""
        if self._stopped.is_set() or self._stopping:
            raise LoopClosed(f"loop {self.name} is stopped")
        self._calls.append(fn)
        self._wakeup.wake()

    def wake(self, conn: Driven) -> None:
        self._woken.append(conn)
        if threading.get_ident() != self._ident:
            self._wakeup.wake()

    def add_connection(
        self,
        transport: Transport,
        engine: Engine,
        *,
        on_exit: Callable[[LoopConnection], None] | None = None,
        inbox_capacity: int | None = None,
    ) -> LoopConnection:
        """A connection driven by this loop; it starts on :meth:`LoopConnection.start`."""
        return LoopConnection(
            self,
            transport,
            engine,
            inbox_capacity=inbox_capacity or self.config.inbox_capacity,
            on_exit=on_exit,
        )

    def stop(self, timeout: float | None = 5.0, *, abort: bool = False) -> bool:
        """Close every server and connection (gracefully unless ``abort``; those
        still open after ``timeout`` are aborted), then end the loop.
        Returns True once the loop has ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for server in list(self._servers):
            server.kill() if self.in_loop_thread else self._kill_server_soon(server)
        conns = self.connections
        close_all(conns, abort=abort)
        if not self.in_loop_thread:
            for conn in conns:
                conn.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            for conn in conns:
                conn.abort(timeout=0)
        self._stopping = True
        self._wakeup.wake()
        if self.in_loop_thread or not self.started:
            if self._ident is None:
                self._close_resources()
            return self._stopped.is_set()
        left = None if deadline is None else max(0.1, deadline - time.monotonic())
        return self._stopped.wait(left)

    def _kill_server_soon(self, server: Listening) -> None:
        with contextlib.suppress(LoopClosed):
            self.call_soon(server.kill)

    def stop_soon(self) -> None:
        """Loop thread: end the loop after this turn (connections still open are aborted)."""
        self._stopping = True

    def wait_stopped(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    # -- owner (Reactor) -----------------------------------------------------
    def watch(self, fd: int, events: int, conn: Driven) -> None:
        sel = self._sel
        try:
            key = sel.get_key(fd)
        except KeyError:
            if events:
                sel.register(fd, events, conn)
            return
        if not events:
            sel.unregister(fd)
        elif key.events != events or key.data is not conn:
            sel.modify(fd, events, conn)

    def pause(self, fd: int) -> None:
        """Any thread in a direct call on ``fd``'s connection: stop reporting
        ``fd`` until :meth:`resume` (its registration stays). With epoll, one
        system call on the kernel's interest list (the selector's table of
        keys is left alone, so the loop thread sees the same key after)."""
        if self._epoll is not None:
            self._epoll.modify(fd, 0)
        else:
            self._sel.unregister(fd)

    def resume(self, fd: int, events: int, conn: Driven) -> None:
        """Undo :meth:`pause`: report ``events`` of ``fd`` to ``conn`` again."""
        if self._epoll is not None:
            self._epoll.modify(fd, (select.EPOLLIN if events & READ else 0)
                               | (select.EPOLLOUT if events & WRITE else 0))
        else:
            self._sel.register(fd, events, conn)

    def watch_listener(self, fd: int, server: Listening | None) -> None:
        if server is None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(fd)
        else:
            self._sel.register(fd, READ, server)

    def service_soon(self, conn: Driven) -> None:
        conn.scheduled = True
        self._next.append(conn)

    def set_timer(self, conn: Driven, when: float) -> None:
        timers = self._timers
        # A weak reference: an ended connection's timers (stale ones stay in
        # the heap until due) must not keep it, its engine and its handler.
        heapq.heappush(timers, (when, next(self._seq), weakref.ref(conn)))
        # A connection's earlier timers stay in the heap until due (they
        # are stale once it sets another): bounded here, where they grow.
        if len(timers) > 64 + 4 * len(self._connections):
            self._compact_timers()

    def add(self, conn: Driven) -> None:
        self._connections.add(conn)

    def discard(self, conn: Driven) -> None:
        self._connections.discard(conn)

    def add_server(self, server: Listening) -> None:
        self._servers.add(server)

    def discard_server(self, server: Listening) -> None:
        self._servers.discard(server)

    # -- the loop ------------------------------------------------------------
    def run(self) -> None:
        """Drive the loop on this thread until :meth:`stop`."""
        if self._ident is not None:
            raise RuntimeError("loop already running")
        self._ident = threading.get_ident()
        try:
            while not self._stopping:
                self._run_once()
        except Exception:
            log.exception("loop %s failed", self.name)
        finally:
            for conn in list(self._connections):
                conn.kill(ConnectionClosed("connection aborted: loop stopped"))
            for server in list(self._servers):
                server.kill()
            self._close_resources()

    def _close_resources(self) -> None:
        for fn in self._drain_calls():
            with contextlib.suppress(Exception):
                fn()
        self._sel.close()
        self._wakeup.close()
        self._stopped.set()

    def _drain_calls(self) -> list[Call]:
        calls = self._calls
        return [calls.popleft() for _ in range(len(calls))]

    def _run_once(self) -> None:
        config = self.config
        if self._next or self._woken or self._calls:
            wait: float | None = 0.0
        elif self._timers:
            wait = min(config.max_idle_wait, max(0.0, self._timers[0][0] - time.monotonic()))
        else:
            wait = config.max_idle_wait
        events = self._ready(wait)
        now = time.monotonic()
        timers = self._timers
        if (
            len(events) == 1
            and not (self._next or self._woken or self._calls)
            and (not timers or timers[0][0] > now)
        ):
            # One connection readable and nothing else to do (a request or
            # an answer of a sequential exchange): its read-and-turn, without
            # the general pass below (docs/performance.md, "Latency").
            obj, mask = events[0]
            if type(obj) is LoopConnection and mask == READ and not obj.scheduled:
                obj.service(now, True)
                return
        todo, self._next = self._next, []
        for obj, mask in events:
            if obj is None:
                self._wakeup.clear()
            elif type(obj) is LoopConnection:
                if obj.scheduled or not mask & READ:
                    obj.on_io(mask, now)  # its turn is queued already, or comes below
                    if not obj.scheduled:
                        obj.scheduled = True
                        todo.append(obj)
                else:
                    # Readable: read and run its turn at once, one pass under
                    # its drive lock (docs/performance.md, "Latency").
                    obj.service(now, True)
            else:
                obj.on_acceptable()
        if self._calls:
            for fn in self._drain_calls():
                try:
                    fn()
                except Exception:
                    log.exception("call on loop %s failed", self.name)
        woken = self._woken
        while woken:
            conn = woken.popleft()
            conn.woken = False  # before its inbox is drained: a later wake re-queues it
            if not conn.scheduled:
                conn.scheduled = True
                todo.append(conn)
        while timers and timers[0][0] <= now:
            when, _, ref = heapq.heappop(timers)
            due = ref()
            if due is not None and due.timer == when:
                due.timer = None
                if not due.scheduled:
                    due.scheduled = True
                    todo.append(due)
        for conn in todo:
            conn.scheduled = False
            conn.service(now)

    def _ready(self, wait: float | None) -> list[tuple[Any, int]]:
        """(registered object, READ/WRITE mask) of each ready descriptor.
        With epoll, straight from ``epoll.poll`` and the selector's own table
        of keys (``selectors`` builds a key tuple per event on top: a few
        microseconds per wait, the order of a whole round trip's budget)."""
        epoll = self._epoll
        if epoll is None:
            return [(key.data, mask) for key, mask in self._sel.select(wait)]
        if wait is None:
            wait = -1
        elif wait > 0:
            wait = math.ceil(wait * 1e3) * 1e-3  # as selectors: never wake early
        try:
            ready = epoll.poll(wait, len(self._keys) or 1)
        except InterruptedError:
            return []
        keys = self._keys
        out = []
        for fd, event in ready:
            key = keys.get(fd)
            if key is not None:
                # As selectors: an error or hang-up is both readable and writable.
                mask = (WRITE if event & _NOT_IN else 0) | (READ if event & _NOT_OUT else 0)
                out.append((key.data, mask & key.events))
        return out

    def _compact_timers(self) -> None:
        live = [
            (timer, next(self._seq), weakref.ref(conn))
            for conn in self._connections
            if (timer := conn.timer) is not None
        ]
        heapq.heapify(live)
        self._timers[:] = live  # in place: a pass in progress holds the list


_default: Loop | None = None
_default_lock = threading.Lock()


def default_loop() -> Loop:
    """The process-wide selector loop (started on first use, a daemon thread):
    what ``connect(url, loop="selector")`` and ``serve(..., loop="selector")`` use."""
    global _default
    with _default_lock:
        if _default is None or _default._stopped.is_set() or _default._stopping:
            _default = Loop(name="sansrs-selector").start()
        return _default
