"""sansrs.tck: a port of the Reactive Streams TCK for pytest.

Subclass one of the verifications in a ``Test*`` class of your test suite:

- ``PublisherVerification``: implement ``create_publisher(elements)``;
- ``SubscriberWhiteboxVerification``: ``create_subscriber(probe)``;
- ``SubscriberBlackboxVerification``: ``create_subscriber()``;
- ``IdentityProcessorVerification``: ``create_identity_processor(buffer_size)``.

Each rule of the Java TCK is one ``test_*`` method named after it. This package
is a test-support layer (like ``sansrs.adapters``): it uses threads and clocks
to wait for signals; the sans-IO core never imports it. It needs pytest
(``pip install 'sansrs[tck]'``, which brings pytest-timeout too). See docs/tck.md.

Every test runs on a fresh copy of the class's ``TestEnvironment``, within a
deadline (``test_deadline_ms``), with its own seed (``TCK_SEED`` to repeat one);
a failure names the broken rule and shows the implementation's own frames.
"""

from ._base import Verification
from ._env import RuleViolation, StressSettings, TestEnvironment
from ._manual import ManualPublisher, ManualSubscriber, new_manual_subscriber, subscribe
from ._probes import Latch, Promise, Receptacle
from ._processor import TEST_BUFFER_SIZE, IdentityProcessorVerification
from ._publisher import PublisherVerification
from ._rules import RULES, rule_text
from ._subscriber import SubscriberBlackboxVerification, SubscriberWhiteboxVerification
from ._subscriber_support import (
    BlackboxSubscriberProxy,
    SubscriberPuppet,
    WhiteboxSubscriberProbe,
)

__all__ = [
    "RULES",
    "TEST_BUFFER_SIZE",
    "BlackboxSubscriberProxy",
    "IdentityProcessorVerification",
    "Latch",
    "ManualPublisher",
    "ManualSubscriber",
    "Promise",
    "PublisherVerification",
    "Receptacle",
    "RuleViolation",
    "StressSettings",
    "SubscriberBlackboxVerification",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "TestEnvironment",
    "Verification",
    "WhiteboxSubscriberProbe",
    "new_manual_subscriber",
    "rule_text",
    "subscribe",
]
