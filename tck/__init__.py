"""sansrs.tck: a port of the Reactive Streams TCK for pytest.

Subclass one of the verifications in a ``Test*`` class of your test suite:

- ``PublisherVerification``: implement ``create_publisher(elements)``;
- ``SubscriberWhiteboxVerification``: ``create_subscriber(probe)``;
- ``SubscriberBlackboxVerification``: ``create_subscriber()``;
- ``IdentityProcessorVerification``: ``create_identity_processor(buffer_size)``.

Each rule of the Java TCK is one ``test_*`` method named after it. This package
is a test-support layer (like ``sansrs.adapters``): it uses threads and clocks
to wait for signals; the sans-IO core never imports it. It needs pytest
(``pip install 'sansrs[tck]'``). See docs/tck.md.
"""

from ._base import Verification
from ._env import (
    Latch,
    ManualPublisher,
    ManualSubscriber,
    Promise,
    Receptacle,
    TestEnvironment,
)
from ._processor import TEST_BUFFER_SIZE, IdentityProcessorVerification
from ._publisher import PublisherVerification
from ._rules import RULES, rule_text
from ._subscriber import (
    BlackboxSubscriberProxy,
    SubscriberBlackboxVerification,
    SubscriberPuppet,
    SubscriberWhiteboxVerification,
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
    "SubscriberBlackboxVerification",
    "SubscriberPuppet",
    "SubscriberWhiteboxVerification",
    "TestEnvironment",
    "Verification",
    "WhiteboxSubscriberProbe",
    "rule_text",
]
