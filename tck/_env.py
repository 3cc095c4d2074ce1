"""The TCK's test environment: timeouts, the deadline, the seed, and what one test saw.

``TestEnvironment`` is configuration (milliseconds, a seed, a deadline) plus
the state of one test: the asynchronous errors and rule violations recorded
on any thread, hints for the report, what the kit is doing right now (for the
deadline report) and where the implementation last signalled. A verification
class holds a ``TestEnvironment`` as configuration; every test runs on a fresh
copy (``isolated()``), so no state leaks from one test, or one class, to the
next, even from threads a broken implementation left running.

This is a test-support layer: it uses threads and clocks to wait for
asynchronous signals, which the sans-IO core never does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import random
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ._trace import Site, caller_site

__all__ = ["RuleViolation", "StressSettings", "TestEnvironment"]

#: How often a wait wakes up to see whether a rule violation was recorded meanwhile.
_WAKE_SECONDS = 0.02


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"Unable to parse {name} env value [{raw}] as an integer") from None


class RuleViolation(AssertionError):
    """A broken rule seen by the kit, with the implementation's call site.

    ``rule`` is the rule the implementation broke (None: the rule of the test that
    saw it); ``site`` the implementation frames that made the offending call;
    ``cause`` an exception the implementation raised or signalled.
    """

    def __init__(self, rule: str | None, message: str, *, site: Site = (),
                 cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.site = site
        self.cause = cause


@dataclass(frozen=True, slots=True, kw_only=True)
class StressSettings:
    """Sizes of the long-haul, late-cancel and concurrency tests (required tests).

    Each is capped by ``max_elements_from_publisher()``. Larger values find rarer
    bugs at the cost of run time; the defaults run in well under a second against
    an in-process Publisher.
    """

    #: Elements of the long-haul stream, requested in ``long_haul_requests`` random chunks.
    long_haul_elements: int = 2000
    long_haul_requests: int = 300
    #: Streams cancelled at a random point in their second half (rules 3.12, 3.13).
    late_cancel_rounds: int = 3
    #: Threads calling ``request(1)`` at once, and calls per thread (rule 3.8).
    concurrent_threads: int = 8
    concurrent_requests_per_thread: int = 400
    #: Of those, calls made in lock-step: all threads at the same moment, Publisher idle.
    lockstep_rounds: int = 16
    #: ``sys.setswitchinterval`` during the concurrent requests, and the chance that a
    #: requesting thread gives up the GIL at each function call: forced thread switches
    #: make an unsynchronized read-modify-write of the demand lose updates.
    switch_interval_s: float = 1e-3
    yield_probability: float = 0.5

    def __post_init__(self) -> None:
        for name in ("long_haul_elements", "long_haul_requests", "concurrent_threads",
                     "concurrent_requests_per_thread"):
            if getattr(self, name) < 1:
                raise ValueError(f"StressSettings.{name} must be >= 1")
        if (self.late_cancel_rounds < 0 or self.lockstep_rounds < 0 or self.switch_interval_s <= 0
                or not 0 <= self.yield_probability <= 1):
            raise ValueError("StressSettings: late_cancel_rounds >= 0, lockstep_rounds >= 0, "
                             "switch_interval_s > 0, 0 <= yield_probability <= 1")


@dataclass
class TestEnvironment:
    """Timeouts (milliseconds), the per-test deadline and seed, and one test's findings.

    ``from_environ()`` reads the Java TCK's variables ``DEFAULT_TIMEOUT_MILLIS``,
    ``DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS``, ``DEFAULT_POLL_TIMEOUT_MILLIS`` and
    ``PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS``, and ``TCK_TEST_DEADLINE_MILLIS``.
    ``TCK_SEED`` (read per test) fixes the random choices of every test.
    """

    __test__ = False  # not a pytest test class despite its name

    default_timeout_ms: int = 100
    default_no_signals_timeout_ms: int = 100
    default_poll_timeout_ms: int = 10
    gc_timeout_ms: int = 300
    #: A test still running after this long fails with a report of what it was
    #: waiting for and every thread's stack; 0 runs tests on pytest's thread, unbounded.
    test_deadline_ms: int = 30_000
    #: Seed of the random choices; None: ``TCK_SEED`` if set, else a fresh one per test.
    seed: int | None = None

    async_errors: list[BaseException] = field(init=False, repr=False, compare=False)
    hints: list[str] = field(init=False, repr=False, compare=False)
    seed_used: int = field(init=False, repr=False, compare=False)
    rng: random.Random = field(init=False, repr=False, compare=False)
    #: Where the implementation last called a kit Subscriber: (signal, site).
    last_signal: tuple[str, Site] | None = field(init=False, repr=False, compare=False)
    #: The Publisher, Subscriber or Processor under test (named in failure reports).
    subject: object | None = field(init=False, repr=False, compare=False)
    _violated: threading.Event = field(init=False, repr=False, compare=False)
    _activity: dict[int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.async_errors = []
        self.hints = []
        seed = self.seed if self.seed is not None else _env_int("TCK_SEED", -1)
        self.seed_used = seed if seed >= 0 else random.SystemRandom().randrange(2**32)
        self.rng = random.Random(self.seed_used)
        self.last_signal = None
        self.subject = None
        self._violated = threading.Event()
        self._activity = {}

    @classmethod
    def from_environ(
        cls,
        *,
        default_timeout_ms: int = 100,
        default_no_signals_timeout_ms: int | None = None,
        default_poll_timeout_ms: int = 10,
        gc_timeout_ms: int = 300,
        test_deadline_ms: int = 30_000,
    ) -> TestEnvironment:
        """Defaults given here, overridden by the environment variables."""
        timeout = _env_int("DEFAULT_TIMEOUT_MILLIS", default_timeout_ms)
        return cls(
            default_timeout_ms=timeout,
            default_no_signals_timeout_ms=_env_int(
                "DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS",
                timeout if default_no_signals_timeout_ms is None else default_no_signals_timeout_ms,
            ),
            default_poll_timeout_ms=_env_int("DEFAULT_POLL_TIMEOUT_MILLIS",
                                             default_poll_timeout_ms),
            gc_timeout_ms=_env_int("PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS", gc_timeout_ms),
            test_deadline_ms=_env_int("TCK_TEST_DEADLINE_MILLIS", test_deadline_ms),
        )

    def isolated(self) -> TestEnvironment:
        """A copy with this configuration and fresh state (and seed): one per test."""
        return dataclasses.replace(self)

    # -- seconds, for the waiting primitives --------------------------------------

    @property
    def timeout(self) -> float:
        return self.default_timeout_ms / 1000

    @property
    def no_signals_timeout(self) -> float:
        return self.default_no_signals_timeout_ms / 1000

    @property
    def poll_interval(self) -> float:
        return self.default_poll_timeout_ms / 1000

    # -- failures ---------------------------------------------------------------------

    def clear_async_errors(self) -> None:
        self.async_errors.clear()

    def flop(self, message: str) -> NoReturn:
        """Record a failure (it may happen on another thread) and raise it here."""
        error = AssertionError(message)
        self.async_errors.append(error)
        raise error

    def violation(self, rule: str | None, message: str, *, site: Site | None = None,
                  cause: BaseException | None = None) -> RuleViolation:
        """Record a broken rule; waits in progress end at once with it. Returns it to raise."""
        error = RuleViolation(rule, message, site=caller_site(2) if site is None else site,
                              cause=cause)
        self.async_errors.append(error)
        self._violated.set()
        return error

    def violations(self) -> list[RuleViolation]:
        return [e for e in list(self.async_errors) if isinstance(e, RuleViolation)]

    def raise_if_violated(self) -> None:
        """Raise the first rule violation recorded so far, if any."""
        if self._violated.is_set():
            found = self.violations()
            if found:
                raise found[0]

    def record_error(self, error: BaseException) -> None:
        """Record an error signalled to a test Subscriber (``on_error``)."""
        self.async_errors.append(error)

    def drop_async_error(self) -> BaseException | None:
        try:
            return self.async_errors.pop(0)
        except IndexError:
            return None

    def describe_async_errors(self) -> str:
        return "\n".join(f"  - {_describe(e)}" for e in list(self.async_errors))

    def hint(self, text: str) -> None:
        """Add advice to this test's failure report (shown only if it fails)."""
        if text not in self.hints:
            self.hints.append(text)

    # -- waiting -------------------------------------------------------------------------

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """``event.wait(timeout)``, ending early with a rule violation recorded meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            self.raise_if_violated()
            remaining = deadline - time.monotonic()
            if event.wait(min(max(remaining, 0.0), _WAKE_SECONDS)):
                return True
            if remaining <= 0:
                self.raise_if_violated()
                return False

    def quiet_period(self, seconds: float | None = None) -> None:
        """Let ``seconds`` (default: the no-signals timeout) pass; a violation ends it."""
        if self._violated.wait(self.no_signals_timeout if seconds is None else seconds):
            self.raise_if_violated()

    def verify_no_async_errors(self, *, delay: bool = True) -> None:
        """Fail if any asynchronous error was recorded (after the no-signals wait)."""
        if delay:
            self.quiet_period()
        self.raise_if_violated()
        if self.async_errors:
            errors = self.describe_async_errors()
            raise AssertionError("Asynchronous errors were recorded:\n" + errors)

    def expect_error(self, kind: type[BaseException], timeout: float | None = None,
                     message: str = "") -> BaseException:
        """Wait for a recorded error of ``kind``, remove and return it."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            for error in list(self.async_errors):
                if isinstance(error, kind) and not isinstance(error, RuleViolation):
                    self.async_errors.remove(error)
                    return error
            self.raise_if_violated()
            if time.monotonic() >= deadline:
                seen = self.describe_async_errors() or "  (none)"
                raise AssertionError(
                    f"{message}Expected an error of type {kind.__name__} within "
                    f"{self.default_timeout_ms} ms; recorded errors:\n{seen}")
            time.sleep(self.poll_interval)

    def wait_for_collection(self, ref: weakref.ref[Any]) -> bool:
        """Collect garbage until ``ref`` dies or the GC timeout passes (rule 3.13)."""
        deadline = time.monotonic() + self.gc_timeout_ms / 1000
        while True:
            gc.collect()
            if ref() is None:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.poll_interval)

    # -- what the kit is doing (for the deadline report) ----------------------------------

    @contextlib.contextmanager
    def doing(self, what: str) -> Iterator[None]:
        """Declare what this thread of the kit does until the block ends."""
        ident = threading.get_ident()
        previous = self._activity.get(ident)
        self._activity[ident] = what
        try:
            yield
        finally:
            if previous is None:
                self._activity.pop(ident, None)
            else:
                self._activity[ident] = previous

    def activity(self) -> dict[int, str]:
        """Thread ident -> what the kit's code on that thread is doing now."""
        return dict(self._activity)

    def saw_signal(self, signal: str) -> None:
        """Remember where the implementation called a kit Subscriber (for timeouts)."""
        self.last_signal = (signal, caller_site(2))


def _describe(error: BaseException) -> str:
    if isinstance(error, AssertionError):
        return str(error)
    return f"unexpected on_error({error!r})"
