"""Every speed trick of the RSocket adapters, in one place. Each is an
ordinary value built a cheaper way, and each names the figure that pays for
it (``benchmarks/bench_fast_paths.py --runs 5``, ns per object, CPython 3.11
on the project machine; the end-to-end effect in ``docs/performance.md``).

- :data:`new_tuple`: ``tuple.__new__(Payload, (data, metadata))`` builds a
  :class:`~.types.Payload` without the named tuple's Python-level
  ``__new__``: one per item received or sent (118 vs 193 ns).
- :func:`new_request`: a :class:`~.types.Request` filled through a
  same-layout builder class and ``__class__`` assignment, without the frozen
  dataclass ``__init__`` (as the core builds its events): one per request
  served (178 vs 375 ns).
- :func:`new_routed_request`: the same trick for the router's
  :class:`~.types.RoutedRequest`, one per routed request (221 vs 877 ns).
- :func:`as_payload`: tests the common case (``bytes``, no metadata) first
  (167 ns, against 195 ns for ``Payload(data)`` itself); :func:`as_payloads`
  makes a list of plain ``bytes`` Payloads by C calls alone (one
  ``fire_and_forget_many`` part: ``bench_tcp.py`` row ``fnf16m``).
- :func:`payload_batches`: ``fire_and_forget(data)`` of plain ``bytes``
  queues the bytes themselves; the connection thread makes the batch's
  Payloads by C calls (``bench_tcp.py`` row ``fnf16``; ``bench_opcodes.py
  --items fnf16``: 8 bytecodes less per call on the application thread).
- :class:`DataRuns`: a blocking stream's items without metadata wait in
  its queue as their ``bytes`` (not tracked by the garbage collector; the
  core's runs go in as they come, one ``put_many``), made Payloads by C
  calls on the consumer's thread as they are handed out. Payloads made on
  the connection thread and held up to ``prefetch`` survived collections,
  were promoted and brought full ones (``bench_tcp.py`` rows ``stream16``,
  ``stream16b``; the client's CPU per item in ``bench_cpu_per_op.py``).
- :class:`FireAndForgets` and :func:`delegate`: ``peer.fire_and_forget(data)``
  is one Python frame, the queue's own :meth:`FireAndForgets.send`, reached
  through a C-level property (``bench_tcp.py`` row ``fnf16``).
- :class:`PayloadPacking`: an asyncio stream may hold a run of payloads
  without metadata as their ``bytes`` (not tracked by the garbage
  collector; ``AsyncStream.put_packed``), made Payloads by C calls as the
  consumer takes them, batches at most ``PACKED_BATCH`` at a time. Payloads
  made ahead and held up to ``prefetch`` survived collections, were promoted
  and brought full ones: 0.3 µs of the asyncio client's 0.8 µs CPU per item
  (``bench_tcp.py`` rows ``stream16`` / ``stream16b``, ``--impl
  sansrs-asyncio``; ``bench_cpu_per_op.py --impl sansrs-asyncio``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from typing import Any, TypeVar, cast

from ..drive.queues import Batcher, CreditQueue
from .batch import PayloadBatch, payloads_of
from .types import Payload, Request, RoutedRequest

__all__ = [
    "DataRuns",
    "FireAndForgets",
    "PayloadPacking",
    "as_payload",
    "as_payloads",
    "delegate",
    "new_request",
    "new_routed_request",
    "new_tuple",
    "payload_batches",
]

F = TypeVar("F", bound=Callable[..., Any])

_DATA = itemgetter(0)
_METADATA = itemgetter(1)

#: ``new_tuple(Payload, (data, metadata))``: a Payload without NamedTuple's
#: ``__new__`` (bench_fast_paths: payload_new_tuple vs payload_call).
new_tuple = tuple.__new__


def _bytes(value: object, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def as_payload(value: object, metadata: object = None) -> Payload:
    """A handler's item or a caller's argument as a :class:`Payload`:
    ``Payload``, ``bytes``/``str`` (data), or ``(data, metadata)``."""
    if type(value) is Payload:
        return value
    if type(value) is bytes and metadata is None:  # the common case, first
        return new_tuple(Payload, (value, None))  # Payload(value) minus its __new__
    if isinstance(value, tuple) and len(value) == 2:
        data, md = value
        return Payload(_bytes(data, "data"), None if md is None else _bytes(md, "metadata"))
    md = None if metadata is None else _bytes(metadata, "metadata")
    return Payload(_bytes(value, "data"), md)


def as_payloads(items: list[object], out: list[Payload]) -> None:
    """:func:`as_payload` of each of ``items``, appended to ``out`` in order;
    plain ``bytes`` (the common case) are made by C calls alone
    (``bench_tcp.py`` row ``fnf16m``). An item that is not a payload raises
    with ``out`` holding the ones before it."""
    if set(map(type, items)) == {bytes}:
        out += map(new_tuple, repeat(Payload), zip(items, repeat(None)))
        return
    for x in items:
        out.append(new_tuple(Payload, (x, None)) if type(x) is bytes else as_payload(x))


def payload_batches(
    consume: Callable[[list[Payload]], None],
) -> Callable[[list[Payload | bytes]], None]:
    """``consume`` of batches whose items are Payloads or plain ``bytes``
    (data, no metadata: what ``fire_and_forget`` queues as is, bench_tcp.py
    row ``fnf16``), each made a Payload in order; an all-``bytes`` or
    all-Payload batch by C calls alone."""

    def consume_payloads(batch: list[Payload | bytes]) -> None:
        kinds = set(map(type, batch))
        if kinds == {bytes}:  # fire_and_forget one at a time
            consume(list(map(new_tuple, repeat(Payload), zip(batch, repeat(None)))))
        elif kinds == {Payload}:  # fire_and_forget_many's parts
            consume(batch)  # type: ignore[arg-type]
        else:
            payloads: list[Payload] = []
            as_payloads(batch, payloads)  # type: ignore[arg-type]
            consume(payloads)

    return consume_payloads


class DataRuns:
    """The engine's side (a sink) of a blocking stream's :class:`CreditQueue`
    whose items without metadata wait as their ``bytes``: :meth:`put_data`
    takes a run of them as is, ``put``/``put_many`` take Payloads (one
    without metadata goes in as its data). On the consumer's thread,
    :meth:`payloads` and :meth:`batch` turn what the queue handed out into
    Payloads as they are read: the same items in the same order; the
    queue's accounting (one entry per item) is untouched."""

    __slots__ = ("plain", "queue")

    def __init__(self, queue: CreditQueue[Payload | bytes]) -> None:
        self.queue = queue
        #: Only ``bytes`` were ever put: entries become Payloads by C calls
        #: alone. Cleared (for good) *before* a Payload with metadata is put,
        #: so a consumer that took it sees it cleared.
        self.plain = True

    def put(self, item: Payload) -> None:
        if item[1] is None:
            self.queue.put(item[0])
        else:
            self.plain = False
            self.queue.put(item)

    def put_many(self, items: list[Payload]) -> None:
        # (C calls alone: e.g. every item of a stream under a lease comes here.)
        if all(map(is_, repeat(None), map(_METADATA, items))):
            self.queue.put_many(list(map(_DATA, items)))
        else:
            self.plain = False
            self.queue.put_many(items)  # type: ignore[arg-type]

    def put_data(self, data: list[bytes]) -> None:
        """Items without metadata, by their data (a core's run)."""
        self.queue.put_many(data)  # type: ignore[arg-type]

    def finish(self, error: BaseException | None = None) -> None:
        self.queue.finish(error)

    def close(self, error: BaseException | None = None) -> None:
        self.queue.close(error)

    def payloads(self, taken: Iterator[Payload | bytes]) -> Iterator[Payload]:
        """Entries taken from the queue, as Payloads made as they are iterated."""
        return payloads_of(taken, self.plain)

    def batch(self, taken: list[Payload | bytes]) -> PayloadBatch:
        """Entries taken from the queue, as one batch."""
        return PayloadBatch(taken, self.plain)


