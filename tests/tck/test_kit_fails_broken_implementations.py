"""The kit must be able to fail: every deliberately broken implementation of the
catalogue (``tck_cases``) fails its kit test, citing the rule it broke, showing
the implementation's own frames and the seed; the bug-free variants pass the
same tests."""

from __future__ import annotations

import re
from typing import Any

import pytest
import sansrs.tck
from sansrs.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
    TestEnvironment,
    Verification,
)

from tests.tck.tck_broken import BrokenFailedPublisher
from tests.tck.tck_broken_subscribers import BrokenSubscriber, ProbedSubscriber, broken_processor
from tests.tck.tck_cases import (
    _CORRECT,
    CATALOGUE,
    IMPLEMENTATIONS,
    R3_8_CONCURRENT,
    VALIDATE_DEPTH,
    VALIDATE_MAX,
    Broken,
    kit_class,
)

# a broken implementation's own threads get the kit's rule violations raised into them
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def env_for(broken: Broken) -> TestEnvironment:
    """Short waits: these runs wait out timeouts on purpose."""
    return TestEnvironment(default_timeout_ms=250, default_no_signals_timeout_ms=40,
                           gc_timeout_ms=150, test_deadline_ms=broken.deadline_ms)


#: For runs that must pass: a wait ends when its signal comes, so a generous timeout
#: costs nothing, and keeps a loaded machine from failing a correct implementation.
PASSING = TestEnvironment(default_timeout_ms=2000, default_no_signals_timeout_ms=40,
                          gc_timeout_ms=1000)


def failure(kit: Verification, test: str) -> str:
    """The failure report of ``kit.test`` (which must fail)."""
    kit.setup_method()
    with pytest.raises(pytest.fail.Exception) as info:
        getattr(kit, test)()
    return str(info.value)


def cited_rule(message: str) -> str:
    """The rule a report's first line cites (``""``: the setup check)."""
    first = message.splitlines()[0]
    match = re.match(r"\[required(?:, stochastic)?\] (?:Rule (\S+):|TCK setup check)", first)
    assert match is not None, message
    return match[1] or ""


@pytest.mark.parametrize("broken", CATALOGUE, ids=[b.name for b in CATALOGUE])
def test_kit_fails_broken_implementation_citing_the_rule(broken: Broken) -> None:
    message = failure(kit_class(sansrs.tck, broken, env_for(broken))(), broken.test)
    assert cited_rule(message) in broken.rules, message
    for detail in broken.details:
        assert re.search(detail, message), f"{detail!r} not in:\n{message}"
    assert "seed: " in message, message
    if broken.test not in (VALIDATE_MAX, VALIDATE_DEPTH):  # configuration, not code
        assert re.search(r'File ".*tests/tck/tck_\w+\.py", line \d+', message), (
            f"no frame of the implementation in:\n{message}")


def test_catalogue_covers_every_required_rule_and_every_kind_of_the_issue() -> None:
    assert len(IMPLEMENTATIONS) >= 50
    assert len({b.name for b in CATALOGUE}) == len(CATALOGUE)
    targeted = {(b.kind, b.test) for b in CATALOGUE}
    kits = {"publisher": PublisherVerification, "blackbox": SubscriberBlackboxVerification,
            "whitebox": SubscriberWhiteboxVerification,
            "processor": IdentityProcessorVerification}
    covered = {getattr(kits[kind], test).rule for kind, test in targeted}
    required = {getattr(kit, name).rule for kit in kits.values() for name in dir(kit)
                if name.startswith(("test_required_", "test_stochastic_", "test_must_"))}
    assert required - covered == set()
    issue_kinds = {b.issue for b in CATALOGUE if b.issue}
    assert len(issue_kinds) >= 10, issue_kinds


# -- controls: the bug-free variants pass the same tests ------------------------------------


def _control(broken: Broken) -> Broken | None:
    """The same verification with the bug taken out (None: nothing to compare)."""
    if broken.test in (VALIDATE_MAX, VALIDATE_DEPTH):
        return None
    knobs = dict(broken.knobs)
    if broken.kind == "publisher" and broken.test == R3_8_CONCURRENT:
        # The naive Publisher keeps its demand and its "signalling now" flag without a
        # lock: correct only for a Subscriber that follows rule 2.7, which it must say
        # (racing requests lose demand to its check-then-set: CI saw 3108 of 3112).
        knobs["request_needs_external_synchronization"] = lambda self: True
    if "create_failed_publisher" in knobs:
        knobs["create_failed_publisher"] = lambda self: BrokenFailedPublisher()
    make: Any = {"publisher": _CORRECT, "blackbox": BrokenSubscriber,
                 "whitebox": lambda probe: ProbedSubscriber(probe),
                 "processor": broken_processor()}[broken.kind]
    return Broken(name=f"control of {broken.name}", kind=broken.kind, make=make,
                  test=broken.test, rules=broken.rules, knobs=knobs)


CONTROLS = {(c.kind, c.test, tuple(sorted(c.knobs))): c
            for c in map(_control, CATALOGUE) if c is not None}


@pytest.mark.parametrize("control", list(CONTROLS.values()),
                         ids=[f"{c.kind}:{c.test}" for c in CONTROLS.values()])
def test_kit_passes_the_bug_free_variant(control: Broken) -> None:
    kit = kit_class(sansrs.tck, control, PASSING)()
    kit.setup_method()
    getattr(kit, control.test)()


# -- how skips and untested rules read -----------------------------------------------------------


def _publisher_kit(**knobs: Any) -> Verification:
    broken = Broken(name="naive", kind="publisher", make=_CORRECT, test="", rules=(),
                    knobs=knobs)
    kit: Verification = kit_class(sansrs.tck, broken, env_for(broken))()
    return kit


def test_optional_rule_failure_becomes_a_skip_with_the_reason() -> None:
    from tests.tck.tck_broken import BrokenPublisher, Bugs

    class Kit(PublisherVerification[int]):
        __test__ = False
        env = TestEnvironment(default_timeout_ms=250, default_no_signals_timeout_ms=40)

        def create_publisher(self, elements: int) -> Any:
            return BrokenPublisher(elements, Bugs(vague_bad_request=True))

    with pytest.raises(pytest.skip.Exception) as info:
        Kit().test_optional_spec_3_9_request_negative_number_may_signal_illegal_argument_exception_with_specific_message()
    reason = str(info.value)
    assert "does NOT implement this OPTIONAL requirement" in reason
    assert "Rule 3.9:" in reason and "'bad request'" in reason


def test_untested_rule_is_a_skip_quoting_the_rule() -> None:
    with pytest.raises(pytest.skip.Exception) as info:
        _publisher_kit().test_untested_spec_1_6_must_consider_subscription_cancelled_after_on_error_or_on_complete_has_been_called()  # type: ignore[attr-defined]
    assert str(info.value).startswith("untested: Rule 1.6: If a Publisher signals either onError")


def test_failed_publisher_tests_skip_without_create_failed_publisher() -> None:
    with pytest.raises(pytest.skip.Exception, match="create_failed_publisher"):
        _publisher_kit().test_optional_spec_1_4_must_signal_on_error_when_fails()  # type: ignore[attr-defined]


def test_base_classes_are_not_collected_and_concrete_subclasses_are() -> None:
    from sansrs.streams import Publisher, range_publisher

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
