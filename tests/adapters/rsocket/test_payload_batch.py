"""``PayloadBatch`` (what ``request_stream_batches`` hands out) held to the
list of the same payloads over the whole read-only Sequence protocol, and
the engine-side sink (``fast.DataRuns``) that keeps items without metadata
as their bytes: the same items, in order, however they were put."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sansrs.adapters.drive.queues import CreditQueue
from sansrs.adapters.rsocket import PayloadBatch
from sansrs.adapters.rsocket.fast import DataRuns
from sansrs.adapters.rsocket.types import Payload

_BYTES = st.binary(max_size=6)
#: An entry: a payload's data alone (no metadata), or a Payload (with or
#: without metadata, as the engine may put one).
_ENTRY = st.one_of(_BYTES, st.builds(Payload, _BYTES, st.one_of(st.none(), _BYTES)))


def _payload(entry: Payload | bytes) -> Payload:
    return Payload(entry) if isinstance(entry, bytes) else entry


def _batch(entries: list[Payload | bytes]) -> tuple[PayloadBatch, list[Payload]]:
    """A batch of ``entries`` (plain when they are all bytes) and its reference list."""
    plain = all(type(e) is bytes for e in entries)
    return PayloadBatch(entries, plain), [_payload(e) for e in entries]


@given(st.lists(_ENTRY, max_size=12), st.integers(-15, 15), st.integers(-15, 15),
       st.sampled_from([None, 1, 2, -1, 3]))
def test_rsocket_payload_batch_reads_as_the_list_of_its_payloads(
    entries: list[Payload | bytes], start: int, stop: int, step: int | None
) -> None:
    batch, ref = _batch(entries)
    assert isinstance(batch, Sequence)
    assert len(batch) == len(ref) and bool(batch) == bool(ref)
    assert list(batch) == ref and list(iter(batch)) == ref
    assert all(type(p) is Payload for p in batch)
    assert list(reversed(batch)) == list(reversed(ref))
    for i in range(-len(ref), len(ref)):
        assert batch[i] == ref[i] and type(batch[i]) is Payload
    for i in (len(ref), -len(ref) - 1):
        with pytest.raises(IndexError):
            batch[i]
    part = batch[start:stop:step]
    assert type(part) is PayloadBatch and part == ref[start:stop:step]
    for p in ref:
        assert p in batch
        assert batch.index(p) == ref.index(p) and batch.count(p) == ref.count(p)
    absent = Payload(b"\xff" * 7, b"absent")
    assert absent not in batch and batch.count(absent) == 0
    assert batch.data == [p.data for p in ref]
    # Equal to the list (both ways) and to a batch of the same payloads.
    assert batch == ref and ref == batch
    assert not batch != ref  # noqa: SIM202 - __ne__ itself
    assert batch == PayloadBatch(list(ref))
    assert batch != [*ref, Payload(b"x")] and batch != [*ref[:-1], Payload(b"\xff" * 7)]
    assert batch != tuple(ref) and batch != "batch"
    assert repr(batch) == f"PayloadBatch({ref!r})"


def test_rsocket_payload_batch_is_unhashable_like_a_list() -> None:
    with pytest.raises(TypeError):
        hash(PayloadBatch([b"a"], True))


def test_rsocket_payload_batch_makes_each_payload_when_read() -> None:
    # Nothing the GC tracks waits in a plain batch: each Payload is made as
    # it is read (a new, equal one at each read) and lives as long as the
    # reader keeps it.
    entries: list[Payload | bytes] = [b"a", b"b"]
    batch = PayloadBatch(entries, True)
    assert not any(map(gc.is_tracked, entries))
    assert batch[0] == batch[0] and batch[0] is not batch[0]


def test_rsocket_data_runs_keep_items_without_metadata_as_bytes() -> None:
    queue: CreditQueue[Payload | bytes] = CreditQueue(granted=10)
    sink = DataRuns(queue)
    sink.put_data([b"a", b"b"])
    sink.put(Payload(b"c"))  # e.g. the completing item: no metadata, stays plain
    sink.put_many([Payload(b"d"), Payload(b"e")])
    assert sink.plain
    taken = queue.get_batch(0.0)
    assert taken == [b"a", b"b", b"c", b"d", b"e"]
    assert list(sink.payloads(iter(taken))) == [Payload(x) for x in (b"a", b"b", b"c", b"d", b"e")]
    assert sink.batch(taken) == [Payload(x) for x in (b"a", b"b", b"c", b"d", b"e")]


def test_rsocket_data_runs_with_metadata_items_hand_out_the_same_payloads() -> None:
    queue: CreditQueue[Payload | bytes] = CreditQueue(granted=10)
    sink = DataRuns(queue)
    sink.put_data([b"a"])
    sink.put(Payload(b"b", b"m"))
    sink.put_data([b"c"])
    sink.put_many([Payload(b"d"), Payload(b"e", b"")])
    # Cleared before the Payload with metadata went in: the consumer that
    # takes it makes every entry by the general path.
    assert not sink.plain
    taken = queue.get_batch(0.0)
    expected = [Payload(b"a"), Payload(b"b", b"m"), Payload(b"c"), Payload(b"d"),
                Payload(b"e", b"")]
    assert list(sink.payloads(iter(taken))) == expected
    assert sink.batch(taken) == expected
    assert sink.batch(taken).data == [b"a", b"b", b"c", b"d", b"e"]