class FireAndForgets(Batcher[Payload | bytes]):
    """A connection's fire-and-forgets on their way to its thread (a
    :class:`~..drive.queues.Batcher`), with the one-at-a-time call as a
    method of its own (``bench_tcp.py`` row ``fnf16``): ``checked(data,
    metadata)`` makes the Payload of anything but plain ``bytes`` data
    (raising at the call); ``consume`` gets Payloads and ``bytes`` mixed
    (:func:`payload_batches`)."""

    def __init__(
        self,
        submit: Callable[[Callable[[], None]], None],
        consume: Callable[[list[Payload | bytes]], None],
        is_owner: Callable[[], bool],
        checked: Callable[[object, object], Payload],
        capacity: int = 4096,
    ) -> None:
        super().__init__(submit, consume, is_owner, capacity)
        self._checked = checked

    def send(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> None:
        """Queue REQUEST_FNF. ``timeout`` bounds the wait only if the connection
        has a full batch of fire-and-forgets pending (the loop is behind)."""
        if type(data) is not bytes or metadata is not None:
            self.put(self._checked(data, metadata), timeout)
            return
        items = self._items
        # The common case inline: open, room, another thread than the owner.
        if self._closed or len(items) >= self._capacity or self._is_owner():
            self.put(data, timeout)  # raises, waits for room or drains at once
            return
        items.append(data)
        if not self._scheduled:
            self.wake()


def delegate(method: F, path: str) -> F:
    """``method`` replaced by a property that returns the bound method at
    ``path`` (e.g. ``"_fnf.send"``, of the same signature): a call through it
    runs that method's frame alone (C calls find it). Keeps ``method``'s
    docstring; type checkers see ``method``."""
    return cast(F, property(attrgetter(path), doc=method.__doc__))


# Same layout as Request: filled with plain stores, then made a Request by
# __class__ assignment (bench_fast_paths: request_builder vs request_call).
_RequestBuilder: Any = type("_RequestBuilder", (), {"__slots__": Request.__dict__["__slots__"]})


def new_request(data: bytes, metadata: bytes | None, peer: object) -> Request:
    """``Request(data, metadata, peer)`` without the frozen ``__init__``."""
    request = object.__new__(_RequestBuilder)
    request.data = data
    request.metadata = metadata
    request.peer = peer
    request.__class__ = Request
    return request  # type: ignore[no-any-return]


_RoutedBuilder: Any = type(
    "_RoutedBuilder", (), {"__slots__": RoutedRequest.__dict__["__slots__"]}
)


def new_routed_request(
    request: Request,
    route: str,
    variables: Any,
    principal: Any,
    data_mime: str,
    composite: Any,
) -> RoutedRequest:
    """``RoutedRequest(...)`` of ``request`` without the frozen ``__init__``."""
    routed = object.__new__(_RoutedBuilder)
    routed.data = request.data
    routed.metadata = request.metadata
    routed.peer = request.peer
    routed.route = route
    routed.variables = variables
    routed.principal = principal
    routed.data_mime = data_mime
    routed.composite = composite
    routed.__class__ = RoutedRequest
    return routed  # type: ignore[no-any-return]


class PayloadPacking:
    """An asyncio stream's :class:`~..drive.aio_streams.Packing`: a run of
    payloads without metadata may be queued as their data
    (``AsyncStream.put_packed``), made Payloads as the consumer takes them;
    a Payload put as itself comes back as is. Stateless: one serves all."""

    __slots__ = ()

    def unpack(self, entry: Any) -> Payload:
        # Data is never a tuple: a tuple entry is a Payload put as itself.
        if isinstance(entry, tuple):
            return cast(Payload, entry)
        return new_tuple(Payload, (entry, None))

    def unpack_all(self, entries: list[Any]) -> list[Payload]:
        if set(map(type, entries)) <= _DATA_ONLY:  # data alone: C calls
            return list(map(new_tuple, repeat(Payload), zip(entries, repeat(None))))
        return list(map(self.unpack, entries))


_DATA_ONLY = {bytes}

#: The one :class:`PayloadPacking` (it keeps no state).
PAYLOAD_PACKING = PayloadPacking()
