"""What every kit Subscriber checks about the signals a Publisher sends it.

One ``SignalChecker`` per test Subscriber, composed into it; each signal is
checked as it arrives and a broken rule is recorded as a ``RuleViolation``
citing the rule the Publisher broke, with the Publisher's call site:

- 1.9  nothing before ``on_subscribe``;
- 2.12 ``on_subscribe`` at most once;
- 2.13 no ``None`` (Java's null) as subscription, element or error;
- 1.1  no more ``on_next`` than requested, at every moment;
- 1.7  nothing after ``on_complete`` / ``on_error``, naming the first terminal signal;
- 1.3  no signal while another thread is inside one (re-entry on the same thread,
  a synchronous ``request`` inside ``on_next``, is allowed; rule 3.3 bounds it);
- 3.12 after ``cancel()``, no more ``on_next`` than was outstanding when it was
  called (requests after cancel are NOPs, rule 3.6).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sansrs.streams import MAX_DEMAND, add_demand

from ._env import RuleViolation, TestEnvironment

__all__ = ["SignalChecker"]


class SignalChecker:
    """Rule checks and demand bookkeeping for one kit Subscriber."""

    def __init__(self, env: TestEnvironment, *, check_concurrency: bool = True,
                 under_test: bool = True) -> None:
        self.env = env
        self.check_concurrency = check_concurrency
        self.under_test = under_test  # False: fed by the kit's own helper Publisher
        self._lock = threading.Lock()
        self.subscribed = False
        self.requested = 0
        self.delivered = 0
        self.request_calls = 0
        self.requests_after_cancel = 0
        #: Demand the kit books elsewhere, without this lock (concurrent requesters).
        self.booked: Callable[[], int] | None = None
        self.terminal: str | None = None
        self.outstanding_at_cancel: int | None = None
        self.delivered_at_cancel = 0
        self._owner: int | None = None
        self._depth = 0
        self._current = ""

    def __repr__(self) -> str:
        cancelled = "" if self.outstanding_at_cancel is None else (
            f", cancelled after {self.delivered_at_cancel}")
        return (f"requested {_count(self.requested)} in {self.request_calls} request() calls, "
                f"received {self.delivered}{cancelled}")

    # -- the kit's side -------------------------------------------------------------------

    def add_request(self, n: int, calls: int = 1) -> None:
        """The kit is about to call ``request(n)`` (before the call: elements may come at once);
        ``calls`` > 1 books the demand of that many ``request(1)`` calls at once."""
        with self._lock:
            self.request_calls += calls
            if self.outstanding_at_cancel is not None:
                self.requests_after_cancel += 1  # NOPs (rule 3.6): they add nothing
            elif n > 0:
                self.requested = add_demand(self.requested, n)

    def mark_cancelled(self) -> None:
        with self._lock:
            if self.outstanding_at_cancel is None:
                self.outstanding_at_cancel = self.requested - self.delivered
                self.delivered_at_cancel = self.delivered

    @property
    def cancelled(self) -> bool:
        return self.outstanding_at_cancel is not None

    # -- sequential signalling (rule 1.3) -------------------------------------------------------

    def enter(self, signal: str) -> bool:
        """Start of a signal; returns whether it is the outermost one on this thread."""
        me = threading.get_ident()
        if self.under_test:
            self.env.saw_signal(signal)
        with self._lock:
            owner = self._owner
            if owner is not None and owner != me and self.check_concurrency:
                previous = self._current
                raise self._violate(
                    "1.3", f"Publisher signalled {signal} on thread {_thread_name(me)} while "
                    f"thread {_thread_name(owner)} was still inside {previous}: signals to a "
                    "Subscriber MUST NOT overlap (rule 1.3)")
            if owner is None or owner != me:
                self._owner = me
                self._depth = 0
                self._current = signal
            self._depth += 1
            return self._depth == 1

    def leave(self) -> None:
        with self._lock:
            if self._owner == threading.get_ident():
                self._depth -= 1
                if self._depth <= 0:
                    self._owner = None

    # -- the checks ---------------------------------------------------------------------------

    def check_on_subscribe(self, subscription: object) -> bool:
        """False when this is a second ``on_subscribe`` (a violation unless tolerated)."""
        if subscription is None:
            raise self._violate("2.13", "Publisher called on_subscribe(None): a Subscription "
                                "MUST NOT be None (Java: null, rule 2.13)")
        with self._lock:
            first = not self.subscribed
            self.subscribed = True
        return first

    def second_on_subscribe(self) -> RuleViolation:
        return self._violate("2.12", "Publisher called on_subscribe a second time on the same "
                             "Subscriber (rule 2.12: at most once)")

    def check_on_next(self, item: object) -> None:
        self._check_started(f"on_next({item!r})")
        if item is None:
            raise self._violate("2.13", "Publisher signalled on_next(None): elements MUST NOT "
                                "be None (Java: null, rule 2.13)")
        with self._lock:
            self.delivered += 1
            delivered, requested = self.delivered, self.requested
            if self.booked is not None:
                requested = add_demand(requested, self.booked())
            outstanding = self.outstanding_at_cancel
        if outstanding is not None and delivered - self.delivered_at_cancel > outstanding:
            # after requests made after cancel, 3.6 and 3.12 are both broken: the test
            # that made them names the rule it checks
            rule = None if self.requests_after_cancel else "3.12"
            raise self._violate(
                rule, f"Publisher signalled on_next #{delivered} ({item!r}) after cancel(): "
                f"when the Subscription was cancelled, after element #{self.delivered_at_cancel}, "
                f"{outstanding} {_elements(outstanding)} outstanding and no more may come "
                f"(rule 3.12); {self.requests_after_cancel} request() calls made after cancel "
                "MUST be NOPs (rule 3.6)")
        if delivered > requested:
            calls = self.request_calls + (self.booked() if self.booked is not None else 0)
            raise self._violate(
                "1.1", f"Publisher signalled on_next #{delivered} ({item!r}) but only "
                f"{_count(requested)} {_elements(requested)} requested in {calls} "
                "request() calls (rule 1.1)")

    def check_terminal(self, signal: str, error: BaseException | None = None,
                       is_error: bool = False) -> None:
        self._check_started(signal)
        if is_error and error is None:
            raise self._violate("2.13", "Publisher signalled on_error(None): the error MUST NOT "
                                "be None (Java: null, rule 2.13)")
        with self._lock:
            first = self.terminal
            if first is None:
                self.terminal = signal
        if first is not None:
            raise self._violate("1.7", f"Publisher signalled {signal} after {first}: once a "
                                "terminal signal was sent, no further signals may occur (rule 1.7)")

    def _check_started(self, signal: str) -> None:
        if not self.subscribed:
            raise self._violate("1.9", f"Publisher signalled {signal} before on_subscribe "
                                "(rule 1.9: on_subscribe MUST come first)")
        first = self.terminal
        if first is not None:
            raise self._violate("1.7", f"Publisher signalled {signal} after {first}: once a "
                                "terminal signal was sent, no further signals may occur (rule 1.7)")

    def _violate(self, rule: str | None, message: str) -> RuleViolation:
        return self.env.violation(rule, message)


def _count(n: int) -> str:
    return "2**63-1" if n >= MAX_DEMAND else str(n)


def _elements(n: int) -> str:
    return "element was" if n == 1 else "elements were"


def _thread_name(ident: int) -> str:
    for thread in threading.enumerate():
        if thread.ident == ident:
            return f'"{thread.name}"'
    return str(ident)
