"""The Spark partition reader and writer (called as a Spark task calls them,
without a JVM) against a service that goes wrong (docs/adapters.md, "When
the peer misbehaves"; docs/spark.md): the reader against a source that
rejects the SETUP, goes silent mid-stream, says ERROR on stream 0 mid-stream
or resets inside a frame; the writer against a sink that rejects the SETUP,
never grants credit, takes every row and never acks, says ERROR on stream 0,
resets, completes without an ack or acks fewer rows than were sent. A
scripted peer (:mod:`.scripted`) plays the service over TCP, on the thread
driver the Spark functions use. Each cell asserts the error a Spark task
would raise (its type, that its message names the cause), that it came
within the bound (at once, or the reader's / writer's ``timeout``), and,
for the reader, that the rows before the failure were yielded and then the
error raised: never a short read or a partial write taken for a whole one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.spark import SinkError, partition_reader, partition_writer
from sansrs.adapters.spark._wire import Ack

from .scripted import (
    REQUEST_CHANNEL,
    SETUP,
    Wire,
    complete_frame,
    error_frame,
    frame_type,
    payload_frame,
    request_n_frame,
    scripted_peer,
)
from .test_misbehaving_peers import (
    CONNECTION_ERROR,
    PROMPT,
    REJECTED_SETUP,
    SAID,
    SLACK,
    TIMEOUT,
    Expect,
    _check,
    prompt,
)

ROWS = [{"i": i} for i in range(10)]
#: The reader's and writer's ``timeout`` (seconds without progress).
SPARK_TIMEOUT = 0.3


def _reject_setup(wire: Wire) -> None:
    assert frame_type(wire.read_frame()) == SETUP
    wire.send_frame(error_frame(0, REJECTED_SETUP, SAID))
    wire.hold()


# -- the reader ---------------------------------------------------------------------------
def _one_batch_then(ending: Callable[[Wire, int], None]) -> Callable[[Wire], None]:
    """A source that sends one batch of rows on the read's stream, then ``ending``."""

    def script(wire: Wire) -> None:
        sid, _ = wire.read_request()
        wire.send_frame(payload_frame(sid, b'{"i":0}\n{"i":1}\n'))
        ending(wire, sid)

    return script


def _error_on_stream_0(wire: Wire, sid: int) -> None:
    wire.send_frame(error_frame(0, CONNECTION_ERROR, SAID))
    wire.hold()


def _reset_inside_a_frame(wire: Wire, sid: int) -> None:
    wire.send_partial_frame(payload_frame(sid, b'{"i":2}\n'))
    wire.reset()


#: Which read failed: a task's error is read far from where it was raised.
READ = "route 'r' partition 0"
READER_PEERS: dict[str, tuple[Callable[[Wire], None], Expect]] = {
    "rejects-setup": (_reject_setup, prompt(ConnectionClosed, READ, "REJECTED_SETUP", SAID)),
    "silent-mid-stream": (
        _one_batch_then(lambda wire, sid: wire.hold()),
        Expect(
            error=TimeoutError,
            words=(READ, f"within {SPARK_TIMEOUT:g} s"),
            not_words=("sent nothing",),  # it sent rows
            within=SPARK_TIMEOUT + SLACK,
            at_least=SPARK_TIMEOUT,
        ),
    ),
    "error-on-stream-0-mid-stream": (
        _one_batch_then(_error_on_stream_0),
        prompt(ConnectionClosed, READ, "CONNECTION_ERROR", SAID),
    ),
    "reset-inside-a-frame": (
        _one_batch_then(_reset_inside_a_frame),
        prompt(ConnectionClosed, READ, "lost"),
    ),
}


