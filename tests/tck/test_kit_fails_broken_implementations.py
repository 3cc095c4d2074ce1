"""The kit must be able to fail: run it against broken implementations and check
that the right test fails, with a message citing the rule."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from sansrs.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TestEnvironment,
    Verification,
    WhiteboxSubscriberProbe,
)

from sansrs.streams import Processor, Publisher, Subscriber, range_publisher
from tests.tck.tck_broken import BrokenPublisher, BrokenSubscriber, Bugs, ErrorSwallowingProcessor

SLOW_ENOUGH = TestEnvironment(default_timeout_ms=250, default_no_signals_timeout_ms=40,
                              gc_timeout_ms=150)


def _publisher_kit(bugs: Bugs) -> PublisherVerification[int]:
    class Kit(PublisherVerification[int]):
        __test__ = False
        env = SLOW_ENOUGH

        def create_publisher(self, elements: int) -> Publisher[int]:
            return BrokenPublisher(elements, bugs)

    return Kit()


def _failure(kit: Verification, test: str) -> str:
    kit.setup_method()
    with pytest.raises(pytest.fail.Exception) as info:
        getattr(kit, test)()
    return str(info.value)


def _assert_cites(message: str, rule: str, *details: str) -> None:
    assert message.startswith("[required") and f"Rule {rule}:" in message, message
    for detail in details:
        assert re.search(detail, message), f"{detail!r} not in {message}"


# -- Publishers --------------------------------------------------------------------------

PUBLISHER_CASES: list[tuple[str, Bugs, str, str, tuple[str, ...]]] = [
    ("over-delivering", Bugs(over_deliver=True),
     "test_required_spec_1_1_subscription_request_must_result_in_the_correct_number_of_produced_elements",
     "1.1", (r"only 1 elements were requested \(rule 1\.1\)",)),
    ("signals after on_complete", Bugs(signal_after_complete=True),
     "test_required_spec_1_7_must_not_emit_further_signals_once_on_complete_has_been_signalled",
     "1.7", (r"after a terminal signal \(rule 1\.7\)",)),
    ("concurrent on_next", Bugs(concurrent=True),
     "test_stochastic_spec_1_3_must_signal_on_methods_sequentially",
     "1.3", (r"Illegal concurrent access detected", r"\(rule 1\.3\)")),
    ("unbounded recursion", Bugs(recursive=True),
     "test_required_spec_3_3_must_not_allow_unbounded_recursion",
     "3.3", (r"Got 2 on_next calls within thread", "expected recursive bound was 1")),
    ("request(0) ignored", Bugs(ignore_bad_request=True),
     "test_required_spec_3_9_request_zero_must_signal_illegal_argument_exception",
     "3.9", (r"Expected an error of type ValueError",)),
    ("negative request ignored", Bugs(ignore_bad_request=True),
     "test_required_spec_3_9_request_negative_number_must_signal_illegal_argument_exception",
     "3.9", (r"Expected an error of type ValueError",)),
    ("keeps subscriber references", Bugs(keep_subscribers=True),
     "test_required_spec_3_13_cancel_must_make_the_publisher_eventually_drop_all_references_to_the_subscriber",
     "3.13", (r"did not drop its reference to the test Subscriber",)),
    ("accepts a None subscriber", Bugs(accept_none=True),
     "test_required_spec_1_9_subscribe_throw_npe_on_null_subscriber",
     "1.9", (r"did not raise TypeError",)),
    ("signals before on_subscribe", Bugs(no_on_subscribe=True),
     "test_required_spec_1_9_must_issue_on_subscribe_for_non_null_subscriber",
     "1.9", (r"on_subscribe should be called prior to on_(next|complete)",)),
    ("never completes", Bugs(never_complete=True),
     "test_required_spec_1_5_must_signal_on_complete_when_finite_stream_terminates",
     "1.5", (r"Did not receive expected on_complete",)),
    ("never completes (setup check)", Bugs(never_complete=True),
     "test_required_create_publisher_3_must_produce_a_stream_of_exactly_3_elements",
     "", (r"did not complete",)),
    ("ignores cancel", Bugs(ignore_cancel=True),
     "test_required_spec_3_12_cancel_must_make_the_publisher_to_eventually_stop_signaling",
     "3.12", (r"but only 15 elements were requested \(rule 1\.1\)",)),
    ("on_error on demand overflow", Bugs(overflow_error=True),
     "test_required_spec_3_17_must_not_signal_on_error_when_pending_above_long_max_value",
     "3.17", (r"unexpected on_error\(ArithmeticError",)),
    ("request after cancel raises", Bugs(request_after_cancel_raises=True),
     "test_required_spec_3_6_after_subscription_is_cancelled_request_must_be_nops",
     "3.6", (r"RuntimeError\('request after cancel'\)",)),
]


@pytest.mark.parametrize(("bugs", "test", "rule", "details"),
                         [case[1:] for case in PUBLISHER_CASES],
                         ids=[case[0] for case in PUBLISHER_CASES])
def test_kit_fails_broken_publisher(bugs: Bugs, test: str, rule: str,
                                    details: tuple[str, ...]) -> None:
    message = _failure(_publisher_kit(bugs), test)
    if rule:
        _assert_cites(message, rule, *details)
    else:
        assert message.startswith("[required] TCK setup check"), message
        for detail in details:
            assert re.search(detail, message), message


def test_kit_passes_the_same_naive_publisher_without_bugs() -> None:
    """Control: every test failed above passes on the bug-free variant."""
    kit = _publisher_kit(Bugs())
    for _, _, test, _, _ in PUBLISHER_CASES:
        kit.setup_method()
        getattr(kit, test)()


def test_optional_rule_failure_becomes_a_skip_with_the_reason() -> None:
    kit = _publisher_kit(Bugs(vague_bad_request=True))
    kit.setup_method()
    with pytest.raises(pytest.skip.Exception) as info:
        kit.test_optional_spec_3_9_request_negative_number_may_signal_illegal_argument_exception_with_specific_message()
    reason = str(info.value)
    assert "does NOT implement this OPTIONAL requirement" in reason
    assert "Rule 3.9:" in reason and "'bad request'" in reason


def test_untested_rule_is_a_skip_quoting_the_rule() -> None:
    kit = _publisher_kit(Bugs())
    with pytest.raises(pytest.skip.Exception) as info:
        kit.test_untested_spec_1_6_must_consider_subscription_cancelled_after_on_error_or_on_complete_has_been_called()
    assert str(info.value).startswith("untested: Rule 1.6: If a Publisher signals either onError")


def test_failed_publisher_tests_skip_without_create_failed_publisher() -> None:
    kit = _publisher_kit(Bugs())
    with pytest.raises(pytest.skip.Exception, match="create_failed_publisher"):
        kit.test_optional_spec_1_4_must_signal_on_error_when_fails()


# -- Subscribers ---------------------------------------------------------------------


def _blackbox_kit(make: Callable[[], Subscriber[int]]) -> SubscriberBlackboxVerification[int]:
    class Kit(SubscriberBlackboxVerification[int]):
        __test__ = False
        env = SLOW_ENOUGH

        def create_subscriber(self) -> Subscriber[int]:
            return make()

    return Kit()


SUBSCRIBER_CASES: list[tuple[str, dict[str, bool], str, str, tuple[str, ...]]] = [
    ("requests 0", {"request_zero": True},
     "test_required_spec_2_1_blackbox_must_signal_demand_via_subscription_request",
     "2.1", (r"Subscriber requested 0", r"rules 2\.1 and 3\.9")),
    ("cancels in on_complete", {"cancel_in_on_complete": True},
     "test_required_spec_2_3_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_complete",
     "2.3", (r"cancel\(\) MUST NOT be called from Subscriber.on_complete \(rule 2\.3\)",)),
    ("requests in on_error", {"request_in_on_error": True},
     "test_required_spec_2_3_blackbox_must_not_call_methods_on_subscription_or_publisher_in_on_error",
     "2.3", (r"request\(1\) MUST NOT be called from Subscriber.on_error",)),
    ("keeps a second subscription", {"ignore_second_subscription": True},
     "test_required_spec_2_5_blackbox_must_call_subscription_cancel_if_it_already_has_an_subscription_and_receives_another_on_subscribe_signal",
     "2.5", (r"Subscription.cancel\(\) was not called",)),
    ("accepts on_next(None)", {"accept_none": True},
     "test_required_spec_2_13_blackbox_on_next_must_throw_null_pointer_exception_when_parameters_are_null",
     "2.13", (r"on_next\(None\) did not raise TypeError",)),
]


@pytest.mark.parametrize(("options", "test", "rule", "details"),
                         [case[1:] for case in SUBSCRIBER_CASES],
                         ids=[case[0] for case in SUBSCRIBER_CASES])
def test_kit_fails_broken_subscriber(options: dict[str, bool], test: str, rule: str,
                                     details: tuple[str, ...]) -> None:
    message = _failure(_blackbox_kit(lambda: BrokenSubscriber(**options)), test)
    _assert_cites(message, rule, *details)


def test_kit_passes_the_naive_subscriber_without_bugs() -> None:
    kit = _blackbox_kit(BrokenSubscriber)
    for _, _, test, _, _ in SUBSCRIBER_CASES:
        kit.setup_method()
        getattr(kit, test)()


class _Probed(BrokenSubscriber):
    def __init__(self, probe: WhiteboxSubscriberProbe[int], **options: bool) -> None:
        super().__init__(**options)
        self.probe = probe

    def on_subscribe(self, subscription: object) -> None:
        first = self.subscription is None
        super().on_subscribe(subscription)  # type: ignore[arg-type]
        if first and subscription is not None:
            self.probe.register_on_subscribe(_Puppet(subscription))

    def on_next(self, item: int) -> None:
        super().on_next(item)
        self.probe.register_on_next(item)


class _Puppet:
    def __init__(self, subscription: object) -> None:
        self.subscription = subscription

    def trigger_request(self, elements: int) -> None:
        self.subscription.request(elements)  # type: ignore[attr-defined]

    def signal_cancel(self) -> None:
        self.subscription.cancel()  # type: ignore[attr-defined]


def test_whitebox_kit_fails_subscriber_that_requests_more_than_told() -> None:
    """BrokenSubscriber requests again in every on_next: the whitebox 3.8 check sees it."""

    class Kit(SubscriberWhiteboxVerification[int]):
        __test__ = False
        env = SLOW_ENOUGH

        def create_subscriber(self, probe: WhiteboxSubscriberProbe[int]) -> Subscriber[int]:
            return _Probed(probe, request_zero=True)

    message = _failure(Kit(), "test_required_spec_2_1_must_signal_demand_via_subscription_request")
    _assert_cites(message, "2.1", r"Subscriber requested 0")


# -- Processors ------------------------------------------------------------------------


def test_kit_fails_processor_that_swallows_upstream_errors() -> None:
    class Kit(IdentityProcessorVerification[int]):
        __test__ = False
        env = SLOW_ENOUGH

        def create_identity_processor(self, buffer_size: int) -> Processor[int, int]:
            return ErrorSwallowingProcessor(buffer_size)

    message = _failure(
        Kit(),
        "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream",
    )
    _assert_cites(message, "4.2", r"Did not receive expected error on downstream")


# -- collection ---------------------------------------------------------------------------


def test_base_classes_are_not_collected_and_concrete_subclasses_are() -> None:
    for base in (PublisherVerification, SubscriberWhiteboxVerification,
                 SubscriberBlackboxVerification, IdentityProcessorVerification):
        assert base.__test__ is False

    class TestConcrete(PublisherVerification[int]):
        def create_publisher(self, elements: int) -> Publisher[int]:
            return range_publisher(0, elements)

    class TestStillAbstract(IdentityProcessorVerification[int]):
        pass

    assert TestConcrete.__test__ is True
    assert TestStillAbstract.__test__ is False


def test_identity_processor_verification_includes_publisher_and_subscriber_rules() -> None:
    names = {n for n in dir(IdentityProcessorVerification) if n.startswith("test_")}
    assert "test_required_spec_3_3_must_not_allow_unbounded_recursion" in names
    assert "test_required_spec_2_1_must_signal_demand_via_subscription_request" in names
    assert "test_required_exercise_whitebox_happy_path" in names

