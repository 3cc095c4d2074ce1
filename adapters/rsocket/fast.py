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
  served (178 vs 375 ns). :func:`new_requests` makes a run of them by C
  calls alone, for ``fire_and_forget_many`` (``bench_tcp.py`` rows
  ``fnf16``, ``fnf16m``; ``bench_opcodes.py --server-items fnf16m``: 20.9
  -> 0.9 bytecodes per item on the server).
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
- :class:`PayloadEntries` and :class:`DataRuns`: a stream's items without
  metadata wait in its queue as their ``bytes`` (not tracked by the garbage
  collector), made Payloads by C calls on the consumer's side as they are
  handed out, by :class:`PayloadEntries` for both drivers; every batch API
  hands out a :class:`~.batch.PayloadBatch` of the entries. Every
  stream's sink is a :class:`DataRuns` (the core's runs go in as they come,
  one ``put_many``), in front of a blocking stream's queue, an asyncio
  stream (whose ``async for`` makes at most ``PACKED_BATCH`` at a time) or
  ``batch_publisher``'s Subscriber. Payloads made on
  the connection thread and held up to ``prefetch`` survived collections,
  were promoted and brought full ones (``bench_tcp.py`` rows ``stream16``,
  ``stream16b``; the client's CPU per item in ``bench_cpu_per_op.py``).
- :class:`FireAndForgets` and :func:`delegate`: ``peer.fire_and_forget(data)``
  is one Python frame, the queue's own :meth:`FireAndForgets.send`, reached
  through a C-level property (``bench_tcp.py`` row ``fnf16``).
  Under asyncio the same was 0.3 µs of the client's 0.8 µs CPU per item
  (``--impl sansrs-asyncio`` of both).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter, countOf, is_, itemgetter
from threading import get_ident
from typing import Any, Protocol, TypeVar, cast

from ..drive.queues import Batcher
from .batch import PayloadBatch, payload_of, payloads_of
from .types import Payload, Request, RoutedRequest

__all__ = [
    "PAYLOAD_ENTRIES",
    "DataRuns",
    "FireAndForgets",
    "PayloadEntries",
    "all_bytes",
    "as_payload",
    "as_payloads",
    "delegate",
    "new_request",
    "new_requests",
    "new_routed_request",
    "new_tuple",
    "payload_batches",
    "plain_payloads",
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


def all_bytes(items: list[Any]) -> bool:
    """Every one of ``items`` (at least one) is plain ``bytes``: data
    without metadata, what goes on as is (one C pass over a batch)."""
    return countOf(map(type, items), bytes) == len(items) > 0


def as_payloads(items: list[object], out: list[Payload]) -> None:
    """:func:`as_payload` of each of ``items``, appended to ``out`` in order;
    plain ``bytes`` (the common case) are made by C calls alone
    (``bench_tcp.py`` row ``fnf16m``). An item that is not a payload raises
    with ``out`` holding the ones before it."""
    if all_bytes(items):
        out += map(new_tuple, repeat(Payload), zip(items, repeat(None)))
        return
    for x in items:
        out.append(new_tuple(Payload, (x, None)) if type(x) is bytes else as_payload(x))


def plain_payloads(data: list[bytes]) -> list[Payload]:
    """Payloads without metadata of ``data``, by C calls alone (one call
    per run, none per item)."""
    return list(map(new_tuple, repeat(Payload), zip(data, repeat(None))))


def payload_batches(
    consume: Callable[[list[Payload]], None],
    consume_data: Callable[[list[bytes]], None] | None = None,
) -> Callable[[list[Payload | bytes]], None]:
    """``consume`` of batches whose items are Payloads or plain ``bytes``
    (data, no metadata: what ``fire_and_forget`` and ``fire_and_forget_many``
    queue as is, bench_tcp.py rows ``fnf16``, ``fnf16m``), each made a
    Payload in order; an all-``bytes`` or all-Payload batch by C calls
    alone. With ``consume_data``, an all-``bytes`` batch goes to it as is:
    no Payload made (thousands of tracked tuples a batch brought the
    client's garbage collections)."""

    def consume_payloads(batch: list[Payload | bytes]) -> None:
        kinds = set(map(type, batch))
        if kinds == {bytes}:  # fire_and_forget(_many) of plain bytes
            if consume_data is not None:
                consume_data(batch)  # type: ignore[arg-type]
                return
            consume(plain_payloads(batch))  # type: ignore[arg-type]
        elif kinds == {Payload}:  # fire_and_forget_many's parts
            consume(batch)  # type: ignore[arg-type]
        else:
            payloads: list[Payload] = []
            as_payloads(batch, payloads)  # type: ignore[arg-type]
            consume(payloads)

    return consume_payloads


class EntryQueue(Protocol):
    """Where a :class:`DataRuns` puts entries: a blocking stream's
    :class:`~..drive.queues.CreditQueue`, or an asyncio stream made with a packing
    (``AsyncStream``, whose :class:`PayloadEntries` unpacks every entry)."""

    def put(self, item: Any) -> None: ...

    def put_many(self, items: list[Any]) -> None: ...

    def finish(self, error: BaseException | None = None) -> None: ...

    def close(self, error: BaseException | None = None) -> None: ...


class DataRuns:
    """The engine's side (a sink) of a stream's queue (:class:`EntryQueue`,
    either driver's) whose items without metadata wait as their ``bytes``: :meth:`put_data`
    takes a run of them as is, ``put``/``put_many`` take Payloads (one
    without metadata goes in as its data). On the consumer's thread,
    :class:`PayloadEntries` turns what the queue handed out into Payloads
    as they are read (:attr:`plain` says whether all are ``bytes``): the
    same items in the same order; the queue's accounting (one entry per
    item) is untouched."""

    __slots__ = ("plain", "queue")

    def __init__(self, queue: EntryQueue) -> None:
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
            self.queue.put_many(items)

    def put_data(self, data: list[bytes]) -> None:
        """Items without metadata, by their data (a core's run)."""
        self.queue.put_many(data)

    def finish(self, error: BaseException | None = None) -> None:
        self.queue.finish(error)

    def close(self, error: BaseException | None = None) -> None:
        self.queue.close(error)


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
        room: Callable[[float | None], None] | None = None,
    ) -> None:
        super().__init__(submit, consume, is_owner, capacity, room)
        self._checked = checked

    def send(
        self, data: bytes | str, metadata: bytes | str | None = None, timeout: float | None = None
    ) -> None:
        """Queue REQUEST_FNF. ``timeout`` bounds the wait for room (see
        :meth:`~..drive.queues.Batcher.put`)."""
        if type(data) is not bytes or metadata is not None:
            self.put(self._checked(data, metadata), timeout)
            return
        items = self._items
        # The common case inline: open, room, a batch under way that this
        # thread started (the put that starts one asks ``room`` first; and
        # that thread is not the owner until its batch is drained, see
        # Batcher._producer): ``is_owner`` (a property through attrgetter)
        # was half the calling thread's CPU per item (bench_cpu_per_op.py
        # --only fnf16: 0.23 -> 0.14 µs).
        if (
            self._closed
            or len(items) >= self._capacity
            or not self._scheduled
            or self._producer != get_ident()
        ):
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


# Request's slots, stored through their descriptors (C methods: no Python
# frame per request, and the frozen ``__setattr__`` is not involved).
_SET_DATA = Request.__dict__["data"].__set__
_SET_METADATA = Request.__dict__["metadata"].__set__
_SET_PEER = Request.__dict__["peer"].__set__


def new_requests(data: list[bytes], metadata: list[bytes | None], peer: object) -> list[Request]:
    """``[Request(d, m, peer) for d, m in zip(data, metadata)]`` by C calls
    alone (a run of fire-and-forgets served at once)."""
    requests: list[Request] = list(map(object.__new__, repeat(Request, len(data))))
    deque(map(_SET_DATA, requests, data), 0)
    deque(map(_SET_METADATA, requests, metadata), 0)
    deque(map(_SET_PEER, requests, repeat(peer)), 0)
    return requests


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


class PayloadEntries:
    """The one way both drivers turn queued entries into Payloads: an entry
    is a payload without metadata as its data (``bytes``, which the garbage
    collector does not track) or a Payload put as itself. A blocking
    stream's queue holds them (fed by a :class:`DataRuns`), an asyncio
    stream too (this is its :class:`~..drive.aio_streams.Packing`); every
    batch API hands them out as a :class:`~.batch.PayloadBatch`.
    Stateless: one serves all (:data:`PAYLOAD_ENTRIES`). Under asyncio,
    batches of any size and single items kept as bytes too took
    ``bench_opcodes.py --items stream16b-asyncio`` from 8.6 to 6.0
    bytecodes per item (the 512-item lists and their per-item unpacking
    gone)."""

    __slots__ = ()

    #: One entry as a Payload (the per-item check, when entries are mixed).
    unpack = staticmethod(payload_of)
    #: ``payloads(taken, plain)``: an iterator of entries as Payloads made
    #: as it is iterated; ``plain``: all are ``bytes`` (C calls alone).
    payloads = staticmethod(payloads_of)

    @staticmethod
    def plain(entries: list[Any]) -> bool:
        """All of ``entries`` are data (``bytes``): C calls alone."""
        return set(map(type, entries)) <= _DATA_ONLY

    def unpack_all(self, entries: list[Any]) -> list[Payload]:
        """``entries`` as a list of Payloads, made at once."""
        return list(payloads_of(iter(entries), self.plain(entries)))

    def batch(self, entries: list[Any], plain: bool | None = None) -> PayloadBatch:
        """``entries`` as a batch (Payloads made as it is read); ``plain``
        if the caller knows whether all are ``bytes``, else checked here."""
        return PayloadBatch(entries, self.plain(entries) if plain is None else plain)


_DATA_ONLY = {bytes}

#: The one :class:`PayloadEntries` (it keeps no state).
PAYLOAD_ENTRIES = PayloadEntries()
