"""Publishing fixed-size elements: :class:`FixedSizePublisher`.

A publisher served in fixed-size mode declares ``element_size`` (an int > 0)
in its onSubscribe; its elements then leave packed (one onNextPacked per
loop turn), and the subscriber may read them with ``subscribe_packed``.
Every element must be exactly ``element_size`` bytes: a wrong one fails
that subscription with onError (docs/protocols/rsio.md, "Adapters")."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeAlias

from sansrs.streams import Publisher, Subscriber, from_generator, from_iterable

__all__ = ["FixedSizePublisher"]

#: What a FixedSizePublisher publishes: a re-iterable collection (a list, a
#: tuple), a function returning a fresh iterable for each subscriber (a
#: generator function), or a Publisher of bytes.
FixedSizeSource: TypeAlias = Iterable[bytes] | Callable[[], Iterable[bytes]] | Publisher[bytes]


class FixedSizePublisher:
    """A Publisher of ``element_size``-byte elements, served in fixed-size mode.

        FixedSizePublisher(8, [i.to_bytes(8, "big") for i in range(100)])
        FixedSizePublisher(16, lambda: read_records(path))    # a fresh iterator each time
        FixedSizePublisher(4, some_publisher)                 # any Publisher of bytes

    A one-shot iterator (a generator object) serves only its first subscriber;
    pass the generator function instead to serve many."""

    __slots__ = ("_publisher", "element_size")

    def __init__(self, element_size: int, elements: FixedSizeSource) -> None:
        if type(element_size) is not int or element_size <= 0:
            raise ValueError(f"element_size must be an int > 0, not {element_size!r}")
        self.element_size = element_size
        publisher: Publisher[bytes]
        if callable(getattr(elements, "subscribe", None)):
            publisher = elements  # type: ignore[assignment]
        elif callable(elements):
            publisher = from_generator(elements)
        elif isinstance(elements, Iterable):
            publisher = from_iterable(elements)
        else:
            raise TypeError(
                "elements must be an iterable of bytes, a function returning one, or a "
                f"Publisher, not {type(elements).__name__}"
            )
        self._publisher = publisher

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        self._publisher.subscribe(subscriber)
