"""Direct calls: the latency path of a :class:`~.connection.LoopConnection`
(its methods, bound in its class). A thread that wants one request and its
answer takes the connection while it is idle, runs the call, writes, and
reads the socket itself until the answer arrives, the timeout passes or the
reactor needs the connection back: no hand-over to the reactor's thread and
back (docs/architecture.md, Threads). :meth:`~.connection.LoopConnection.call_direct`
is the general form; ``direct_begin`` ... ``direct_end`` the express one, for
an engine that writes its request itself."""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from .engine import Call, Engine
from .queues import Inbox, Wakeup
from .reactor import READ, Reactor

log = logging.getLogger("sansrs.adapters")

#: Longest wait of a direct call between checks that nothing else needs the
#: connection (a safety net: the reactor and other threads wake it at once).
_DIRECT_SLICE = 1.0
_wakers = threading.local()


def _thread_poller(fd: int) -> tuple[Wakeup, Any]:
    """This thread's wake-up for its direct calls and a poll object that
    watches it and ``fd`` (one per thread, not per connection: ten thousand
    connections must not cost twenty thousand descriptors; closed with the
    thread's locals)."""
    waker: Wakeup | None = getattr(_wakers, "waker", None)
    if waker is None:
        waker = _wakers.waker = Wakeup()
        _wakers.poller = select.poll()
        _wakers.poller.register(waker.fileno(), select.POLLIN)
        _wakers.fd = -1
    poller = _wakers.poller
    if _wakers.fd != fd:
        if _wakers.fd >= 0:
            poller.unregister(_wakers.fd)
        poller.register(fd, select.POLLIN)
        _wakers.fd = fd
    return waker, poller


class Direct(Protocol):
    """The connection as its direct calls see it (each attribute documented
    where :class:`~.connection.LoopConnection` defines it)."""

    engine: Engine
    _loop: Reactor
    _fd: int
    _drive: threading.Lock
    _inbox: Inbox[Call]
    _out: bytearray
    _rest_size: int
    _held: Callable[[], int] | None
    _quiet: Callable[[], bool] | None
    _wants_close: Callable[[], bool]
    _interest: int
    _deadline: float | None
    _last_io: float
    _direct_ok: bool
    _direct_ident: int | None
    _direct_waker: Wakeup | None
    _missed: bool
    _wrote: bool
    _done: bool
    _abort: bool
    _eof: bool
    _stopping: bool
    _send_error: OSError | None

    def wake(self) -> None: ...

    def _below_high_water(self) -> bool: ...

    def write_now(self) -> None: ...

    def _write(self, data: bytes) -> None: ...

    def _read(self, now: float) -> None: ...

    def _recv(self, now: float) -> bytes | None: ...

    def _feed(self, data: bytes, now: float) -> None: ...

    def _run_calls(self) -> None: ...

    def _flush(self, now: float) -> None: ...

    def _idle_for_direct(self, now: float) -> bool: ...

    def _wait_direct(
        self, until: Callable[[], bool], timeout: float | None, now: float
    ) -> float: ...

    def _rearm_if_earlier(self) -> bool: ...

    def _end_direct(self, now: float) -> None: ...


