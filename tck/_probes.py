"""The waiting primitives of the kit: latches, promises and receptacles.

Every wait ends early when a rule violation is recorded meanwhile (on any
thread), so a test reports the broken rule at once rather than a timeout.
Each wait declares itself (``env.doing``) for the deadline report.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Generic, TypeVar

from ._env import TestEnvironment

__all__ = ["END", "Latch", "Promise", "Receptacle"]

V = TypeVar("V")

_WAKE_SECONDS = 0.02


class Latch:
    """A one-shot gate: ``close()`` once, wait for it with ``expect_close``."""

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._event = threading.Event()

    def close(self) -> None:
        self._event.set()

    def is_closed(self) -> bool:
        return self._event.is_set()

    def assert_open(self, message: str) -> None:
        if self._event.is_set():
            self._env.flop(message)

    def assert_closed(self, message: str) -> None:
        if not self._event.is_set():
            self._env.flop(message)

    def expect_close(self, message: str, timeout: float | None = None) -> None:
        with self._env.doing(f"waiting for: {message}"):
            if not self._env.wait(self._event, self._env.timeout if timeout is None else timeout):
                self._env.flop(message)


class Promise(Generic[V]):
    """A value that is set at most once and can be waited for."""

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._value: V | None = None

    @classmethod
    def completed(cls, env: TestEnvironment, value: V) -> Promise[V]:
        promise: Promise[V] = cls(env)
        promise.complete(value)
        return promise

    def complete(self, value: V) -> bool:
        """Set the value; False if it was already set."""
        with self._lock:
            if self._event.is_set():
                return False
            self._value = value
            self._event.set()
            return True

    def is_completed(self) -> bool:
        return self._event.is_set()

    def value(self) -> V:
        if not self._event.is_set():
            self._env.flop("Cannot access a Promise value before it was completed")
        assert self._value is not None
        return self._value

    def expect_completion(self, timeout: float | None, message: str) -> V:
        with self._env.doing(f"waiting for: {message}"):
            if not self._env.wait(self._event, self._env.timeout if timeout is None else timeout):
                self._env.flop(message)
        return self.value()


class _End:
    """End of the stream: ``on_complete``, or ``on_error`` when ``error`` is set."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error

    def __repr__(self) -> str:
        return "<end-of-stream>" if self.error is None else f"on_error({self.error!r})"


END = _End()


class _Timeout:
    """Nothing arrived in time (distinct from any element, ``None`` included)."""


_TIMEOUT = _Timeout()


class Receptacle(Generic[V]):
    """Elements received by a test Subscriber, then an end-of-stream marker.

    An ``on_error`` also ends the stream here, so that a test waiting for an
    element or completion fails at once, naming the error, instead of timing out.
    """

    def __init__(self, env: TestEnvironment) -> None:
        self._env = env
        self._queue: queue.SimpleQueue[V | _End] = queue.SimpleQueue()
        self._completed = False

    def add(self, value: V) -> None:
        self._queue.put(value)

    def complete(self) -> bool:
        if self._completed:
            return False
        self._completed = True
        self._queue.put(END)
        return True

    def fail(self, error: BaseException) -> None:
        self._queue.put(_End(error))

    def _check_error(self, got: object, message: str) -> None:
        if isinstance(got, _End) and got.error is not None:
            self._env.flop(f"{message}: got on_error({got.error!r})")

    def _get(self, timeout: float | None) -> V | _End | _Timeout:
        """The next signal, or ``_TIMEOUT``; a violation recorded meanwhile is raised."""
        wait = self._env.timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        while True:
            self._env.raise_if_violated()
            remaining = deadline - time.monotonic()
            try:
                return self._queue.get(timeout=min(max(remaining, 0.0), _WAKE_SECONDS))
            except queue.Empty:
                if remaining <= 0:
                    self._env.raise_if_violated()
                    return _TIMEOUT

    def next(self, timeout: float | None, message: str) -> V:
        with self._env.doing(f"waiting for an element: {message}"):
            got = self._get(timeout)
        if isinstance(got, _Timeout):
            self._env.flop(f"{message} (timeout after {self._ms(timeout)} ms)")
        self._check_error(got, message)
        if isinstance(got, _End):
            self._env.flop(f"{message}: expected an element but got end-of-stream")
        return got

    def next_or_end(self, timeout: float | None, message: str) -> tuple[bool, V | None]:
        with self._env.doing(f"waiting for an element or completion: {message}"):
            got = self._get(timeout)
        if isinstance(got, _Timeout):
            self._env.flop(f"{message} (timeout after {self._ms(timeout)} ms)")
        self._check_error(got, message)
        if isinstance(got, _End):
            return False, None
        return True, got

    def next_n(self, n: int, timeout: float | None, message: str) -> list[V]:
        """``n`` elements; the timeout applies to each (a slow but steady stream passes)."""
        result: list[V] = []
        with self._env.doing(f"waiting for {n} elements: {message}"):
            while len(result) < n:
                got = self._get(timeout)
                if isinstance(got, _Timeout):
                    self._env.flop(f"{message}: got only {len(result)} of {n} elements "
                                   f"(none for {self._ms(timeout)} ms)")
                self._check_error(got, f"{message} (after {len(result)} of {n} elements)")
                if isinstance(got, _End):
                    self._env.flop(f"{message}: expected {n} elements but got end-of-stream "
                                   f"after {len(result)}")
                result.append(got)
        return result

    def expect_completion(self, timeout: float | None, message: str) -> None:
        with self._env.doing(f"waiting for on_complete: {message}"):
            got = self._get(timeout)
        if isinstance(got, _Timeout):
            self._env.flop(f"{message} (timeout after {self._ms(timeout)} ms)")
        self._check_error(got, message)
        if not isinstance(got, _End):
            self._env.flop(f"{message}: expected end-of-stream but got element {got!r}")

    def poll_end(self) -> bool:
        """True if the next queued signal is the end (consumed); never waits."""
        try:
            got = self._queue.get_nowait()
        except queue.Empty:
            return False
        if isinstance(got, _End):
            self._check_error(got, "Expected on_complete")
            return True
        self._env.flop(f"Expected end-of-stream or nothing, but got element {got!r}")

    def drain_until_quiet(self, within: float) -> int:
        """Take signals until none comes for ``within`` seconds; how many were taken."""
        taken = 0
        with self._env.doing(f"waiting for the stream to go quiet for {int(within * 1000)} ms"):
            while not isinstance(self._get(within), _Timeout):
                taken += 1
        return taken

    def expect_none(self, within: float | None, message: str) -> None:
        wait = self._env.no_signals_timeout if within is None else within
        with self._env.doing(f"watching that nothing arrives for {int(wait * 1000)} ms"):
            got = self._get(wait)
        if isinstance(got, _Timeout):
            return
        if isinstance(got, _End):
            what = "on_complete" if got.error is None else f"on_error({got.error!r})"
        else:
            what = f"on_next({got!r})"
        self._env.flop(f"{message} unexpected {what}")

    def _ms(self, timeout: float | None) -> int:
        return int(1000 * (self._env.timeout if timeout is None else timeout))
