"""The Reactive Streams 1.0 model for Python (sans-IO: no threads, no clocks).

- Protocols: ``Publisher``, ``Subscriber``, ``Subscription``, ``Processor``.
- Building blocks that keep the rules: ``Mailbox`` (serialized signals,
  trampolined recursion, thread-safe cancel), ``IteratorSubscription``,
  ``ProcessorBase``.
- Publishers: ``from_iterable``, ``from_generator``, ``range_publisher``,
  ``empty_publisher``, ``error_publisher``.
- Subscribers: ``CollectingSubscriber``.
- Processors: ``MapProcessor``, ``FilterProcessor``, ``BatchProcessor``.

docs/streams.md describes the rules, the thread-safety pattern and the
differences from the SPI draft; ``sansrs.tck`` verifies implementations.
"""

from ._api import (
    MAX_DEMAND,
    RULE_3_9,
    IllegalArgumentError,
    Processor,
    Publisher,
    Subscriber,
    Subscription,
    add_demand,
    require_not_none,
)
from ._processors import BatchProcessor, FilterProcessor, MapProcessor, ProcessorBase
from ._publishers import (
    IterablePublisher,
    IteratorSubscription,
    empty_publisher,
    error_publisher,
    from_generator,
    from_iterable,
    range_publisher,
)
from ._report import set_subscriber_error_hook
from ._serial import Mailbox
from ._subscribers import CollectingSubscriber

__all__ = [
    "MAX_DEMAND",
    "RULE_3_9",
    "BatchProcessor",
    "CollectingSubscriber",
    "FilterProcessor",
    "IllegalArgumentError",
    "IterablePublisher",
    "IteratorSubscription",
    "Mailbox",
    "MapProcessor",
    "Processor",
    "ProcessorBase",
    "Publisher",
    "Subscriber",
    "Subscription",
    "add_demand",
    "empty_publisher",
    "error_publisher",
    "from_generator",
    "from_iterable",
    "range_publisher",
    "require_not_none",
    "set_subscriber_error_hook",
]