# -- direct calls (any thread) ----------------------------------------------
def call_direct(self: Direct, call: Call, until: Callable[[], bool], timeout: float | None) -> bool:
    """The latency path: run ``call`` on this thread, write what it
    queued, then read the socket here until ``until()`` (the answer it
    waits for has arrived), ``timeout`` seconds pass, or the reactor needs
    the connection back. The reactor takes no part: no hand-over to its
    thread and back (docs/architecture.md, Threads).

    Only while the connection is idle: False (nothing done) if the
    reactor is running a turn for it or another thread is in a direct
    call, or the reactor does not allow direct calls; the caller then
    hands ``call`` over with :meth:`call_soon`. Calls other threads
    queued before it run first, here. True once ``call`` ran
    here: what it waits for arrives in its sink either way (read here,
    or by the reactor after a hand-back)."""
    if self._done or not self._direct_ok:
        return False
    if not self._drive.acquire(False):
        return False
    wait = False
    interest = self._interest
    now = 0.0
    try:
        if self._done:
            return False
        self._direct_ident = threading.get_ident()
        if self._inbox.items:  # calls queued before this one go first
            self._run_calls()
        # The reactor stops watching the socket before the request goes:
        # the answer is this thread's to read (a reactor woken by it would
        # find the connection taken and have to hand it back). Not for a
        # call that waits for nothing (``timeout`` 0: a stream's REQUEST_N).
        loop: Any = self._loop
        now = time.monotonic()
        wait = timeout != 0 and bool(interest & READ) and self._idle_for_direct(now)
        if wait:
            loop.pause(self._fd)
        try:
            call()
        except Exception:
            # An application call that misuses the core fails alone.
            log.exception("direct call on the connection failed")
            return True
        self._flush(now)
        if wait and not self._out and not until():
            now = self._wait_direct(until, timeout, now)
    finally:
        if wait and not self._done:
            loop.resume(self._fd, interest, self)
        self._end_direct(now)
    return True


# -- the latency path: one request and its answer (any thread) ---------------
def direct_begin(self: Direct) -> float | None:
    """Take the connection for one request and its answer on this thread
    (the express form of :meth:`call_direct`, for an engine that writes a
    request itself: ``RSocketPeer.request_response``). Only when nothing
    else is going on: not on the reactor's thread, no turn running, no
    other thread's call queued, everything written, the engine quiet, no
    timer due, the socket watched for reading. Returns the time, the
    reactor no longer watching the socket until :meth:`direct_end`;
    None: nothing taken."""
    if self._done or not self._direct_ok or not self._drive.acquire(False):
        return None
    now = time.monotonic()
    ident = threading.get_ident()
    quiet = self._quiet
    if (
        self._done
        or self._loop.in_loop_thread  # (the owner: the general path says why not)
        or self._inbox.items
        or not self._interest & READ
        or quiet is None
        or not quiet()
        or (self._held is not None and self._held())
        or not self._idle_for_direct(now)
    ):
        self._end_direct(now)  # (hands over to a reactor that missed it meanwhile)
        return None
    self._direct_ident = ident
    self._loop.pause(self._fd)  # type: ignore[attr-defined]
    return now


def direct_exchange(
    self: Direct, data: bytes, now: float, deadline: float | None
) -> tuple[bytes, float] | None:
    """Direct call: write ``data`` (the engine's whole output), wait until
    the socket is readable (at most until ``deadline``) and read it once:
    (the bytes, ``b""`` at the end; the time). None when it went
    otherwise (the socket took a part of ``data``, the rest waiting for
    the reactor; the deadline; the reactor or another thread's call
    needs the connection; a failed write or read): :meth:`direct_wait`
    sorts it out."""
    self._write(data)
    if self._out or self._send_error is not None:
        return None
    self._wrote = False  # (stamped here, not at the next turn)
    self._last_io = now
    fd = self._fd
    waker, poller = _thread_poller(fd)
    self._direct_waker = waker
    wait = _DIRECT_SLICE if deadline is None else min(_DIRECT_SLICE, deadline - now)
    if wait <= 0 or self._missed:  # (a reactor that missed before the waker was set)
        return None
    ready = poller.poll(wait * 1000)
    if self._missed or len(ready) != 1 or ready[0][0] != fd:
        return None
    now = time.monotonic()
    read = self._recv(now)
    return None if read is None else (read, now)


