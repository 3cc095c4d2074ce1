"""Required Publisher tests beyond the Java TCK: the bugs short streams never show.

- long haul (3.8): hundreds of ``request()`` calls of random sizes over thousands
  of elements, each honoured exactly (an off-by-one that starts late);
- late cancels (3.12, 3.13): cancel at a random point in the second half of a long
  stream, quiet or with demand in flight; nothing more may come, requests after
  cancel are NOPs, and the Subscriber must be released;
- demand saturation (3.17): additions at and around 2**63-1 that would wrap
  around in a 64-bit counter; the stream must go on as if the demand were 2**63-1;
- concurrent requests (3.8, 1.1, 1.3): several threads call ``request(1)`` at
  once while the Publisher signals; every unit of demand must be delivered, no
  more, and never two signals at once.

Random choices come from the test's seed (printed on failure, ``TCK_SEED``);
sizes from ``StressSettings`` (the ``stress`` class attribute).
"""

from __future__ import annotations

import itertools
import random
import sys
import threading
import time
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

import pytest

from sansrs.streams import MAX_DEMAND, Publisher

from ._base import required
from ._env import TestEnvironment
from ._manual import BlackholeSubscriber, ManualSubscriber, subscribe
from ._publisher_base import PublisherTestBase
from ._trace import is_kit_file

__all__ = ["PublisherStressRules"]

T = TypeVar("T")

#: Demand additions at the 2**63-1 boundary: (description, plan). The kit requests 1, then
#: inside ``on_next`` #k makes the requests ``plan[k]``: a synchronous Publisher has then not
#: emitted anything for them yet, so the sum really is pending at once.
_HALF = 2**62
SATURATION_CASES: tuple[tuple[str, dict[int, tuple[int, ...]]], ...] = (
    ("request(2**63-1), request(1)", {1: (MAX_DEMAND, 1)}),
    ("request(2**63-2), request(2)", {1: (MAX_DEMAND - 1, 2)}),
    ("request(2**62), request(2**62)", {1: (_HALF, _HALF)}),
    ("request(2**63-1) three times", {1: (MAX_DEMAND,) * 3}),
    ("request(1), then request(2**63-1) twice", {1: (1,), 2: (MAX_DEMAND, MAX_DEMAND)}),
    ("request(2**63-4), then request(4) (exactly 2**63-1) and request(1)",
     {1: (MAX_DEMAND - 3,), 2: (4, 1)}),
    ("request(2**63-2), request(1) (exactly 2**63-1), then request(2)",
     {1: (MAX_DEMAND - 1, 1), 2: (2,)}),
)
_SATURATION_ELEMENTS = 6


def _yielding(rng: random.Random, probability: float) -> Callable[[FrameType, str, Any], None]:
    """A profile hook that gives up the GIL at random calls near ``request()``.

    Under the GIL a read-modify-write of the demand is rarely interrupted; yielding
    where the implementation's calls begin inside ``request`` and its direct callees
    (``add_demand(self.demand, n)``, ``flag.is_set()``, ...) forces the interleavings
    that lose updates or overlap signals. Deeper calls (signalling loops) and the
    kit's own code are left alone, which keeps correct implementations fast.
    """
    depth = 0  # of implementation frames: the kit's own are not counted
    kit: dict[str, bool] = {}

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal depth
        if event not in ("call", "return"):
            return
        filename = frame.f_code.co_filename
        if filename not in kit:
            kit[filename] = is_kit_file(filename)
        if kit[filename]:
            return
        if event == "return":
            depth -= 1
            return
        depth += 1
        if depth <= 2 and rng.random() < probability:
            time.sleep(0)  # not a wait: releases the GIL so another thread runs now

    return hook


