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
from typing import TypeVar

import pytest

from sansrs.streams import MAX_DEMAND, Publisher

from ._base import required
from ._env import TestEnvironment
from ._manual import BlackholeSubscriber, ManualSubscriber, subscribe
from ._publisher_base import PublisherTestBase

__all__ = ["PublisherStressRules"]

T = TypeVar("T")

#: Demand sequences at the 2**63-1 boundary: (description, steps); a step is
#: ("request", n) or ("take", k): receive k elements before going on.
_HALF = 2**62
SATURATION_CASES: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = (
    ("request(2**63-1), request(1)", (("request", MAX_DEMAND), ("request", 1))),
    ("request(2**63-2), request(2)", (("request", MAX_DEMAND - 1), ("request", 2))),
    ("request(2**62), request(2**62)", (("request", _HALF), ("request", _HALF))),
    ("request(2**63-1) three times", (("request", MAX_DEMAND),) * 3),
    ("request(2), 2 elements, request(2**63-1) twice",
     (("request", 2), ("take", 2), ("request", MAX_DEMAND), ("request", MAX_DEMAND))),
    ("request(2**63-3), 2 elements, request(4) (exactly 2**63-1), request(1)",
     (("request", MAX_DEMAND - 2), ("take", 2), ("request", 4), ("request", 1))),
    ("request(1), request(2**63-2) (exactly 2**63-1), 1 element, request(2)",
     (("request", 1), ("request", MAX_DEMAND - 1), ("take", 1), ("request", 2))),
)
_SATURATION_ELEMENTS = 6


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


class _CountingSubscriber(BlackholeSubscriber[T]):
    """Counts elements; ``reached`` is set once ``target`` have arrived."""

    def __init__(self, env: TestEnvironment, target: int) -> None:
        super().__init__(env)
        self.target = target
        self.reached = threading.Event()

    def on_next(self, item: T) -> None:
        super().on_next(item)
        if self.delivered >= self.target:
            self.reached.set()


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
        elements = self.scaled(_SATURATION_ELEMENTS)
        for description, steps in SATURATION_CASES:
            if sum(k for kind, k in steps if kind == "take") >= elements:
                continue  # the Publisher is too short for this sequence

            def run(pub: Publisher[T], description: str = description,
                    steps: tuple[tuple[str, int], ...] = steps) -> None:
                sub = self._new(pub)
                try:
                    taken = 0
                    for kind, n in steps:
                        if kind == "request":
                            sub.request(n)
                        else:
                            sub.next_elements(n, f"after {description}")
                            taken += n
                    sub.next_elements(
                        elements - taken,
                        f"after {description} (a pending demand of 2**63-1 or more, which "
                        "MUST count as 2**63-1, rule 3.17), the stream stopped: an addition "
                        "that wrapped around to a negative demand stalls a Publisher")
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
        total = self.scaled(wanted)
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
                if self.finite():
                    sub.request_end_of_stream(f"Publisher {pub!r} delivered its {total} "
                                              "elements but did not complete (rule 1.5)")
                else:
                    sub.expect_none(f"Publisher {pub!r} produced unrequested:")
            finally:
                sub.cancel()

        self.active_publisher_test(total, False, run)

    def _hammer(self, sub: ManualSubscriber[T], threads: int, per_thread: int,
                serialize: bool) -> None:
        """``threads`` threads each call ``sub.request(1)`` ``per_thread`` times, together."""
        env = self.env
        lock = threading.Lock()
        start = threading.Barrier(threads)

        def requests() -> None:
            try:
                start.wait(env.timeout * 10)
                for _ in range(per_thread):
                    if serialize:
                        with lock:
                            sub.request(1)
                    else:
                        sub.request(1)
            except threading.BrokenBarrierError:
                pass
            except Exception as error:  # recorded as a violation already, unless unexpected
                if not any(error is e for e in env.async_errors):
                    env.record_error(error)

        workers = [threading.Thread(target=requests, name=f"tck-request-{i}", daemon=True)
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
                    env.flop(message.format(count=count))