@pytest.mark.timeout(8)
@pytest.mark.parametrize(
    "peer", [pytest.param(p, id=f"reader-{p}-thread-tcp") for p in READER_PEERS]
)
def test_spark_partition_reader_against_a_misbehaving_source_fails_the_task_in_time(
    peer: str,
) -> None:
    script, expect = READER_PEERS[peer]
    rows: list[Any] = []
    with scripted_peer(script) as server:
        reader = partition_reader(server.url, route="r", partitions=1, timeout=SPARK_TIMEOUT)
        _check(expect, lambda: rows.extend(reader(0, iter(()))))
    assert server.failure is None, server.failure
    # The rows that came were handed on before the failure, and no more.
    assert rows == ([] if peer == "rejects-setup" else [{"i": 0}, {"i": 1}])


# -- the writer ---------------------------------------------------------------------------
def _on_channel(then: Callable[[Wire, int], None]) -> Callable[[Wire], None]:
    """A sink that takes the write's REQUEST_CHANNEL (the header), then ``then``."""

    def script(wire: Wire) -> None:
        sid, kind = wire.read_request()
        assert kind == REQUEST_CHANNEL
        then(wire, sid)

    return script


def _take_everything(wire: Wire, sid: int) -> None:
    wire.send_frame(request_n_frame(sid, 1000))
    wire.read_until_complete(sid)


def _never_acks(wire: Wire, sid: int) -> None:
    _take_everything(wire, sid)
    wire.hold()


def _completes_without_ack(wire: Wire, sid: int) -> None:
    _take_everything(wire, sid)
    wire.send_frame(complete_frame(sid))
    wire.hold()


def _acks_fewer_rows(wire: Wire, sid: int) -> None:
    _take_everything(wire, sid)
    ack = Ack(partition=0, attempt=0, rows=len(ROWS) - 1, nbytes=1)
    wire.send_frame(payload_frame(sid, ack.to_bytes(), complete=True))
    wire.hold()


def _reset_after_a_payload(wire: Wire, sid: int) -> None:
    wire.send_frame(request_n_frame(sid, 1))
    wire.read_frame()
    wire.reset()


def _stalled() -> Expect:
    # The writer looks every min(1, timeout) s: it notices a stall within
    # two of its timeouts.
    return Expect(
        error=TimeoutError,
        words=(WRITE, "sink stalled", f"{SPARK_TIMEOUT:g} s"),
        within=2 * SPARK_TIMEOUT + SLACK,
        at_least=SPARK_TIMEOUT,
    )


WRITE = "route 'w' partition 0"
WRITER_PEERS: dict[str, tuple[Callable[[Wire], None], Expect]] = {
    "rejects-setup": (_reject_setup, prompt(ConnectionClosed, WRITE, "REJECTED_SETUP", SAID)),
    "never-grants-credit": (_on_channel(lambda wire, sid: wire.hold()), _stalled()),
    "never-acks": (_on_channel(_never_acks), _stalled()),
    "error-on-stream-0": (
        _on_channel(_error_on_stream_0),
        prompt(ConnectionClosed, WRITE, "CONNECTION_ERROR", SAID),
    ),
    "reset-mid-write": (
        _on_channel(_reset_after_a_payload),
        prompt(ConnectionClosed, WRITE, "lost"),
    ),
    "completes-without-ack": (
        _on_channel(_completes_without_ack),
        prompt(SinkError, WRITE, "without an ack"),
    ),
    "acks-fewer-rows": (
        _on_channel(_acks_fewer_rows),
        prompt(SinkError, f"sent {len(ROWS)} rows", f"acknowledged {len(ROWS) - 1}"),
    ),
}


@pytest.mark.timeout(8)
@pytest.mark.parametrize(
    "peer", [pytest.param(p, id=f"writer-{p}-thread-tcp") for p in WRITER_PEERS]
)
def test_spark_partition_writer_against_a_misbehaving_sink_fails_the_task_in_time(
    peer: str,
) -> None:
    script, expect = WRITER_PEERS[peer]
    with scripted_peer(script) as server:
        writer = partition_writer(
            server.url, route="w", app="app", rows_per_payload=2, timeout=SPARK_TIMEOUT
        )
        _check(expect, lambda: writer.write(iter(ROWS), partition=0))
    assert server.failure is None, server.failure
    assert TIMEOUT < SPARK_TIMEOUT and PROMPT > SPARK_TIMEOUT
