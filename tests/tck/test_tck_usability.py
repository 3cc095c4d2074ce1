"""How the kit behaves for its user: hints, deadlines, seeds, isolation, settings."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
from typing import Any

import pytest
from sansrs.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    StressSettings,
    TestEnvironment,
)

from sansrs.streams import MapProcessor, Processor, Publisher, range_publisher
from tests.tck.tck_broken import BrokenPublisher, Bugs
from tests.tck.tck_broken_more import LockedEmitterPublisher, UnguardedEmitterPublisher
from tests.tck.tck_cases import P1_4, R3_2, R3_8_CONCURRENT, R3_8_LONG

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")

ENV = TestEnvironment(default_timeout_ms=250, default_no_signals_timeout_ms=40,
                      gc_timeout_ms=150, test_deadline_ms=3000)
#: For runs that must pass: waits end when the signal comes, so generous costs nothing.
PASSING = TestEnvironment(default_timeout_ms=2000, default_no_signals_timeout_ms=40,
                          gc_timeout_ms=1000)


def _failure(kit: Any, test: str) -> str:
    kit.setup_method()
    with pytest.raises(pytest.fail.Exception) as info:
        getattr(kit, test)()
    return str(info.value)


def _publisher_kit(make: Any, env: TestEnvironment = ENV, **attributes: Any) -> Any:
    members = {"__test__": False, "env": env,
               "create_publisher": lambda self, elements: make(elements), **attributes}
    return type("Kit", (PublisherVerification,), members)()


# -- hints ----------------------------------------------------------------------------------


class _UnicastKit(IdentityProcessorVerification[int]):
    """A unicast Processor whose verification forgot ``max_supported_subscribers``."""

    __test__ = False
    env = ENV

    def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
        return MapProcessor(lambda x: x, buffer_size=buffer_size)


def test_unicast_processor_failure_points_at_max_supported_subscribers() -> None:
    message = _failure(_UnicastKit(), P1_4)
    assert "hint: this test subscribes 2 Subscribers" in message
    assert "override max_supported_subscribers() to return 1" in message


def test_unicast_processor_with_max_supported_subscribers_skips_those_tests() -> None:
    class Kit(_UnicastKit):
        def max_supported_subscribers(self) -> int:
            return 1

    kit = Kit()
    kit.setup_method()
    with pytest.raises(pytest.skip.Exception, match="only supports 1 subscribers"):
        getattr(kit, P1_4)()


def test_concurrent_request_failure_explains_the_rule_2_7_opt_out() -> None:
    message = _failure(_publisher_kit(UnguardedEmitterPublisher), R3_8_CONCURRENT)
    assert "override request_needs_external_synchronization() to return True" in message


def test_a_subscription_relying_on_rule_2_7_passes_when_it_says_so() -> None:
    kit = _publisher_kit(UnguardedEmitterPublisher, PASSING,
                         request_needs_external_synchronization=lambda self: True)
    kit.setup_method()
    getattr(kit, R3_8_CONCURRENT)()


# -- the deadline ----------------------------------------------------------------------------


def test_a_deadlock_fails_at_the_deadline_with_what_the_kit_waited_for_and_the_stacks() -> None:
    env = dataclasses.replace(ENV, test_deadline_ms=500)
    message = _failure(_publisher_kit(LockedEmitterPublisher, env), R3_2)
    assert message.startswith("[required] Rule 3.2:"), message
    assert "did not finish within its deadline of 500 ms (test_deadline_ms)" in message
    assert "the kit was calling Subscription.request(1), which has not returned" in message
    assert "Subscription.request MUST return promptly and normally (rules 3.4, 3.16)" in message
    assert re.search(r'thread "tck-test" \(innermost last\):\n(.*\n)*.*in request', message)
    assert "with self.lock:  # BUG: held across on_next" in message  # the line it blocks on


def test_deadline_zero_runs_the_test_on_pytests_thread() -> None:
    seen: list[str] = []

    def make(elements: int) -> Publisher[int]:
        seen.append(threading.current_thread().name)
        return range_publisher(0, elements)

    kit = _publisher_kit(make, dataclasses.replace(PASSING, test_deadline_ms=0))
    kit.setup_method()
    kit.test_required_create_publisher_1_must_produce_a_stream_of_exactly_1_element()
    assert seen == [threading.current_thread().name]
    kit = _publisher_kit(make, PASSING)
    kit.setup_method()
    kit.test_required_create_publisher_1_must_produce_a_stream_of_exactly_1_element()
    assert seen[-1] == "tck-test"


# -- seeds --------------------------------------------------------------------------------------


def test_tck_seed_repeats_the_random_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TCK_SEED", "1234")
    first, second = ENV.isolated(), ENV.isolated()
    assert first.seed_used == second.seed_used == 1234
    assert first.rng.random() == second.rng.random()
    monkeypatch.delenv("TCK_SEED")
    assert dataclasses.replace(ENV, seed=7).isolated().seed_used == 7


def test_the_seed_is_printed_and_repeats_a_failing_run(monkeypatch: pytest.MonkeyPatch) -> None:
    make = lambda elements: BrokenPublisher(elements, Bugs(short_after_dozen_requests=True))  # noqa: E731
    first = _failure(_publisher_kit(make), R3_8_LONG)
    seed = re.search(r"seed: (\d+) \(TCK_SEED=\1 repeats", first)
    assert seed is not None, first
    monkeypatch.setenv("TCK_SEED", seed[1])
    again = _failure(_publisher_kit(make), R3_8_LONG)
    what = re.compile(r"request #13 of \d+ \(request\(\d+\) after \d+ elements\)")
    assert what.search(first) is not None and what.search(first)[0] == what.search(again)[0]  # type: ignore[index]


# -- isolation ---------------------------------------------------------------------------------


def test_every_test_runs_on_its_own_environment_and_the_class_one_stays_clean() -> None:
    failing = _publisher_kit(lambda n: BrokenPublisher(n, Bugs(over_deliver=True)))
    _failure(failing, "test_required_spec_1_1_subscription_request_must_result_in_the_correct_"
                      "number_of_produced_elements")
    assert ENV.async_errors == [] and failing.env is not ENV
    # the same configuration object, shared with a correct Publisher, sees nothing of it
    passing = _publisher_kit(lambda n: range_publisher(0, n), PASSING)
    passing.setup_method()
    passing.test_required_spec_1_1_subscription_request_must_result_in_the_correct_number_of_produced_elements()


def test_a_thread_left_behind_cannot_fail_the_next_test() -> None:
    kit = _publisher_kit(lambda n: range_publisher(0, n), PASSING)
    kit.setup_method()
    old = kit.env
    kit.test_required_create_publisher_1_must_produce_a_stream_of_exactly_1_element()
    with contextlib.suppress(AssertionError):
        old.flop("late failure of an abandoned thread")  # lands on its own test's copy
    kit.test_required_create_publisher_1_must_produce_a_stream_of_exactly_1_element()
    assert kit.env is not old


# -- settings -----------------------------------------------------------------------------------


def test_stress_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="long_haul_elements"):
        StressSettings(long_haul_elements=0)
    with pytest.raises(ValueError, match="yield_probability"):
        StressSettings(yield_probability=2)


def test_stress_tests_scale_down_to_what_the_publisher_can_produce() -> None:
    counts: list[int] = []

    def make(elements: int) -> Publisher[int]:
        counts.append(elements)
        return range_publisher(0, elements)

    kit = _publisher_kit(make, PASSING, max_elements_from_publisher=lambda self: 50,
                         stress=StressSettings(long_haul_elements=5000, long_haul_requests=600))
    kit.setup_method()
    getattr(kit, R3_8_LONG)()
    getattr(kit, R3_8_CONCURRENT)()
    assert counts[0] == 50 and 8 <= counts[1] <= 50  # concurrent: 2 x (8 threads x 3)
