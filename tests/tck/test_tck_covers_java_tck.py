"""Every test of the Java TCK's four verifications is ported, under its converted name.

The Java names (reactive-streams-jvm, tck/src/main/java/org/reactivestreams/tck/) are
listed here; ``python_name`` is the naming rule of docs/tck.md. The required tests
sansrs adds (``SANSRS_PUBLISHER``) are the only others.
"""

from __future__ import annotations

import re

import pytest
from sansrs.tck import (
    IdentityProcessorVerification,
    PublisherVerification,
    SubscriberBlackboxVerification,
    SubscriberWhiteboxVerification,
)

# ruff: noqa: E501

JAVA_PUBLISHER = [
    'required_createPublisher1MustProduceAStreamOfExactly1Element',
    'required_createPublisher3MustProduceAStreamOfExactly3Elements',
    'required_validate_maxElementsFromPublisher',
    'required_validate_boundedDepthOfOnNextAndRequestRecursion',
    'required_spec101_subscriptionRequestMustResultInTheCorrectNumberOfProducedElements',
    'required_spec102_maySignalLessThanRequestedAndTerminateSubscription',
    'stochastic_spec103_mustSignalOnMethodsSequentially',
    'optional_spec104_mustSignalOnErrorWhenFails',
    'required_spec105_mustSignalOnCompleteWhenFiniteStreamTerminates',
    'optional_spec105_emptyStreamMustTerminateBySignallingOnComplete',
    'untested_spec106_mustConsiderSubscriptionCancelledAfterOnErrorOrOnCompleteHasBeenCalled',
    'required_spec107_mustNotEmitFurtherSignalsOnceOnCompleteHasBeenSignalled',
    'untested_spec107_mustNotEmitFurtherSignalsOnceOnErrorHasBeenSignalled',
    'untested_spec108_possiblyCanceledSubscriptionShouldNotReceiveOnErrorOrOnCompleteSignals',
    'untested_spec109_subscribeShouldNotThrowNonFatalThrowable',
    'required_spec109_subscribeThrowNPEOnNullSubscriber',
    'required_spec109_mustIssueOnSubscribeForNonNullSubscriber',
    'required_spec109_mayRejectCallsToSubscribeIfPublisherIsUnableOrUnwillingToServeThemRejectionMustTriggerOnErrorAfterOnSubscribe',
    'untested_spec110_rejectASubscriptionRequestIfTheSameSubscriberSubscribesTwice',
    'optional_spec111_maySupportMultiSubscribe',
    'optional_spec111_registeredSubscribersMustReceiveOnNextOrOnCompleteSignals',
    'optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingOneByOne',
    'optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingManyUpfront',
    'optional_spec111_multicast_mustProduceTheSameElementsInTheSameSequenceToAllOfItsSubscribersWhenRequestingManyUpfrontAndCompleteAsExpected',
    'required_spec302_mustAllowSynchronousRequestCallsFromOnNextAndOnSubscribe',
    'required_spec303_mustNotAllowUnboundedRecursion',
    'untested_spec304_requestShouldNotPerformHeavyComputations',
    'untested_spec305_cancelMustNotSynchronouslyPerformHeavyComputation',
    'required_spec306_afterSubscriptionIsCancelledRequestMustBeNops',
    'required_spec307_afterSubscriptionIsCancelledAdditionalCancelationsMustBeNops',
    'required_spec309_requestZeroMustSignalIllegalArgumentException',
    'required_spec309_requestNegativeNumberMustSignalIllegalArgumentException',
    'optional_spec309_requestNegativeNumberMaySignalIllegalArgumentExceptionWithSpecificMessage',
    'required_spec312_cancelMustMakeThePublisherToEventuallyStopSignaling',
    'required_spec313_cancelMustMakeThePublisherEventuallyDropAllReferencesToTheSubscriber',
    'required_spec317_mustSupportAPendingElementCountUpToLongMaxValue',
    'required_spec317_mustSupportACumulativePendingElementCountUpToLongMaxValue',
    'required_spec317_mustNotSignalOnErrorWhenPendingAboveLongMaxValue',
]