def direct_wait(
    self: Direct, read: bytes | None, until: Callable[[], bool], deadline: float | None, now: float
) -> float:
    """Direct call, when the express read was not the answer: feed what
    was ``read``, write what it caused, and wait here as
    :meth:`call_direct` does until ``until()`` or ``deadline``. Returns
    the time of the last wake-up."""
    if read is not None:
        self._feed(read, now)
        self._rearm_if_earlier()
    if not self._done:
        quiet = self._quiet
        if quiet is None or not quiet():
            self._flush(now)
        if not (self._out or self._send_error is not None or until() or self._wants_close()):
            timeout = None if deadline is None else max(0.0, deadline - now)
            now = self._wait_direct(until, timeout, now)
    return now


def direct_end(self: Direct, now: float) -> None:
    """Give the connection back after :meth:`direct_begin`."""
    if not self._done:
        self._loop.resume(self._fd, self._interest, self)  # type: ignore[attr-defined]
    self._end_direct(now)


def idle_for_direct(self: Direct, now: float) -> bool:
    """Nothing for the reactor to do at ``now``: all written, no timeout due."""
    deadline = self._deadline
    return not (
        self._out
        or self._missed
        or self._abort
        or self._eof
        or self._stopping
        or self._send_error is not None
        or (deadline is not None and deadline <= now)
        or self._wants_close()
    )


def flush(self: Direct, now: float) -> None:
    """Driving thread (direct call): pump what is ready and write it."""
    if self._below_high_water():
        self.engine.pump()
    self.write_now()
    if self._wrote:
        self._wrote = False
        self._last_io = now


def wait_direct(
    self: Direct, until: Callable[[], bool], timeout: float | None, now: float
) -> float:
    """Read the socket on this thread until ``until()``, the timeout, or
    the reactor (or another thread's call) needs the connection. Returns
    the time of the last wake-up."""
    fd = self._fd
    waker, poller = _thread_poller(fd)
    self._direct_waker = waker
    deadline = None if timeout is None else now + timeout
    monotonic = time.monotonic
    try:
        while True:
            # (wants_close: the read brought the end, e.g. an ERROR on
            # stream 0 from a peer that keeps the socket open; the turn
            # that follows the hand-back fails the call with its reason.)
            if self._missed or self._done or self._abort or self._eof or self._wants_close():
                return now
            if deadline is None:
                wait = _DIRECT_SLICE
            else:
                wait = min(_DIRECT_SLICE, deadline - now)
                if wait <= 0:
                    return now
            ready = poller.poll(wait * 1000)
            now = monotonic()
            if self._missed:  # the reactor wants it: it reads from now on
                return now
            for ready_fd, _ in ready:
                if ready_fd == fd:
                    self._read(now)
                else:
                    waker.clear()
                    if self._inbox.items:  # another thread's calls: run them here
                        self._run_calls()
            if self._done:
                return now
            quiet = self._quiet
            if quiet is None or not quiet() or (self._held is not None and self._held()):
                self._flush(now)  # what the input caused (a KEEPALIVE answer...)
                if self._send_error is not None or self._out:
                    return now  # the reactor finishes or waits for WRITE
            if until() or self._wants_close() or self._rearm_if_earlier():
                return now
    finally:
        self._direct_waker = None


def rearm_if_earlier(self: Direct) -> bool:
    """Direct call, after a read that did not answer it: True (and the
    connection marked for a turn, so the wait hands over) when the
    engine's deadline moved earlier than the one armed (e.g. the grace a
    peer's CONNECTION_CLOSE gives open streams): only a turn arms it."""
    deadline = self.engine.next_deadline()
    armed = self._deadline
    if deadline is None or (armed is not None and deadline >= armed):
        return False
    self._missed = True
    return True


def end_direct(self: Direct, now: float) -> None:
    """Give the connection back; a turn runs if one is due (``now``: the
    time of the direct call's last wake-up)."""
    self._direct_ident = None
    self._direct_waker = None
    due = bool(self._inbox.items) or not self._idle_for_direct(now)
    self._missed = False
    self._drive.release()
    # Re-checked after the release: a reactor that found the connection
    # taken in between set _missed, and finds it free from now on.
    if due or self._missed or self._inbox.items:
        self._missed = False
        self.wake()