def _partition(rng: random.Random, total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` positive random sizes."""
    cuts = sorted(rng.sample(range(1, total), parts - 1)) if parts > 1 else []
    bounds = [0, *cuts, total]
    return [b - a for a, b in itertools.pairwise(bounds)]


class _CancellingSubscriber(ManualSubscriber[T]):
    """Cancels from inside ``on_next`` once ``cancel_at`` elements have arrived."""

    def __init__(self, env: TestEnvironment, cancel_at: int) -> None:
        super().__init__(env)
        self.cancel_at = cancel_at

    def on_next(self, item: T) -> None:
        super().on_next(item)
        if self.delivered == self.cancel_at:
            self.cancel()


class _SaturatingSubscriber(ManualSubscriber[T]):
    """Makes the planned requests from inside ``on_next``; cancels after ``last`` elements."""

    def __init__(self, env: TestEnvironment, plan: dict[int, tuple[int, ...]],
                 last: int | None) -> None:
        super().__init__(env)
        self.plan = plan
        self.last = last

    def on_next(self, item: T) -> None:
        super().on_next(item)
        for n in self.plan.get(self.delivered, ()):
            self.request(n)
        if self.delivered == self.last:
            self.cancel()  # an infinite stream would otherwise never stop


class _CountingSubscriber(BlackholeSubscriber[T]):
    """Counts elements; ``reached`` is set once ``target`` have arrived."""

    def __init__(self, env: TestEnvironment, target: int) -> None:
        super().__init__(env)
        self.target = target
        self.settled = 0
        self.reached = threading.Event()
        self._count = threading.Condition()

    def on_next(self, item: T) -> None:
        super().on_next(item)
        with self._count:
            self._count.notify_all()
        if self.delivered >= self.target:
            self.reached.set()

    def wait_for(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` elements have come, as long as they keep coming."""
        last, deadline = -1, 0.0
        with self._count:
            while self.delivered < count:
                now = time.monotonic()
                if self.delivered != last:
                    last, deadline = self.delivered, now + timeout
                elif now >= deadline:
                    return False
                self._count.wait(deadline - now)
        return True


class _SpinBarrier:
    """A barrier whose threads leave together: each waits by yielding the GIL in a loop,
    so all of them compete for it at once when it opens (a ``threading.Barrier`` wakes
    them one by one, late enough for the first to have finished alone). After
    ``spin_s`` a waiter blocks instead, not to starve the Publisher's own threads while
    the last one runs ``action``."""

    def __init__(self, parties: int, timeout: float,
                 action: Callable[[], None] | None = None, spin_s: float = 0.002) -> None:
        self.parties = parties
        self.timeout = timeout
        self.action = action
        self.spin_s = spin_s
        self.lock = threading.Lock()
        self.arrived = 0
        self.opened = threading.Event()
        self.broken = False

    def wait(self) -> None:
        with self.lock:
            opened = self.opened
            self.arrived += 1
            last = self.arrived == self.parties
        if last:
            if self.action is not None:
                try:
                    self.action()
                except BaseException:
                    self.abort()
                    raise
            with self.lock:
                self.arrived = 0
                self.opened = threading.Event()
            opened.set()
            return
        start = time.monotonic()
        while not opened.is_set():
            waited = time.monotonic() - start
            if self.broken or waited > self.timeout:
                self.abort()
                raise threading.BrokenBarrierError
            if waited < self.spin_s:
                time.sleep(0)  # not a wait for something: stay runnable, let the others run
            else:
                opened.wait(self.timeout - waited)
        if self.broken:
            raise threading.BrokenBarrierError

    def abort(self) -> None:
        self.broken = True
        self.opened.set()


class PublisherStressRules(PublisherTestBase[T]):
    __test__ = False

    # -- long haul ----------------------------------------------------------------------

    @required("3.8")
    def test_required_spec_3_8_long_haul_every_request_must_be_honoured_exactly(self) -> None:
        stress, env = self.stress, self.env
        elements = self.scaled(stress.long_haul_elements)
        calls = max(1, min(elements, round(
            stress.long_haul_requests * elements / stress.long_haul_elements)))
        sizes = _partition(env.rng, elements, calls)

        def run(pub: Publisher[T]) -> None:
            sub = self._new(pub)
            received = 0
            try:
                for index, n in enumerate(sizes, 1):
                    sub.request(n)  # the Subscriber fails a single element too many (1.1)
                    sub.next_elements(
                        n, f"request #{index} of {len(sizes)} (request({n}) after {received} "
                        f"elements) was not honoured: request(n) MUST register n more elements "
                        "to be produced (rule 3.8)")
                    received += n
                if self.finite():
                    sub.request_end_of_stream(
                        f"Publisher {pub!r} delivered its {elements} elements but did not "
                        "complete (rule 1.5)")
                else:
                    sub.expect_none(f"Publisher {pub!r} produced unrequested:")
            finally:
                sub.cancel()

        self.active_publisher_test(elements, False, run)

    # -- late cancels ---------------------------------------------------------------------

    @required("3.12")
    def test_required_spec_3_12_cancel_late_in_a_long_stream_must_stop_signalling_and_release_the_subscriber(  # noqa: E501
        self,
    ) -> None:
        stress, env = self.stress, self.env
        elements = self.scaled(stress.long_haul_elements)
        if stress.late_cancel_rounds == 0 or elements < 2:
            pytest.skip("No late-cancel rounds: StressSettings.late_cancel_rounds is 0 or the "
                        "Publisher produces fewer than 2 elements")
        for round_number in range(stress.late_cancel_rounds):
            point = env.rng.randint(max(1, elements // 2), elements - 1)
            in_flight = round_number % 2 == 1

            def run(pub: Publisher[T], point: int = point, in_flight: bool = in_flight) -> None:
                how = "from on_next, with demand in flight" if in_flight else "with no demand"
                where = f"after element #{point} of {elements}, {how}"
                ref = self._cancel_late(pub, elements, point, in_flight)
                if not env.wait_for_collection(ref):
                    raise env.violation("3.13", f"Publisher {pub!r} still references its "
                                        f"Subscriber {env.gc_timeout_ms} ms after cancel() "
                                        f"{where}: cancel MUST make it drop the reference "
                                        "(rule 3.13)", site=())

            self.active_publisher_test(elements, False, run)

    def _cancel_late(self, pub: Publisher[T], elements: int, point: int,
                     in_flight: bool) -> weakref.ref[ManualSubscriber[T]]:
        env = self.env
        sub: ManualSubscriber[T]
        if in_flight:
            sub = _CancellingSubscriber(env, point)
            subscribe(env, pub, sub)
            sub.request(point + env.rng.randint(1, elements - point))
            sub.next_elements(point, f"Publisher {pub!r} did not deliver the requested elements "
                                     "(rule 3.8)")
        else:
            sub = self._new(pub)
            while sub.delivered < point:
                n = min(env.rng.randint(1, 16), point - sub.delivered)
                sub.request(n)
                sub.next_elements(n, f"Publisher {pub!r} did not deliver request({n}) "
                                     "(rule 3.8)")
            sub.cancel()
        # what was outstanding at cancel may still come (rule 2.8), never more (rule 3.12)
        sub.received.drain_until_quiet(env.no_signals_timeout)
        sub.request(env.rng.randint(1, elements))  # rule 3.6: a NOP now
        sub.received.drain_until_quiet(env.no_signals_timeout)
        return weakref.ref(sub)

    # -- demand at 2**63-1 ------------------------------------------------------------------

    @required("3.17")
    def test_required_spec_3_17_demand_additions_must_saturate_at_long_max_value(self) -> None:
        env = self.env
        elements = self.scaled(_SATURATION_ELEMENTS)
        for description, plan in SATURATION_CASES:
            if max(plan) >= elements:
                continue  # the Publisher is too short for this plan

            def run(pub: Publisher[T], description: str = description,
                    plan: dict[int, tuple[int, ...]] = plan) -> None:
                sub = _SaturatingSubscriber[T](env, plan, None if self.finite() else elements)
                subscribe(env, pub, sub)
                try:
                    sub.request(1)
                    sub.next_elements(
                        elements, f"after {description} (a pending demand of 2**63-1 or more, "
                        "which MUST count as 2**63-1, rule 3.17), not every element came: an "
                        "addition that wraps around to a negative demand stalls a Publisher, "
                        "or makes it fail")
                    if self.finite():
                        sub.expect_completion(message=f"after {description}, Publisher {pub!r} "
                                              f"delivered its {elements} elements but did not "
                                              "complete")
                finally:
                    sub.cancel()

            self.active_publisher_test(elements, False, run)

    # -- concurrent request() ----------------------------------------------------------------

    @required("3.8")
    def test_required_spec_3_8_concurrent_request_calls_must_each_register_their_demand(
        self,
    ) -> None:
        stress, env = self.stress, self.env
        wanted = stress.concurrent_threads * stress.concurrent_requests_per_thread
        # twice as many elements as requested: a lost decrement shows as over-delivery
        total = max(1, self.scaled(2 * wanted) // 2)
        threads = min(stress.concurrent_threads, total)
        per_thread = total // threads
        total = threads * per_thread
        serialize = self.request_needs_external_synchronization()
        if not serialize:
            env.hint("if your Subscription relies on rule 2.7 (its Subscriber never calls "
                     "request() from two threads at once), override "
                     "request_needs_external_synchronization() to return True")

        def run(pub: Publisher[T]) -> None:
            sub = _CountingSubscriber[T](env, total)
            subscribe(env, pub, sub)
            try:
                self._hammer(sub, threads, per_thread, serialize)
                how = ("one at a time under a lock (request_needs_external_synchronization())"
                       if serialize else "at once")
                self._await_count(
                    sub, f"{threads} threads called request(1) {per_thread} times each, "
                    f"{how}: {total} elements requested, but Publisher {pub!r} delivered "
                    "only {count} and then stopped. request(n) MUST register n more elements "
                    "(rule 3.8): demand updated by concurrent calls lost some of them")
                sub.expect_none(f"Publisher {pub!r} produced unrequested:")
            finally:
                sub.cancel()

        self.active_publisher_test(2 * total, False, run)

    def _hammer(self, sub: _CountingSubscriber[T], threads: int, per_thread: int,
                serialize: bool) -> None:
        """``threads`` threads each call ``request(1)`` ``per_thread`` times, together.

        First they run free (many updates racing), then in lock-step rounds: all
        threads call ``request(1)`` at the same moment on an idle Publisher, every
        round (races on "is anyone signalling?" flags). The calls go straight to the
        Subscription, with only a counter of what was requested kept by the kit: its
        usual bookkeeping would serialize the threads and hide the race.
        """
        env = self.env
        subscription = sub.subscription.value()
        lock = threading.Lock()
        rounds = min(self.stress.lockstep_rounds, per_thread // 2)
        free = per_thread - rounds
        start = _SpinBarrier(threads, env.timeout * 10)
        step = _SpinBarrier(threads, env.timeout * 10, lambda: self._settle(sub, threads))
        sub.settled = threads * free  # free calls book themselves; rounds in _settle

        # one counter per thread, written by that thread only: no lock, no lost count
        booked = [0] * threads
        sub.checker.booked = lambda: sum(booked)

        def request() -> None:
            if serialize:
                with lock:
                    subscription.request(1)
            else:
                subscription.request(1)

        def requests(index: int, seed: int) -> None:
            with env.doing("calling Subscription.request(1) from several threads at once"):
                try:
                    start.wait()
                    sys.setprofile(_yielding(random.Random(seed), self.stress.yield_probability))
                    try:
                        for _ in range(free):
                            booked[index] += 1  # before the call: its element may come at once
                            request()
                        for _ in range(rounds):
                            step.wait()
                            request()
                    finally:
                        sys.setprofile(None)
                except threading.BrokenBarrierError:
                    pass  # a round did not settle (reported by _settle), or a thread failed
                except Exception as error:
                    if not any(error is e for e in env.async_errors):
                        env.violation(None, f"Subscription.request(1) raised {error!r}: it "
                                      "MUST return normally (rule 3.16)", site=(), cause=error)
                    start.abort()  # the other threads stop too
                    step.abort()

        workers = [threading.Thread(target=requests, args=(i, env.rng.randrange(2**32)),
                                    name=f"tck-request-{i}", daemon=True)
                   for i in range(threads)]
        previous = sys.getswitchinterval()
        sys.setswitchinterval(self.stress.switch_interval_s)
        try:
            with env.doing(f"waiting for {threads} threads calling request(1) at once"):
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
        finally:
            sys.setswitchinterval(previous)
        env.raise_if_violated()

    def _settle(self, sub: _CountingSubscriber[T], threads: int) -> None:
        """Between lock-step rounds: wait until everything requested so far has come."""
        env = self.env
        if not sub.wait_for(sub.settled, env.timeout):
            env.violation(None, f"{threads} threads called request(1) at the same moment, but "
                          f"the Publisher delivered only {sub.delivered} of the {sub.settled} "
                          "elements requested so far and then stopped. request(n) MUST "
                          "register n more elements (rule 3.8): concurrent calls lost demand "
                          "updates, or a request that came while the Publisher was finishing "
                          "its signals was dropped", site=())
            raise threading.BrokenBarrierError
        sub.checker.add_request(threads, calls=threads)
        sub.settled += threads

    def _await_count(self, sub: _CountingSubscriber[T], message: str) -> None:
        """Wait while elements keep coming; fail when they stop short of the target."""
        env = self.env
        last, since = -1, time.monotonic()
        with env.doing(f"waiting for {sub.target} elements"):
            while not env.wait(sub.reached, env.poll_interval * 5):
                count = sub.delivered
                if count != last:
                    last, since = count, time.monotonic()
                elif time.monotonic() - since > env.timeout:
                    env.flop(message.replace("{count}", str(count)))  # a repr may hold braces