JAVA_WHITEBOX = [
    'required_exerciseWhiteboxHappyPath',
    'required_spec201_mustSignalDemandViaSubscriptionRequest',
    'untested_spec202_shouldAsynchronouslyDispatch',
    'required_spec203_mustNotCallMethodsOnSubscriptionOrPublisherInOnComplete',
    'required_spec203_mustNotCallMethodsOnSubscriptionOrPublisherInOnError',
    'untested_spec204_mustConsiderTheSubscriptionAsCancelledInAfterRecievingOnCompleteOrOnError',
    'required_spec205_mustCallSubscriptionCancelIfItAlreadyHasAnSubscriptionAndReceivesAnotherOnSubscribeSignal',
    'untested_spec206_mustCallSubscriptionCancelIfItIsNoLongerValid',
    'untested_spec207_mustEnsureAllCallsOnItsSubscriptionTakePlaceFromTheSameThreadOrTakeCareOfSynchronization',
    'required_spec208_mustBePreparedToReceiveOnNextSignalsAfterHavingCalledSubscriptionCancel',
    'required_spec209_mustBePreparedToReceiveAnOnCompleteSignalWithPrecedingRequestCall',
    'required_spec209_mustBePreparedToReceiveAnOnCompleteSignalWithoutPrecedingRequestCall',
    'required_spec210_mustBePreparedToReceiveAnOnErrorSignalWithPrecedingRequestCall',
    'required_spec210_mustBePreparedToReceiveAnOnErrorSignalWithoutPrecedingRequestCall',
    'untested_spec211_mustMakeSureThatAllCallsOnItsMethodsHappenBeforeTheProcessingOfTheRespectiveEvents',
    'untested_spec212_mustNotCallOnSubscribeMoreThanOnceBasedOnObjectEquality_specViolation',
    'untested_spec213_failingOnSignalInvocation',
    'required_spec213_onSubscribe_mustThrowNullPointerExceptionWhenParametersAreNull',
    'required_spec213_onNext_mustThrowNullPointerExceptionWhenParametersAreNull',
    'required_spec213_onError_mustThrowNullPointerExceptionWhenParametersAreNull',
    'untested_spec301_mustNotBeCalledOutsideSubscriberContext',
    'required_spec308_requestMustRegisterGivenNumberElementsToBeProduced',
    'untested_spec310_requestMaySynchronouslyCallOnNextOnSubscriber',
    'untested_spec311_requestMaySynchronouslyCallOnCompleteOrOnError',
    'untested_spec314_cancelMayCauseThePublisherToShutdownIfNoOtherSubscriptionExists',
    'untested_spec315_cancelMustNotThrowExceptionAndMustSignalOnError',
    'untested_spec316_requestMustNotThrowExceptionAndMustOnErrorTheSubscriber',
]

JAVA_BLACKBOX = [
    'required_spec201_blackbox_mustSignalDemandViaSubscriptionRequest',
    'untested_spec202_blackbox_shouldAsynchronouslyDispatch',
    'required_spec203_blackbox_mustNotCallMethodsOnSubscriptionOrPublisherInOnComplete',
    'required_spec203_blackbox_mustNotCallMethodsOnSubscriptionOrPublisherInOnError',
    'untested_spec204_blackbox_mustConsiderTheSubscriptionAsCancelledInAfterRecievingOnCompleteOrOnError',
    'required_spec205_blackbox_mustCallSubscriptionCancelIfItAlreadyHasAnSubscriptionAndReceivesAnotherOnSubscribeSignal',
    'untested_spec206_blackbox_mustCallSubscriptionCancelIfItIsNoLongerValid',
    'untested_spec207_blackbox_mustEnsureAllCallsOnItsSubscriptionTakePlaceFromTheSameThreadOrTakeCareOfSynchronization',
    'untested_spec208_blackbox_mustBePreparedToReceiveOnNextSignalsAfterHavingCalledSubscriptionCancel',
    'required_spec209_blackbox_mustBePreparedToReceiveAnOnCompleteSignalWithPrecedingRequestCall',
    'required_spec209_blackbox_mustBePreparedToReceiveAnOnCompleteSignalWithoutPrecedingRequestCall',
    'required_spec210_blackbox_mustBePreparedToReceiveAnOnErrorSignalWithPrecedingRequestCall',
    'required_spec210_blackbox_mustBePreparedToReceiveAnOnErrorSignalWithoutPrecedingRequestCall',
    'untested_spec211_blackbox_mustMakeSureThatAllCallsOnItsMethodsHappenBeforeTheProcessingOfTheRespectiveEvents',
    'untested_spec212_blackbox_mustNotCallOnSubscribeMoreThanOnceBasedOnObjectEquality',
    'untested_spec213_blackbox_failingOnSignalInvocation',
    'required_spec213_blackbox_onSubscribe_mustThrowNullPointerExceptionWhenParametersAreNull',
    'required_spec213_blackbox_onNext_mustThrowNullPointerExceptionWhenParametersAreNull',
    'required_spec213_blackbox_onError_mustThrowNullPointerExceptionWhenParametersAreNull',
    'untested_spec301_blackbox_mustNotBeCalledOutsideSubscriberContext',
    'untested_spec308_blackbox_requestMustRegisterGivenNumberElementsToBeProduced',
    'untested_spec310_blackbox_requestMaySynchronouslyCallOnNextOnSubscriber',
    'untested_spec311_blackbox_requestMaySynchronouslyCallOnCompleteOrOnError',
    'untested_spec314_blackbox_cancelMayCauseThePublisherToShutdownIfNoOtherSubscriptionExists',
    'untested_spec315_blackbox_cancelMustNotThrowExceptionAndMustSignalOnError',
    'untested_spec316_blackbox_requestMustNotThrowExceptionAndMustOnErrorTheSubscriber',
]

