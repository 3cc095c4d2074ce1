"""The optional C extension (``websocket/_speedups.c``) against the
definition and the pure-Python paths: RFC 6455, 5.3 octet by octet, frames
byte for byte what one frame at a time gives, runs byte for byte what the
frames carried, out-of-bounds arguments refused with ``ValueError`` (never
a read or write past a buffer), and built wherever it can be."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sansrs.adapters.transport.websocket import frames
from sansrs.adapters.transport.websocket.frames import CMasking, KeySource, encode_data_frame
from sansrs.adapters.transport.websocket.runs import encode_run
from typing_extensions import Buffer
from wsproto.connection import ConnectionType

from tests.adapters.transport.masking_paths import can_build_c, masking
from tests.adapters.transport.test_websocket_frames import Collector, wsproto_messages
from tests.adapters.transport.test_websocket_records import run_of


def test_the_c_extension_is_built_wherever_a_compiler_and_the_headers_are() -> None:
    """The build is optional (an install without a compiler goes on with
    the pure-Python paths); a machine that could build it and did not is a
    broken build, not a reason to skip the C tests below."""
    if not can_build_c():
        pytest.skip("no C compiler or Python headers here: the pure-Python paths run")
    assert frames.C_EXTENSION is not None


def c() -> CMasking:
    if frames.C_EXTENSION is None:
        pytest.skip("the C extension was not built (no C compiler at install)")
    return frames.C_EXTENSION


def by_definition(key: bytes, payload: bytes) -> bytes:
    return bytes(b ^ key[i % 4] for i, b in enumerate(payload))


@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=4, max_size=4), st.integers(0, 5000), st.integers(0, 2**32),
       st.sampled_from([bytes, bytearray, memoryview]))
def test_websocket_5_3_c_masking_xors_each_octet_with_its_key_octet(
    key: bytes, size: int, seed: int, kind: type
) -> None:
    """RFC 6455, 5.3: octet i XOR key octet i mod 4, at every length (the
    8-byte steps and the bytes after them), from any buffer."""
    payload = random.Random(seed).randbytes(size)
    assert c().mask(kind(key), kind(payload)) == by_definition(key, payload)


@pytest.mark.parametrize("size", [64 * 1024 - 1, 64 * 1024, 1 << 20])
def test_c_masking_of_64_kib_and_more_is_the_pure_python_masking(size: int) -> None:
    """From 64 KiB the GIL is let go while the bytes are written: the same bytes."""
    rng = random.Random(size)
    key, payload = rng.randbytes(4), rng.randbytes(size)
    with masking("python"):
        expected = frames.mask(key, payload)
    assert c().mask(key, payload) == expected


LENGTHS = st.one_of(st.integers(0, 300), st.sampled_from([1023, 1024, 4096, 0xFFFF]))


@settings(max_examples=120, deadline=None)
@given(LENGTHS, st.integers(0, 70), st.integers(0, 7), st.integers(0, 2**32))
def test_c_mask_run_is_the_frames_one_at_a_time(n: int, count: int, off: int, seed: int) -> None:
    """Each run message (3-byte length, payload) at ``off`` becomes the
    FIN binary frame the pure-Python path makes with its key: a 6-byte
    header under 126 payload bytes, an 8-byte one (16-bit length) from 126."""
    if n * count > 1 << 21:
        count = (1 << 21) // n
    rng = random.Random(seed)
    messages = [rng.randbytes(n) for _ in range(count)]
    keys = rng.randbytes(4 * count + rng.randrange(8))  # (more keys than needed: unused)
    data = rng.randbytes(off) + run_of(messages) + rng.randbytes(rng.randrange(5))
    with masking("python"):
        expected = b"".join(
            encode_data_frame(2, m, keys[4 * i : 4 * i + 4]) for i, m in enumerate(messages)
        )
    assert c().mask_run(data, off, count, n, keys) == expected
    assert c().mask_run(bytearray(data), off, count, n, memoryview(keys)) == expected


@settings(max_examples=120, deadline=None)
@given(LENGTHS, st.integers(0, 70), st.integers(0, 7), st.integers(0, 2**32))
def test_c_unmask_run_is_the_run_the_frames_carried(
    n: int, count: int, off: int, seed: int
) -> None:
    """Frames masked one at a time, at ``off`` in a read, become the head
    and each payload behind its 3-byte length; no byte of a neighbour read."""
    if n * count > 1 << 21:
        count = (1 << 21) // n
    rng = random.Random(seed)
    messages = [rng.randbytes(n) for _ in range(count)]
    with masking("python"):
        wire = b"".join(encode_data_frame(2, m, rng.randbytes(4)) for m in messages)
    read = rng.randbytes(off) + wire + rng.randbytes(rng.randrange(5))
    head = rng.randbytes(rng.randrange(9))
    assert c().unmask_run(read, off, count, n, head) == head + run_of(messages)
    assert c().unmask_run(memoryview(read), off, count, n, bytearray(head)) == head + run_of(
        messages
    )


def test_c_runs_of_64_kib_and_more_are_the_pure_python_runs() -> None:
    """A client's fnf16m send and a server's read of it (GIL let go)."""
    messages = [bytes((i % 251,)) * 22 for i in range(5000)]
    keys = random.Random(3).randbytes(4 * 5000)
    with masking("python"):
        expected = b"".join(
            encode_data_frame(2, m, keys[4 * i : 4 * i + 4]) for i, m in enumerate(messages)
        )
    wire = c().mask_run(run_of(messages), 0, 5000, 22, keys)
    assert wire == expected
    assert c().unmask_run(wire, 0, 5000, 22, b"") == run_of(messages)


REFUSED = [
    ("mask", (b"abc", b"payload")),  # a key of 3 bytes
    ("mask", (b"abcde", b"payload")),
    ("mask_run", (bytes(25), 0, 2, 22, bytes(8))),  # one message there, two asked for
    ("mask_run", (bytes(50), 0, 2, 22, bytes(7))),  # keys for one
    ("mask_run", (bytes(50), 26, 1, 22, bytes(4))),  # starts too late
    ("mask_run", (bytes(50), 51, 0, 22, b"")),  # past the end
    ("mask_run", (bytes(50), -1, 1, 22, bytes(4))),
    ("mask_run", (bytes(50), 0, -1, 22, bytes(4))),
    ("mask_run", (bytes(1 << 17), 0, 1, 0x10000, bytes(4))),  # beyond a 16-bit length
    ("unmask_run", (bytes(27), 0, 1, 22, b"")),  # a frame cut short
    ("unmask_run", (bytes(56), 1, 2, 22, b"")),
    ("unmask_run", (bytes(56), 57, 0, 22, b"")),
    ("unmask_run", (bytes(56), 0, 1, -1, b"")),
    ("unmask_run", (bytes(1 << 17), 0, 1, 0x10000, b"")),
]


@pytest.mark.parametrize(("name", "args"), REFUSED)
def test_c_functions_refuse_arguments_out_of_bounds(name: str, args: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match=r"key|bounds"):
        getattr(c(), name)(*args)


def test_c_functions_take_buffers_only() -> None:
    with pytest.raises(TypeError):
        c().mask("abcd", b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        c().unmask_run(b"", 0, 0, 4)  # type: ignore[call-arg]


class Counting:
    """The C extension, counting the frames of each batch call."""

    def __init__(self, ext: CMasking) -> None:
        self.ext = ext
        self.calls: list[int] = []

    def mask(self, key: Buffer, payload: Buffer, /) -> bytes:
        return self.ext.mask(key, payload)

    def mask_run(self, data: Buffer, off: int, count: int, n: int, keys: Buffer, /) -> bytes:
        self.calls.append(count)
        return self.ext.mask_run(data, off, count, n, keys)

    def unmask_run(self, data: Buffer, off: int, count: int, n: int, head: Buffer, /) -> bytes:
        self.calls.append(count)
        return self.ext.unmask_run(data, off, count, n, head)


@contextmanager
def counting() -> Iterator[Counting]:
    ext = Counting(c())
    before = frames.C_MASKING
    frames.C_MASKING = ext
    try:
        yield ext
    finally:
        frames.C_MASKING = before


@pytest.mark.parametrize(("n", "count"), [(22, 5000), (125, 2049), (126, 8), (1024, 300)])
def test_with_c_a_client_frames_any_batch_in_one_call_as_one_at_a_time(
    n: int, count: int
) -> None:
    """Past the pure-Python paths' bounds (MAX_MASKED_COUNT frames, payloads
    of MAX_MASKED_BATCH bytes): one mask_run call for the whole batch, the
    frames one at a time gives with the same keys (wsproto reads them)."""
    messages = [bytes((i % 251,)) * n for i in range(count)]
    with counting() as ext:
        wire, used = encode_run(run_of(messages), KeySource())
    assert used == len(run_of(messages)) and ext.calls == [count]
    stride = n + (6 if n < 126 else 8)
    keys = [wire[i * stride + stride - n - 4 : i * stride + stride - n] for i in range(count)]
    with masking("python"):
        expected = b"".join(encode_data_frame(2, m, k) for m, k in zip(messages, keys, strict=True))
    assert wire == expected
    assert wsproto_messages(ConnectionType.SERVER, wire) == [(2, m) for m in messages]


def test_with_c_a_server_unmasks_a_batch_past_the_integer_bound_in_one_call() -> None:
    """5,000 masked 22-byte frames in one read (more than MAX_MASKED_COUNT):
    one unmask_run call, the messages the pure-Python paths read."""
    messages = [bytes((i % 251,)) * 22 for i in range(5000)]
    with masking("python"):
        wire = b"".join(encode_data_frame(2, m, bytes((i % 7, 1, 2, 3)))
                        for i, m in enumerate(messages))
        pure = Collector(ConnectionType.SERVER)
        pure.splitter.feed(wire)
    with counting() as ext:
        collector = Collector(ConnectionType.SERVER)
        collector.splitter.feed(wire)
    assert ext.calls == [5000]
    assert collector.got == pure.got == [(2, m) for m in messages]
