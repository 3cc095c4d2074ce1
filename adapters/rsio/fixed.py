"""Publishing fixed-size elements: :class:`FixedSizePublisher`.

A publisher served in fixed-size mode declares ``element_size`` (an int > 0)
in its onSubscribe; its elements then leave packed (onNextPacked), and the
subscriber may read them with ``subscribe_packed``. Every element must be
exactly ``element_size`` bytes: a wrong one fails that subscription with
onError, after the elements before it (docs/protocols/rsio.md, "Adapters")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeAlias

from sansrs.streams import Publisher, Subscriber, from_generator

from .types import ElementReader

__all__ = ["FixedSizePublisher"]

_BYTES = (bytes, bytearray, memoryview)

#: What a FixedSizePublisher publishes: a buffer of elements back to back
#: (bytes, bytearray, memoryview), a re-iterable collection of elements (a
#: list, a tuple), a function returning a fresh iterable for each subscriber
#: (a generator function), or a Publisher of bytes.
FixedSizeSource: TypeAlias = (
    bytes
    | bytearray
    | memoryview
    | Iterable[bytes]
    | Callable[[], Iterable[bytes]]
    | Publisher[bytes]
)


class FixedSizePublisher:
    """A Publisher of ``element_size``-byte elements, served in fixed-size mode.

        FixedSizePublisher(8, b"".join(i.to_bytes(8, "big") for i in range(100)))
        FixedSizePublisher(8, [i.to_bytes(8, "big") for i in range(100)])
        FixedSizePublisher(16, lambda: read_records(path))    # a fresh iterator each time
        FixedSizePublisher(4, some_publisher)                 # any Publisher of bytes

    Except for a Publisher source, the adapters read it in bulk
    (:attr:`packed_reader`): the elements one turn may send leave as one
    onNextPacked without a call per element. A one-shot iterator (a
    generator object) serves only its first subscriber; pass the generator
    function instead to serve many."""

    __slots__ = ("_buffer", "_factory", "_publisher", "element_size")

    def __init__(self, element_size: int, elements: FixedSizeSource) -> None:
        if type(element_size) is not int or element_size <= 0:
            raise ValueError(f"element_size must be an int > 0, not {element_size!r}")
        self.element_size = element_size
        self._buffer: bytes | None = None
        self._factory: Callable[[], Iterable[bytes]] | None = None
        if isinstance(elements, _BYTES):
            buffer = bytes(elements)
            if len(buffer) % element_size:
                raise ValueError(
                    f"a buffer of {len(buffer)} bytes is not whole {element_size}-byte elements"
                )
            self._buffer = buffer
            self._factory = lambda: _slices(buffer, element_size)
        elif callable(getattr(elements, "subscribe", None)):
            self._publisher: Publisher[bytes] = elements  # type: ignore[assignment]
            return
        elif callable(elements):
            self._factory = elements
        elif isinstance(elements, Iterable):
            if iter(elements) is elements:  # one-shot: one subscriber only
                shot: list[Iterable[bytes]] = [elements]
                self._factory = lambda: _once(shot)
            else:
                self._factory = lambda: elements
        else:
            raise TypeError(
                "elements must be a bytes buffer, an iterable of bytes, a function returning "
                f"one, or a Publisher, not {type(elements).__name__}"
            )
        self._publisher = from_generator(self._factory)

    def subscribe(self, subscriber: Subscriber[bytes]) -> None:
        self._publisher.subscribe(subscriber)

    @property
    def packed_reader(self) -> Callable[[], ElementReader] | None:
        """How the adapters open a bulk reader for one subscription (None for
        a Publisher source: it is pulled element by element)."""
        if self._buffer is not None:
            buffer = self._buffer
            return lambda: _BufferReader(buffer, self.element_size)
        factory = self._factory
        if factory is None:
            return None
        return lambda: _ElementsReader(iter(factory()), self.element_size)


def _slices(buffer: bytes, size: int) -> Iterator[bytes]:
    return (buffer[i : i + size] for i in range(0, len(buffer), size))


def _once(shot: list[Iterable[bytes]]) -> Iterable[bytes]:
    if not shot:
        raise RuntimeError("this one-shot iterator was published already; pass a function")
    return shot.pop()


class _BufferReader:
    """Elements back to back in one buffer: each read is one slice."""

    __slots__ = ("_buffer", "_pos", "_size")

    def __init__(self, buffer: bytes, size: int) -> None:
        self._buffer = memoryview(buffer)
        self._size = size
        self._pos = 0

    def read(self, max_count: int) -> bytes:
        start = self._pos
        self._pos = min(len(self._buffer), start + max_count * self._size)
        return bytes(self._buffer[start : self._pos])

    def close(self) -> None:
        self._pos = len(self._buffer)


class _ElementsReader:
    """Elements from an iterator, joined per read. A failure (the iterator
    raising, an element of the wrong size) ends the read before it: the
    elements read so far go out, the next read raises it."""

    __slots__ = ("_error", "_it", "_size")

    def __init__(self, it: Iterator[bytes], size: int) -> None:
        self._it = it
        self._size = size
        self._error: Exception | None = None

    def read(self, max_count: int) -> bytes:
        if self._error is not None:
            raise self._error
        size = self._size
        got: list[bytes] = []
        while len(got) < max_count:
            try:
                element = next(self._it)
            except StopIteration:
                break
            except Exception as exc:  # the source failed: what came before it goes first
                self._error = exc
                break
            if not isinstance(element, _BYTES):
                self._error = TypeError(
                    f"an rsio element must be bytes, not {type(element).__name__}"
                )
                break
            if len(element) != size:
                self._error = ValueError(
                    f"element of {len(element)} bytes; element_size is {size}"
                )
                break
            got.append(bytes(element))
        if not got and self._error is not None:
            raise self._error
        return b"".join(got)

    def close(self) -> None:
        close = getattr(self._it, "close", None)
        if callable(close):  # a generator: its finally blocks run
            close()