JAVA_PROCESSOR_ONLY = [
    'required_spec104_mustCallOnErrorOnAllItsSubscribersIfItEncountersANonRecoverableError',
    'mustImmediatelyPassOnOnErrorEventsReceivedFromItsUpstreamToItsDownstream',
    'required_mustRequestFromUpstreamForElementsThatHaveBeenRequestedLongAgo',
]


#: Required tests sansrs adds to the Publisher verification (docs/tck.md, "Beyond the Java TCK").
SANSRS_PUBLISHER = [
    "test_required_spec_1_5_empty_publisher_must_signal_on_complete",
    "test_required_spec_1_10_same_subscriber_subscribing_twice_must_not_disturb_its_first_"
    "subscription",
    "test_required_spec_3_8_long_haul_every_request_must_be_honoured_exactly",
    "test_required_spec_3_8_concurrent_request_calls_must_each_register_their_demand",
    "test_required_spec_3_12_cancel_late_in_a_long_stream_must_stop_signalling_and_release_the_"
    "subscriber",
    "test_required_spec_3_17_demand_additions_must_saturate_at_long_max_value",
]


def python_name(java: str) -> str:
    """``required_spec101_fooBar`` -> ``test_required_spec_1_1_foo_bar``."""
    match = re.match(r"(required|optional|untested|stochastic)_spec(\d)(\d\d)_(.*)", java)
    head, rest = ("", java) if match is None else (
        f"{match[1]}_spec_{match[2]}_{int(match[3])}_", match[4])
    rest = re.sub(r"(\d+)", r"_\1_", rest.replace("NPE", "Npe"))
    rest = re.sub(r"_+", "_", re.sub(r"([A-Z])", r"_\1", rest).lower()).strip("_")
    return f"test_{head}{rest}"


def test_naming_rule_examples() -> None:
    assert python_name("required_spec101_subscriptionRequestMustResultInTheCorrectNumberOfProducedElements") == (
        "test_required_spec_1_1_subscription_request_must_result_in_the_correct_number_of_produced_elements")
    assert python_name("required_createPublisher3MustProduceAStreamOfExactly3Elements") == (
        "test_required_create_publisher_3_must_produce_a_stream_of_exactly_3_elements")


@pytest.mark.parametrize(("kit", "java", "extra"), [
    (PublisherVerification, JAVA_PUBLISHER, SANSRS_PUBLISHER),
    (SubscriberWhiteboxVerification, JAVA_WHITEBOX, []),
    (SubscriberBlackboxVerification, JAVA_BLACKBOX, []),
    (IdentityProcessorVerification, JAVA_PUBLISHER + JAVA_WHITEBOX + JAVA_PROCESSOR_ONLY,
     SANSRS_PUBLISHER),
], ids=["publisher", "whitebox", "blackbox", "identity-processor"])
def test_every_java_tck_test_is_ported_and_only_the_listed_ones_added(
    kit: type, java: list[str], extra: list[str],
) -> None:
    ported = {name for name in dir(kit) if name.startswith("test_")}
    assert ported == {python_name(name) for name in java} | set(extra)


def test_tests_added_beyond_the_java_tck_are_required() -> None:
    for name in SANSRS_PUBLISHER:
        assert name.startswith("test_required_spec_"), name


def test_every_ported_test_declares_its_kind_and_rule() -> None:
    for kit in (PublisherVerification, SubscriberWhiteboxVerification,
                SubscriberBlackboxVerification, IdentityProcessorVerification):
        for name in dir(kit):
            if not name.startswith("test_"):
                continue
            rule = getattr(kit, name).rule
            match = re.match(r"test_(required|optional|untested|stochastic)_spec_(\d)_(\d+)_", name)
            if match:
                assert rule == f"{match[2]}.{match[3]}", name
