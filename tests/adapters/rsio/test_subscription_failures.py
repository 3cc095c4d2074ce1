"""A subscription's failure stays that subscription's (the connection goes
on), says what happened, and is logged once on the publishing side; and
:class:`FixedSizePublisher`, the documented way to publish fixed-size
elements that ``subscribe_packed`` reads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from sansrs.adapters.rsio import FixedSizePublisher, RsioError, Server, connect, serve

from sansrs.streams import from_iterable

WAIT = 20.0
NUMBERS = [i.to_bytes(8, "big") for i in range(1000)]


def _broken() -> Iterator[bytes]:
    yield b"one"
    raise RuntimeError("disk on fire")


def _three_then_fail() -> Iterator[bytes]:
    yield from NUMBERS[:3]
    raise OSError("read error")


CLOSED = threading.Event()


def _endless() -> Iterator[bytes]:
    try:
        i = 0
        while True:
            yield i.to_bytes(8, "big")
            i += 1
    finally:
        CLOSED.set()


@pytest.fixture(params=["thread", "selector"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    publishers = {
        "greetings": from_iterable([b"hi", b"hello"]),
        "numbers": FixedSizePublisher(8, NUMBERS),
        "generated": FixedSizePublisher(4, lambda: (i.to_bytes(4, "big") for i in range(10))),
        "wrong-size": FixedSizePublisher(8, [b"12345678", b"short"]),
        "broken": from_iterable(_broken()),
        "buffer": FixedSizePublisher(8, b"".join(NUMBERS)),
        "three-then-fail": FixedSizePublisher(8, _three_then_fail),
        "endless": FixedSizePublisher(8, _endless),
        "one-shot": FixedSizePublisher(8, iter(NUMBERS[:2])),
        "wrapped": FixedSizePublisher(8, from_iterable(NUMBERS[:5])),
    }
    with serve("tcp://127.0.0.1:0", publishers, loop=request.param) as s:
        yield s


def test_rsio_subscribe_packed_unknown_name_says_no_publisher_and_the_connection_lives(
    server: Server,
) -> None:
    with connect(server.url) as client:
        with pytest.raises(RsioError, match="no publisher named 'nope'"):
            list(client.subscribe_packed("nope", timeout=WAIT))
        assert list(client.subscribe("greetings", timeout=WAIT)) == [b"hi", b"hello"]


def test_rsio_subscribe_packed_variable_stream_fails_that_subscription_only(
    server: Server,
) -> None:
    with connect(server.url) as client:
        for _ in range(3):  # the wrong guess, again and again, as a user would
            with pytest.raises(ValueError, match="'greetings' is not a fixed-size stream"):
                list(client.subscribe_packed("greetings", timeout=WAIT))
        assert list(client.subscribe("greetings", timeout=WAIT)) == [b"hi", b"hello"]


def test_rsio_fixed_size_publisher_is_read_packed(server: Server) -> None:
    with connect(server.url) as client:
        with client.subscribe_packed("numbers", prefetch=128, timeout=WAIT) as batches:
            data = b"".join(batches)
            assert batches.element_size == 8
        assert data == b"".join(NUMBERS)
        for _ in range(2):  # a function source: a fresh iterator per subscriber
            assert list(client.subscribe("generated", timeout=WAIT)) == [
                i.to_bytes(4, "big") for i in range(10)
            ]


def test_rsio_fixed_size_publisher_wrong_element_fails_that_subscription(server: Server) -> None:
    with connect(server.url) as client:
        got: list[bytes] = []
        with pytest.raises(RsioError, match="element of 5 bytes; element_size is 8"):
            for batch in client.subscribe_packed("wrong-size", timeout=WAIT):
                got.append(batch)
        assert got == [b"12345678"]  # the elements before the wrong one arrive first
        assert len(b"".join(client.subscribe_packed("numbers", timeout=WAIT))) == 8000


def test_rsio_fixed_size_publisher_from_a_buffer_is_read_in_slices(server: Server) -> None:
    with connect(server.url) as client:
        assert b"".join(client.subscribe_packed("buffer", prefetch=100, timeout=WAIT)) == (
            b"".join(NUMBERS)
        )
        assert list(client.subscribe("buffer", timeout=WAIT)) == NUMBERS


def test_rsio_fixed_size_publisher_failing_source_sends_what_came_before(
    server: Server,
) -> None:
    with connect(server.url) as client:
        got: list[bytes] = []
        with pytest.raises(RsioError, match="OSError: read error"):
            for batch in client.subscribe_packed("three-then-fail", timeout=WAIT):
                got.append(batch)
        assert b"".join(got) == b"".join(NUMBERS[:3])


def test_rsio_fixed_size_publisher_cancel_closes_its_generator(server: Server) -> None:
    CLOSED.clear()
    with connect(server.url) as client:
        with client.subscribe_packed("endless", prefetch=64, timeout=WAIT) as batches:
            first = next(batches)
        assert first[:8] == (0).to_bytes(8, "big")
        assert CLOSED.wait(WAIT)  # the generator's finally ran on the cancel


def test_rsio_fixed_size_publisher_one_shot_serves_one_subscriber(server: Server) -> None:
    with connect(server.url) as client:
        assert list(client.subscribe("one-shot", timeout=WAIT)) == NUMBERS[:2]
        with pytest.raises(RsioError, match="published already; pass a function"):
            list(client.subscribe_packed("one-shot", timeout=WAIT))


def test_rsio_fixed_size_publisher_wraps_a_publisher(server: Server) -> None:
    assert FixedSizePublisher(8, from_iterable(NUMBERS)).packed_reader is None
    assert FixedSizePublisher(8, NUMBERS).packed_reader is not None
    with (
        connect(server.url) as client,
        client.subscribe_packed("wrapped", timeout=WAIT) as batches,
    ):
        data = b"".join(batches)
        assert batches.element_size == 8
    assert data == b"".join(NUMBERS[:5])


def test_rsio_fixed_size_publisher_refuses_a_ragged_buffer() -> None:
    with pytest.raises(ValueError, match="a buffer of 12 bytes is not whole 8-byte elements"):
        FixedSizePublisher(8, bytes(12))


@pytest.mark.parametrize("size", [0, -1, 8.0, True])
def test_rsio_fixed_size_publisher_refuses_a_bad_element_size(size: object) -> None:
    with pytest.raises(ValueError, match="element_size must be an int > 0"):
        FixedSizePublisher(size, NUMBERS)  # type: ignore[arg-type]


def test_rsio_fixed_size_publisher_refuses_a_non_iterable() -> None:
    with pytest.raises(TypeError, match="elements must be a bytes buffer, an iterable of bytes"):
        FixedSizePublisher(8, 42)  # type: ignore[arg-type]


def test_rsio_failing_publisher_is_logged_once_with_its_name(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sansrs.adapters.rsio"), connect(
        server.url
    ) as client:
        with pytest.raises(RsioError, match="RuntimeError: disk on fire"):
            list(client.subscribe("broken", timeout=WAIT))
        assert list(client.subscribe("greetings", timeout=WAIT)) == [b"hi", b"hello"]
    failed = [r for r in caplog.records if "'broken'" in r.getMessage()]
    assert len(failed) == 1
    (record,) = failed
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and "disk on fire" in str(record.exc_info[1])
