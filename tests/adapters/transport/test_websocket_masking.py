"""Masking in bulk (websocket/runs.py) against the frame-at-a-time reference
(frames.encode_data_frame, frames.mask): a client's batches of same-length
messages are byte for byte the frames one at a time gives with the same
keys (RFC 6455, 5.3: each octet XOR its key octet), and a server's read of
such frames is byte for byte the run of the messages, whatever the payload
length (every residue mod 4: where the copies of a key end), the count
(around the column and conversion thresholds) and the offset; both with the
C extension (when built) and with the pure-Python paths."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sansrs.adapters.transport.websocket import runs
from sansrs.adapters.transport.websocket.frames import KeySource, encode_data_frame
from sansrs.adapters.transport.websocket.runs import (
    MAX_MASKED_BATCH,
    MAX_MASKED_COUNT,
    count_uniform,
    encode_run,
    frames_to_run,
)

from tests.adapters.transport.masking_paths import BOTH, masking
from tests.adapters.transport.test_websocket_records import run_of


def keyed_source(seed: int) -> KeySource:
    """A KeySource of reproducible bytes (a failing example replays)."""
    rng = random.Random(seed)
    return KeySource(rng.randbytes)


COUNTS = st.sampled_from([4, 5, 63, 64, 65, 255, 256, 257, 700, MAX_MASKED_COUNT,
                          MAX_MASKED_COUNT + 1, 2 * MAX_MASKED_COUNT + 3])


@BOTH
@settings(max_examples=40, deadline=None)
@given(st.integers(4, MAX_MASKED_BATCH), COUNTS, st.integers(0, 7), st.integers(0, 2**32),
       st.booleans())
def test_masked_batches_are_the_frames_one_at_a_time_byte_for_byte(
    path: str, n: int, count: int, start: int, seed: int, offered_as_bytearray: bool
) -> None:
    """The differential of the client's bulk masking: the keys found in the
    frames, then each frame built alone with its key (the plain path); and
    every frame has a key of its own."""
    rng = random.Random(seed)
    messages = [rng.randbytes(n) for _ in range(count)]
    run = run_of(messages)
    data: bytes | bytearray = bytes(start) + run
    if offered_as_bytearray:
        data = bytearray(data)
    with masking(path):
        wire, used = encode_run(data, keyed_source(seed), start=start)
    assert used == len(run)
    stride = n + 6
    assert len(wire) == count * stride
    keys = [wire[i * stride + 2 : i * stride + 6] for i in range(count)]
    assert wire == b"".join(encode_data_frame(2, m, k) for m, k in zip(messages, keys, strict=True))
    assert len(set(keys)) > count - 3  # RFC 6455, 5.3: a fresh key per frame


@BOTH
@settings(max_examples=40, deadline=None)
@given(st.integers(4, MAX_MASKED_BATCH), st.integers(4, MAX_MASKED_COUNT), st.integers(0, 7),
       st.integers(0, 2**32))
def test_masked_frames_read_in_bulk_are_the_run_byte_for_byte(
    path: str, n: int, count: int, off: int, seed: int
) -> None:
    """The differential of the server's bulk unmasking: frames masked one
    at a time (the plain path) with drawn keys, at an offset in the read,
    become the record head and then each message behind its 3-byte length;
    nothing of a key or header is left and no byte of a neighbour spoiled."""
    rng = random.Random(seed)
    messages = [rng.randbytes(n) for _ in range(count)]
    frames = b"".join(encode_data_frame(2, m, rng.randbytes(4)) for m in messages)
    read = rng.randbytes(off) + frames + rng.randbytes(5)
    head = b"\x12" + rng.randbytes(4)
    with masking(path):
        assert frames_to_run(read, off, count, n, True, head) == head + run_of(messages)


@pytest.mark.parametrize("n", [4, 5, 6, 7, 21, 22, 24, 25, 125])
def test_key_copies_cover_the_key_field_and_payload_and_stop_before_the_next_payload(
    n: int,
) -> None:
    """runs._copies (the doublings with overlap): the same integer as the
    copies of each key ORed one by one, 0 to ceil(n / 4) words on; with
    keys in place in frames of ``n``-byte payloads, no copy reaches the
    next frame's key bytes 3-5 or its payload."""
    stride = n + 6
    words = (n + 3) // 4
    rng = random.Random(n)
    frames = 7
    keys = sum(int.from_bytes(rng.randbytes(4), "little") << 8 * (i * stride + 2)
               for i in range(frames))
    copies = runs._copies(keys, words)
    expected = 0
    for j in range(words + 1):
        expected |= keys << 32 * j
    assert copies == expected
    for i in range(1, frames):  # frame i's bytes 3.. hold only its own key and copies
        own = (keys >> 8 * i * stride) & 0xFFFFFFFF << 16
        mine = 0
        for j in range(words + 1):
            mine |= own << 32 * j
        got = (copies >> 8 * i * stride) & ((1 << 8 * stride) - 1)
        rest = (1 << 8 * (stride - 3)) - 1
        assert got >> 24 == mine >> 24 & rest


def test_short_masked_payloads_go_into_frames_a_byte_column_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long batch of short payloads (fnf16m's 22-byte frames) is framed
    without cutting each message out (no object per message): still the
    frames one at a time gives."""

    def no_cutting(*args: object) -> object:
        raise AssertionError("messages cut out one by one")

    monkeypatch.setattr(runs, "_cut", no_cutting)
    messages = [bytes((i % 251,)) * 22 for i in range(3000)]
    with masking("python"):
        wire, used = encode_run(run_of(messages), KeySource())
    assert used == len(run_of(messages))
    keys = [wire[i * 28 + 2 : i * 28 + 6] for i in range(3000)]
    assert wire == b"".join(encode_data_frame(2, m, k) for m, k in zip(messages, keys, strict=True))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 5000), st.integers(0, 2**32), st.integers(1, 1 << 62))
def test_count_uniform_counts_the_leading_records_with_the_header(
    stride: int, count: int, seed: int, most: int
) -> None:
    """count_uniform (its whole-column compare, then lstrip where a column
    differs) against a record-by-record count: the same answer wherever
    the first record of another header is, if any."""
    rng = random.Random(seed)
    width = min(stride, 3)
    header = rng.randbytes(width)
    records = [header + rng.randbytes(stride - width) for _ in range(count)]
    if count and rng.random() < 0.7:  # one record of another header somewhere
        at = rng.randrange(count)
        spoiled = bytearray(records[at])
        spoiled[rng.randrange(width)] ^= 1 + rng.randrange(255)
        records[at] = bytes(spoiled)
    data = rng.randbytes(3) + b"".join(records) + rng.randbytes(rng.randrange(stride))
    expected = 0
    for record in records:
        if record[:width] != header or expected >= most:
            break
        expected += 1
    assert count_uniform(data, 3, len(data), stride, header, most) == expected
