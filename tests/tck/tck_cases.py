"""The catalogue of deliberately broken implementations, and the kit test each must fail.

Each ``Broken`` entry is one implementation with one bug: what it is (a
Publisher, a blackbox or whitebox Subscriber, a Processor), how to make it,
the kit test that must fail, the rules the failure may cite (its first line is
``[required] Rule x.y: ...``; ``""`` is the setup check) and patterns its detail
must contain. ``issue`` names the kind of issue 21 an entry demonstrates.

``kit_class`` turns an entry into a verification class of a given kit module
(``sansrs.tck``, or an older copy of it: ``tck_catch_rate.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from tests.tck.tck_broken import BrokenFailedPublisher, BrokenPublisher, Bugs
from tests.tck.tck_broken_more import (
    KeyedBySubscriberPublisher,
    LockedEmitterPublisher,
    ResubscribeRaisesPublisher,
    UnguardedEmitterPublisher,
    UnsyncThreadPublisher,
    WaitingSubscribePublisher,
)
from tests.tck.tck_broken_subscribers import (
    AliasSubscriber,
    BrokenSubscriber,
    ErrorSwallowingProcessor,
    LambdaSubscriber,
    ProbedSubscriber,
    WorkerSubscriber,
    broken_processor,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Broken:
    name: str
    kind: str  # "publisher", "blackbox", "whitebox", "processor"
    make: Callable[..., Any]
    test: str
    rules: tuple[str, ...]
    details: tuple[str, ...] = ()
    knobs: dict[str, Any] = field(default_factory=dict)
    issue: str = ""
    deadline_ms: int = 3000
    #: False for a misconfigured verification (not counted in the catch rate)
    implementation: bool = True


def _pub(bugs: Bugs) -> Callable[[int], BrokenPublisher]:
    return lambda elements: BrokenPublisher(elements, bugs)


def _sub(**flags: bool) -> Callable[[], BrokenSubscriber]:
    return lambda: BrokenSubscriber(**flags)


def _probed(**flags: bool) -> Callable[[Any], ProbedSubscriber]:
    return lambda probe: ProbedSubscriber(probe, **flags)


def _failed(**flags: bool) -> dict[str, Any]:
    return {"create_failed_publisher": lambda self: BrokenFailedPublisher(**flags)}


_CORRECT = _pub(Bugs())

# Publisher tests
SETUP_3 = "test_required_create_publisher_3_must_produce_a_stream_of_exactly_3_elements"
VALIDATE_MAX = "test_required_validate_max_elements_from_publisher"
VALIDATE_DEPTH = "test_required_validate_bounded_depth_of_on_next_and_request_recursion"
R1_1 = ("test_required_spec_1_1_subscription_request_must_result_in_the_correct_number_"
        "of_produced_elements")
R1_2 = "test_required_spec_1_2_may_signal_less_than_requested_and_terminate_subscription"
S1_3 = "test_stochastic_spec_1_3_must_signal_on_methods_sequentially"
R1_5 = "test_required_spec_1_5_must_signal_on_complete_when_finite_stream_terminates"
R1_5_EMPTY = "test_required_spec_1_5_empty_publisher_must_signal_on_complete"
R1_7 = "test_required_spec_1_7_must_not_emit_further_signals_once_on_complete_has_been_signalled"
R1_9_NPE = "test_required_spec_1_9_subscribe_throw_npe_on_null_subscriber"
R1_9_ISSUE = "test_required_spec_1_9_must_issue_on_subscribe_for_non_null_subscriber"
R1_9_REJECT = ("test_required_spec_1_9_may_reject_calls_to_subscribe_if_publisher_is_unable_or_"
               "unwilling_to_serve_them_rejection_must_trigger_on_error_after_on_subscribe")
R1_10 = ("test_required_spec_1_10_same_subscriber_subscribing_twice_must_not_disturb_its_first_"
         "subscription")
R3_2 = "test_required_spec_3_2_must_allow_synchronous_request_calls_from_on_next_and_on_subscribe"
R3_3 = "test_required_spec_3_3_must_not_allow_unbounded_recursion"
R3_6 = "test_required_spec_3_6_after_subscription_is_cancelled_request_must_be_nops"
R3_7 = ("test_required_spec_3_7_after_subscription_is_cancelled_additional_cancelations_"
        "must_be_nops")
R3_8_LONG = "test_required_spec_3_8_long_haul_every_request_must_be_honoured_exactly"
R3_8_CONCURRENT = "test_required_spec_3_8_concurrent_request_calls_must_each_register_their_demand"
R3_9_ZERO = "test_required_spec_3_9_request_zero_must_signal_illegal_argument_exception"
R3_9_NEGATIVE = ("test_required_spec_3_9_request_negative_number_must_signal_illegal_"
                 "argument_exception")
R3_12 = "test_required_spec_3_12_cancel_must_make_the_publisher_to_eventually_stop_signaling"
R3_12_LATE = ("test_required_spec_3_12_cancel_late_in_a_long_stream_must_stop_signalling_and_"
              "release_the_subscriber")
R3_13 = ("test_required_spec_3_13_cancel_must_make_the_publisher_eventually_drop_all_references_"
         "to_the_subscriber")
R3_17_PENDING = "test_required_spec_3_17_must_support_a_pending_element_count_up_to_long_max_value"
R3_17_CUMULATIVE = ("test_required_spec_3_17_must_support_a_cumulative_pending_element_count_up_"
                    "to_long_max_value")
R3_17_ERROR = "test_required_spec_3_17_must_not_signal_on_error_when_pending_above_long_max_value"
R3_17_SATURATE = "test_required_spec_3_17_demand_additions_must_saturate_at_long_max_value"

# Subscriber tests (blackbox names; whitebox ones drop "_blackbox")
B2_1 = "test_required_spec_2_1_blackbox_must_signal_demand_via_subscription_request"
B2_3_COMPLETE = ("test_required_spec_2_3_blackbox_must_not_call_methods_on_subscription_or_"
                 "publisher_in_on_complete")
B2_3_ERROR = ("test_required_spec_2_3_blackbox_must_not_call_methods_on_subscription_or_"
              "publisher_in_on_error")
B2_5 = ("test_required_spec_2_5_blackbox_must_call_subscription_cancel_if_it_already_has_an_"
        "subscription_and_receives_another_on_subscribe_signal")
B2_9_WITH = ("test_required_spec_2_9_blackbox_must_be_prepared_to_receive_an_on_complete_signal_"
             "with_preceding_request_call")
B2_9_WITHOUT = ("test_required_spec_2_9_blackbox_must_be_prepared_to_receive_an_on_complete_"
                "signal_without_preceding_request_call")
B2_10_WITH = ("test_required_spec_2_10_blackbox_must_be_prepared_to_receive_an_on_error_signal_"
              "with_preceding_request_call")
B2_10_WITHOUT = ("test_required_spec_2_10_blackbox_must_be_prepared_to_receive_an_on_error_"
                 "signal_without_preceding_request_call")
B2_13_SUBSCRIBE = ("test_required_spec_2_13_blackbox_on_subscribe_must_throw_null_pointer_"
                   "exception_when_parameters_are_null")
B2_13_NEXT = ("test_required_spec_2_13_blackbox_on_next_must_throw_null_pointer_exception_when_"
              "parameters_are_null")
B2_13_ERROR = ("test_required_spec_2_13_blackbox_on_error_must_throw_null_pointer_exception_"
               "when_parameters_are_null")
W_HAPPY = "test_required_exercise_whitebox_happy_path"
W2_1 = "test_required_spec_2_1_must_signal_demand_via_subscription_request"
W2_3_COMPLETE = ("test_required_spec_2_3_must_not_call_methods_on_subscription_or_publisher_in_"
                 "on_complete")
W2_8 = ("test_required_spec_2_8_must_be_prepared_to_receive_on_next_signals_after_having_called_"
        "subscription_cancel")
W3_8 = "test_required_spec_3_8_request_must_register_given_number_elements_to_be_produced"

# Processor tests
P1_4 = ("test_required_spec_1_4_must_call_on_error_on_all_its_subscribers_if_it_encounters_a_"
        "non_recoverable_error")
P4_1 = "test_required_must_request_from_upstream_for_elements_that_have_been_requested_long_ago"
P4_2 = "test_must_immediately_pass_on_on_error_events_received_from_its_upstream_to_its_downstream"


def _p(name: str, bugs: Bugs, test: str, rules: tuple[str, ...], *details: str,
       issue: str = "", **knobs: Any) -> Broken:
    return Broken(name=name, kind="publisher", make=_pub(bugs), test=test, rules=rules,
                  details=details, issue=issue, knobs=knobs)


PUBLISHERS: list[Broken] = [
    _p("over-delivers", Bugs(over_deliver=True), R1_1, ("1.1",),
       r"but only 1 element was requested"),
    _p("signals after on_complete", Bugs(signal_after_complete=True), R1_7, ("1.7",),
       r"on_next\(-1\) after on_complete"),
    _p("on_next on a thread per element", Bugs(concurrent=True), S1_3, ("1.3",),
       r"MUST NOT overlap"),
    _p("recursive on_next", Bugs(recursive=True), R3_3, ("3.3",),
       r"Got 2 on_next calls within thread"),
    _p("ignores request(0)", Bugs(ignore_bad_request=True), R3_9_ZERO, ("3.9",),
       r"Expected an error of type ValueError"),
    _p("ignores request(-n)", Bugs(ignore_negative_request=True), R3_9_NEGATIVE, ("3.9",),
       r"Expected an error of type ValueError"),
    _p("request(0) signals RuntimeError", Bugs(bad_request_wrong_error=True), R3_9_ZERO,
       ("3.9",), r"Expected an error of type ValueError", r"RuntimeError\('bad request\(0\)'\)"),
    _p("request(0) raises", Bugs(bad_request_raises=True), R3_9_ZERO, ("3.9",),
       r"request\(0\) raised ValueError", r"MUST signal on_error \(rule 3\.9\)"),
    _p("keeps subscribers", Bugs(keep_subscribers=True), R3_13, ("3.13",),
       r"did not drop its reference to the test Subscriber"),
    _p("subscribe(None) accepted", Bugs(accept_none=True), R1_9_NPE, ("1.9",),
       r"did not raise TypeError"),
    _p("no on_subscribe", Bugs(no_on_subscribe=True), R1_9_ISSUE, ("1.9",),
       r"on_(next\(1\)|complete) before on_subscribe"),
    _p("on_subscribe twice", Bugs(on_subscribe_twice=True), R1_9_ISSUE, ("2.12",),
       r"on_subscribe a second time"),
    _p("never completes", Bugs(never_complete=True), R1_5, ("1.5",),
       r"Did not receive expected on_complete"),
    _p("completes only on exact demand", Bugs(complete_only_on_exact_demand=True), R1_2,
       ("1.2",), r"Did not receive expected on_complete"),
    _p("one element too many", Bugs(extra_element=True), SETUP_3, ("",),
       r"produced more than 3 elements"),
    _p("None element", Bugs(none_element=True), SETUP_3, ("2.13",),
       r"on_next\(None\)", issue="None element reported as rule 2.13, not a timeout"),
    _p("flushes on cancel", Bugs(ignore_cancel=True), R3_12, ("1.1", "3.12"),
       r"after cancel\(\)|only 15 elements were requested"),
    _p("cancel not idempotent", Bugs(cancel_not_idempotent=True), R3_7, ("3.7",),
       r"RuntimeError\('already cancelled'\)", r"MUST return normally \(rule 3\.15\)"),
    _p("on_error on demand overflow", Bugs(overflow_error=True), R3_17_ERROR, ("3.17",),
       r"ArithmeticError\('demand overflow'\)"),
    _p("request after cancel raises", Bugs(request_after_cancel_raises=True), R3_6, ("3.6",),
       r"RuntimeError\('request after cancel'\)", r"rule 3\.16"),
    _p("loses requests made in on_subscribe", Bugs(lose_request_in_on_subscribe=True), R3_2,
       ("3.2",), r"did not honour request\(1\) calls made synchronously"),
    _p("loses requests made in on_next", Bugs(lose_reentrant_request=True), R3_2, ("3.2",),
       r"did not honour request\(1\) calls made synchronously"),
    _p("32-bit demand", Bugs(int32_demand=True), R3_17_PENDING, ("3.17",),
       r"Did not receive expected elements"),
    _p("overflow check off by one", Bugs(overflow_check_off_by_one=True), R3_17_SATURATE,
       ("3.17",), r"OverflowError", r"rule 3\.16"),
    # -- the kinds that got through (issue 21) --
    _p("one extra element from request #13 on", Bugs(extra_after_dozen_requests=True),
       R3_8_LONG, ("1.1",), r"only \d+ elements were requested in 13 request\(\) calls",
       issue="wrong only after more request() calls than the Java TCK issues"),
    _p("one element short from request #13 on", Bugs(short_after_dozen_requests=True),
       R3_8_LONG, ("3.8",), r"request #13 of \d+ .* was not honoured",
       issue="wrong only after more request() calls than the Java TCK issues"),
    _p("cancel honoured only early", Bugs(cancel_only_early=True), R3_12_LATE, ("3.12",),
       r"after cancel\(\)", r"request\(\) calls made after cancel MUST be NOPs",
       issue="cancel honoured only early in a long stream"),
    _p("Subscriber released only early", Bugs(release_only_early=True), R3_12_LATE, ("3.13",),
       r"still references its Subscriber", issue="cancel honoured only early in a long stream"),
    _p("demand wraps around at 2**63", Bugs(wrapping_demand=True), R3_17_SATURATE, ("3.17",),
       r"request\(2\*\*63-1\), request\(1\) .* not every element came",
       issue="demand additions that wrap instead of saturating (a stall)"),
    _p("negative demand signals on_error", Bugs(negative_demand_error=True), R3_17_SATURATE,
       ("3.17",), r"got on_error\(RuntimeError\('negative demand",
       issue="demand additions that wrap instead of saturating (a negative demand)"),
    _p("demand past 2**63-1 raises", Bugs(overflow_raises=True), R3_17_SATURATE, ("3.17",),
       r"OverflowError", issue="demand additions that wrap instead of saturating"),
    _p("empty publisher never completes", Bugs(never_complete=True), R1_5_EMPTY, ("1.5",),
       r"of 0 elements did not signal on_complete", max_elements_from_publisher=0,
       issue="an empty publisher that never signals completion"),
    # -- failed Publishers --
    Broken(name="on_complete after on_error", kind="publisher", make=_CORRECT, test=R1_9_REJECT,
           rules=("1.7",), details=(r"on_complete after on_error\(RuntimeError",),
           knobs=_failed(complete_after_error=True),
           issue="terminal-after-terminal reported under rule 1.7"),
    Broken(name="on_error without on_subscribe", kind="publisher", make=_CORRECT,
           test=R1_9_REJECT, rules=("1.9",), details=(r"before on_subscribe",),
           knobs=_failed(skip_on_subscribe=True)),
    # -- misconfigured verifications --
    dataclasses.replace(
        _p("negative max_elements_from_publisher", Bugs(), VALIDATE_MAX, ("",),
           r"MUST return a number >= 0", max_elements_from_publisher=-1), implementation=False),
    dataclasses.replace(
        _p("zero recursion depth", Bugs(), VALIDATE_DEPTH, ("",), r"must return a number >= 1",
           bounded_depth_of_on_next_and_request_recursion=0), implementation=False),
]

PUBLISHERS += [
    Broken(name="demand updated without a lock", kind="publisher", make=UnsyncThreadPublisher,
           test=R3_8_CONCURRENT, rules=("3.8", "1.1"),
           details=(r"delivered only \d+ (of the \d+ elements requested so far )?and then stopped"
                    r"|but only \d+ elements were requested",),
           issue="demand updated without synchronization under concurrent request()"),
    Broken(name="signals on every requesting thread", kind="publisher",
           make=UnguardedEmitterPublisher, test=R3_8_CONCURRENT, rules=("1.3",),
           details=(r"MUST NOT overlap",),
           issue="concurrent request() calls make concurrent signals"),
    Broken(name="state keyed by Subscriber", kind="publisher", make=KeyedBySubscriberPublisher,
           test=R1_10, rules=("1.10",),
           details=(r"did not deliver the elements requested through its first Subscription",),
           issue="a second subscribe() by the same subscriber handled wrongly"),
    Broken(name="second subscribe raises", kind="publisher", make=ResubscribeRaisesPublisher,
           test=R1_10, rules=("1.10",),
           details=(r"raised RuntimeError\('this Subscriber is already subscribed'\)",
                    r"MUST return normally \(rule 1\.9\)"),
           issue="a second subscribe() by the same subscriber handled wrongly"),
    Broken(name="lock held while signalling", kind="publisher", make=LockedEmitterPublisher,
           test=R3_2, rules=("3.2",), deadline_ms=1000,
           details=(r"deadline of 1000 ms", r"calling Subscription.request\(1\)",
                    r"thread \"tck-test\"", r"tck_broken_more.py"),
           issue="a deadlocking implementation fails one test instead of hanging the run"),
    Broken(name="subscribe waits for a request", kind="publisher",
           make=WaitingSubscribePublisher, test=R1_9_ISSUE, rules=("1.9",), deadline_ms=1000,
           details=(r"deadline of 1000 ms", r"calling Publisher.subscribe\(\)",
                    r"Publisher.subscribe MUST return normally"),
           issue="a deadlocking implementation fails one test instead of hanging the run"),
]


def _b(name: str, flags: dict[str, bool], test: str, rules: tuple[str, ...], *details: str,
       issue: str = "") -> Broken:
    return Broken(name=name, kind="blackbox", make=_sub(**flags), test=test, rules=rules,
                  details=details, issue=issue)


SUBSCRIBERS: list[Broken] = [
    _b("requests 0", {"request_zero": True}, B2_1, ("2.1",), r"Subscriber requested 0"),
    _b("never requests", {"never_request": True}, B2_1, ("2.1",),
       r"Did not receive expected request\(\) call"),
    _b("raises in on_next", {"raise_in_on_next": True}, B2_1, ("2.1",),
       r"on_next\(0\) raised RuntimeError", r"MUST return normally \(rule 2\.13\)"),
    _b("cancels in on_complete", {"cancel_in_on_complete": True}, B2_3_COMPLETE, ("2.3",),
       r"Subscription.cancel\(\) was called while it was running Subscriber.on_complete"),
    _b("requests in on_error", {"request_in_on_error": True}, B2_3_ERROR, ("2.3",),
       r"Subscription.request\(1\) was called while it was running Subscriber.on_error"),
    _b("keeps a second Subscription", {"ignore_second_subscription": True}, B2_5, ("2.5",),
       r"Subscription.cancel\(\) was not called"),
    _b("requests on a second Subscription", {"request_on_second_subscription": True}, B2_5,
       ("2.5",), r"request\(1\) on a second Subscription"),
    _b("raises on a second Subscription", {"raise_on_second_subscription": True}, B2_5,
       ("2.5",), r"raised RuntimeError\('already subscribed'\)"),
    _b("on_complete before a request fails",
       {"never_request": True, "require_request_before_complete": True},
       B2_9_WITHOUT, ("2.9",), r"on_complete\(\) raised AssertionError"),
    _b("on_complete with demand left fails", {"require_everything_before_complete": True},
       B2_9_WITH, ("2.9",), r"on_complete\(\) raised AssertionError"),
    _b("on_error before a request fails",
       {"never_request": True, "require_request_before_error": True},
       B2_10_WITHOUT, ("2.10",), r"on_error\(.*\) raised AssertionError"),
    _b("on_error with demand left fails", {"require_everything_before_error": True},
       B2_10_WITH, ("2.10",), r"on_error\(.*\) raised AssertionError"),
    _b("accepts on_subscribe(None)", {"accept_none_subscription": True}, B2_13_SUBSCRIBE,
       ("2.13",), r"on_subscribe\(None\) did not raise TypeError"),
    _b("accepts on_next(None)", {"accept_none_item": True}, B2_13_NEXT, ("2.13",),
       r"on_next\(None\) did not raise TypeError"),
    _b("accepts on_error(None)", {"accept_none_error": True}, B2_13_ERROR, ("2.13",),
       r"on_error\(None\) did not raise TypeError"),
    _b("on_next(None) raises ValueError", {"wrong_error_on_none": True}, B2_13_NEXT, ("2.13",),
       r"raised ValueError\('no None please'\) instead of TypeError"),
    Broken(name="on_complete is an alias that cancels", kind="blackbox", make=AliasSubscriber,
           test=B2_3_COMPLETE, rules=("2.3",), details=(r"while it was running",),
           issue="rule 2.3 broken through another name for the same method"),
    Broken(name="on_error is a lambda that requests", kind="blackbox", make=LambdaSubscriber,
           test=B2_3_ERROR, rules=("2.3",), details=(r"request\(1\) was called",),
           issue="rule 2.3 broken through another name for the same method"),
    Broken(name="a worker cancels after on_complete", kind="blackbox", make=WorkerSubscriber,
           test=B2_3_COMPLETE, rules=("2.3",), details=(r"cancel\(\) was called",),
           issue="rule 2.3 broken through another name for the same method"),
    Broken(name="whitebox: requests 0", kind="whitebox", make=_probed(request_zero=True),
           test=W2_1, rules=("2.1",), details=(r"Subscriber requested 0",)),
    Broken(name="whitebox: cancel ignored", kind="whitebox", make=_probed(cancel_ignored=True),
           test=W_HAPPY, rules=("",), details=(r"Did not receive expected cancel\(\) call",)),
    Broken(name="whitebox: cancels in on_complete", kind="whitebox",
           make=_probed(cancel_in_on_complete=True), test=W2_3_COMPLETE, rules=("2.3",),
           details=(r"cancel\(\) was called while it was running",)),
    Broken(name="whitebox: fails on on_next after cancel", kind="whitebox",
           make=_probed(raise_after_cancel=True), test=W2_8, rules=("2.8",),
           details=(r"on_next\(0\) raised RuntimeError",)),
    Broken(name="whitebox: requests fewer than told", kind="whitebox",
           make=_probed(short_requests=True), test=W3_8, rules=("3.8",),
           details=(r"Did not receive expected request\(\) call",)),
]

PROCESSORS: list[Broken] = [
    Broken(name="swallows upstream errors", kind="processor", make=ErrorSwallowingProcessor,
           test=P4_2, rules=("4.2",), details=(r"Did not receive expected error on downstream",),
           knobs={"max_supported_subscribers": lambda self: 1}),
    Broken(name="errors only its first Subscriber", kind="processor",
           make=broken_processor(error_first_only=True), test=P1_4, rules=("1.4",),
           details=(r"Did not receive expected error on downstream",)),
    Broken(name="on_complete after on_error downstream", kind="processor",
           make=broken_processor(complete_after_error=True), test=P4_2, rules=("1.7",),
           details=(r"on_complete after on_error",),
           issue="terminal-after-terminal reported under rule 1.7"),
    Broken(name="asks upstream once", kind="processor",
           make=broken_processor(request_upstream_once=True), test=P4_1, rules=("4.1",),
           details=(r"Did not receive expected request\(\) call",)),
]

CATALOGUE: list[Broken] = PUBLISHERS + SUBSCRIBERS + PROCESSORS
#: The broken implementations proper (the catch rate counts these).
IMPLEMENTATIONS: list[Broken] = [b for b in CATALOGUE if b.implementation]

_BASES = {"publisher": "PublisherVerification", "blackbox": "SubscriberBlackboxVerification",
          "whitebox": "SubscriberWhiteboxVerification",
          "processor": "IdentityProcessorVerification"}


def kit_class(kit: ModuleType, broken: Broken, env: Any) -> type:
    """A verification class of module ``kit`` (``sansrs.tck`` or a copy) for ``broken``."""
    make = broken.make
    members: dict[str, Any] = {"__test__": False, "env": env}
    if broken.kind == "publisher":
        members["create_publisher"] = lambda self, elements: make(elements)
    elif broken.kind == "blackbox":
        members["create_subscriber"] = lambda self: make()
    elif broken.kind == "whitebox":
        members["create_subscriber"] = lambda self, probe: make(probe)
    else:
        members["create_identity_processor"] = lambda self, buffer_size: make(buffer_size)
    for name, value in broken.knobs.items():
        members[name] = value if callable(value) else (lambda self, v=value: v)
    return type(f"Kit[{broken.name}]", (getattr(kit, _BASES[broken.kind]),), members)
