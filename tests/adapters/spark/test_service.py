"""Sink and source services with the writer and reader functions, over real
TCP on 127.0.0.1 but without Spark: delivery semantics, de-duplication, job
commit/abort, errors, stalls, and backpressure by protocol credit."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sansrs.adapters.drive.errors import ConnectionClosed
from sansrs.adapters.rsocket.errors import RSocketError
from sansrs.adapters.rsocket.types import Payload, Request
from sansrs.adapters.spark import (
    JsonLinesSink,
    MemorySink,
    Service,
    SinkError,
    SourceError,
    WriteHeader,
    WriteTarget,
    commit_job,
    connect_service,
    latest_offset,
    open_partition_stream,
    partition_reader,
    partition_writer,
    serve,
    write_partition,
)

from tests.adapters.spark.counting_sink import CountingSink


def numbers(partition: int, partitions: int, options: Mapping[str, Any]) -> Iterator[Any]:
    n = int(options.get("n", 100))
    for i in range(partition * n // partitions, (partition + 1) * n // partitions):
        if i == options.get("fail_at"):
            raise OSError(f"disk gone at {i}")
        yield {"i": i}


@pytest.fixture
def sink() -> CountingSink:
    return CountingSink()


@pytest.fixture
def url(sink: MemorySink) -> Iterator[str]:
    service = Service(sources={"numbers": numbers}, sinks={"out": sink})
    with serve("tcp://127.0.0.1:0", service) as server:
        yield server.url


def rows(n: int, start: int = 0) -> list[dict[str, int]]:
    return [{"i": i} for i in range(start, start + n)]


def test_write_partition_acknowledges_every_row(url: str, sink: CountingSink) -> None:
    target = WriteTarget(url=url, route="out", app="app", rows_per_payload=7)
    ack = write_partition(target, rows(1000), partition=2)
    assert (ack.partition, ack.rows, ack.duplicate) == (2, 1000, False)
    assert sink.partitions == {("app", target.write, 2): rows(1000)}
    assert sink.rows_published == 1000


def test_empty_partition_is_acknowledged(url: str, sink: CountingSink) -> None:
    target = WriteTarget(url=url, route="out")
    assert write_partition(target, [], partition=0).rows == 0
    assert sink.partitions == {("", target.write, 0): []}


def test_retried_partition_is_kept_once(url: str, sink: CountingSink) -> None:
    target = WriteTarget(url=url, route="out", app="a")
    first = write_partition(target, rows(50), partition=1, attempt=0)
    again = write_partition(target, rows(50), partition=1, attempt=1)
    assert not first.duplicate and again.duplicate
    assert sink.rows() == rows(50) and sink.duplicates == 1
    assert sink.attempts[("a", target.write, 1)] == 0
    # another write (a new write id) of the same partition is not a duplicate
    other = WriteTarget(url=url, route="out", app="a")
    assert not write_partition(other, rows(5), partition=1).duplicate


def test_failing_rows_iterator_discards_the_attempt(url: str, sink: CountingSink) -> None:
    def broken() -> Iterator[dict[str, int]]:
        yield from rows(30)
        raise ZeroDivisionError("injected")

    target = WriteTarget(url=url, route="out", rows_per_payload=10)
    with pytest.raises(ZeroDivisionError, match="injected"):
        write_partition(target, broken(), partition=0)
    ack = write_partition(target, rows(40), partition=0, attempt=1)
    assert ack.rows == 40 and not ack.duplicate
    assert sink.rows() == rows(40)
    # The broken attempt's stage was aborted, or never opened if its channel
    # ended before the write started (test_write_channel_ended_before_...).
    assert sink.settled(30)
    assert sink.finished == 1 and sink.aborted <= 1


def _write_request(header: WriteHeader) -> Request:
    return Request(b"", header.to_bytes(), None)


def test_write_channel_ended_before_its_worker_ran_opens_no_stage() -> None:
    """A write channel can end (the writer's ERROR, a lost connection, in
    the same read as its request) before its worker first pulls the write:
    the worker then closes the write unstarted. Nothing may have been opened
    that nobody would abort (the interleaving forced: closed, never pulled)."""
    sink = CountingSink()
    service = Service(sinks={"out": sink})
    write = service.request_channel(
        _write_request(WriteHeader(route="out", app="app", write="w", partition=0)), iter(())
    )
    write.close()  # what the channel's worker does when cancelled before its first pull
    assert (sink.opened, sink.aborted, sink.rows_received) == (0, 0, 0)


def test_write_channel_lost_mid_write_aborts_its_stage() -> None:
    sink = CountingSink()
    service = Service(sinks={"out": sink})

    def inbound() -> Iterator[Payload]:
        yield Payload(b'{"i":1}\n', None)
        raise ConnectionClosed("connection lost")

    write = service.request_channel(
        _write_request(WriteHeader(route="out", app="app", write="w", partition=0)), inbound()
    )
    with pytest.raises(ConnectionClosed):
        next(write)
    assert (sink.opened, sink.finished, sink.aborted, sink.partitions) == (1, 0, 1, {})
    assert sink.rows_received == 1


class PickySink(MemorySink):
    def check_batch(self, header: WriteHeader, data: bytes) -> None:
        if b'"i":13' in data:
            raise ValueError("row 13 is unlucky")


def test_sink_error_reaches_the_writer_with_its_message() -> None:
    sink = PickySink()
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink})) as server:
        target = WriteTarget(url=server.url, route="out", rows_per_payload=5)
        with pytest.raises(SinkError, match="row 13 is unlucky"):
            write_partition(target, rows(100), partition=0)
        assert sink.partitions == {} and sink.aborted == 1
        bad_route = WriteTarget(url=server.url, route="nope")
        with pytest.raises(SinkError, match="no sink named 'nope'"):
            write_partition(bad_route, rows(1), partition=0)


class FullDiskSink(MemorySink):
    def publish(self, header: WriteHeader, stage: Any) -> None:
        if header.attempt == 0:
            raise OSError("No space left on device")
        super().publish(header, stage)


def test_failing_publish_fails_the_write_and_a_retry_can_succeed() -> None:
    sink = FullDiskSink()
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink})) as server:
        target = WriteTarget(url=server.url, route="out")
        with pytest.raises(SinkError, match="No space left on device"):
            write_partition(target, rows(10), partition=0, attempt=0)
        assert sink.aborted == 1 and sink.partitions == {}
        ack = write_partition(target, rows(10), partition=0, attempt=1)
        assert not ack.duplicate and sink.rows() == rows(10)


def test_malformed_write_header_is_refused(url: str) -> None:
    with connect_service(url) as client:
        replies = client.request_channel([Payload(b"", b"{}")], timeout=10)
        with pytest.raises(RSocketError, match="missing or of the wrong type"):
            list(replies)


def test_cut_row_batch_is_refused_and_the_attempt_discarded(url: str, sink: CountingSink) -> None:
    header = WriteHeader(route="out", app="a", write="w", partition=0)
    with connect_service(url) as client:
        replies = client.request_channel(
            [Payload(b"", header.to_bytes()), b'{"i":1}\n{"i"', b':2}\n'], timeout=10
        )
        with pytest.raises(RSocketError, match="must end with a newline"):
            list(replies)
        assert sink.partitions == {}
        # the connection goes on: a well-formed request on it still works
        good = client.request_channel(
            [Payload(b"", header.to_bytes()), b'{"i":1}\n{"i":2}\n'], timeout=10
        )
        assert [json.loads(p.data)["rows"] for p in good] == [2]
    assert sink.rows() == rows(2, 1)


def test_malformed_read_and_job_requests_are_refused(url: str) -> None:
    with connect_service(url) as client:
        with pytest.raises(RSocketError, match="malformed read request"):
            list(client.request_stream(b"{nope", timeout=10))
        with pytest.raises(RSocketError, match="unknown op 'drop'"):
            client.request_response(
                b'{"op": "drop", "route": "out", "app": "", "write": "w"}', timeout=10
            )


def test_job_commit_publishes_only_listed_partitions(url: str, sink: CountingSink) -> None:
    target = WriteTarget(url=url, route="out", app="a", commit="job")
    for p in range(3):
        write_partition(target, rows(10, 10 * p), partition=p)
    assert sink.partitions == {}  # staged, not published
    assert commit_job(target, [0, 2]) == {"committed": 20, "partitions": 2}
    assert sink.rows() == rows(10) + rows(10, 20)
    assert commit_job(target, [0, 2]) == {"committed": 0, "again": True}  # idempotent
    # a late attempt of a committed job is a duplicate
    assert write_partition(target, rows(10), partition=1, attempt=1).duplicate


def test_job_abort_drops_staged_partitions(url: str, sink: CountingSink) -> None:
    target = WriteTarget(url=url, route="out", commit="job")
    write_partition(target, rows(10), partition=0)
    assert commit_job(target, (), abort=True) == {"aborted": 1}
    assert sink.partitions == {}
    with pytest.raises(SinkError, match=r"partitions \[0\] were not received"):
        commit_job(target, [0])


def test_json_lines_sink_stores_whole_partitions(tmp_path: Path) -> None:
    sink = JsonLinesSink(tmp_path / "out.jsonl", spool_bytes=64)
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink})) as server:
        writer = partition_writer(server.url, route="out", app="x", rows_per_payload=3)
        writer.write(rows(10), partition=0)
        # a retried attempt
        assert write_partition(writer.target, rows(10), partition=0, attempt=1).duplicate
        writer.write(rows(5, 10), partition=1)
    sink.close_file()
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert lines == [f'{{"i":{i}}}' for i in range(15)]


def test_staged_chunks_hold_whole_lines() -> None:
    from sansrs.adapters.spark import Stage

    stage = Stage(WriteHeader(route="r", app="", write="w", partition=0), spool_bytes=100)
    lines = [b'{"i":%d,"pad":"%s"}\n' % (i, b"x" * (i % 37)) for i in range(500)]
    for k in range(0, 500, 7):
        stage.write(b"".join(lines[k : k + 7]))
    chunks = list(stage.chunks(size=64))
    assert all(c.endswith(b"\n") for c in chunks) and len(chunks) > 10
    assert b"".join(chunks) == b"".join(lines) and stage.rows == 500
    stage.discard()


def test_arrow_encoded_writes_reach_every_kind_of_sink(tmp_path: Path) -> None:
    memory = MemorySink()
    lines = JsonLinesSink(tmp_path / "out.jsonl", spool_bytes=256)
    service = Service(sinks={"mem": memory, "file": lines})
    data = [{"i": i, "s": f"v{i}"} for i in range(1000)]
    with serve("tcp://127.0.0.1:0", service) as server:
        for route in ("mem", "file"):
            target = WriteTarget(url=server.url, route=route, encoding="arrow",
                                 rows_per_payload=64)
            ack = write_partition(target, data, partition=0)
            assert (ack.rows, ack.duplicate) == (1000, False)
            assert write_partition(target, data, partition=0, attempt=1).duplicate
    lines.close_file()
    assert memory.rows() == data
    stored = (tmp_path / "out.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in stored] == data


def test_payloads_not_in_the_declared_encoding_are_refused(url: str, sink: CountingSink) -> None:
    arrow = WriteHeader(route="out", app="a", write="w1", partition=0, encoding="arrow")
    jsonl = WriteHeader(route="out", app="a", write="w2", partition=0)
    from sansrs.adapters.spark._arrow import encode_rows_arrow

    ((ipc, _),) = encode_rows_arrow([{"i": 1}], 10, 1000)
    with connect_service(url) as client:
        for header, payload, message in (
            (arrow, b'{"i":1}\n', "malformed Arrow IPC payload"),
            (jsonl, ipc, "must end with a newline"),
        ):
            replies = client.request_channel(
                [Payload(b"", header.to_bytes()), payload], timeout=10
            )
            with pytest.raises(RSocketError, match=message):
                list(replies)
    assert sink.partitions == {} and sink.aborted == 2


def test_reader_reads_each_share_exactly(url: str) -> None:
    reader = partition_reader(url, route="numbers", partitions=3, options={"n": 1000})
    got = [row for p in range(3) for row in reader.read(p)]
    assert got == rows(1000)
    as_tuples = partition_reader(url, route="numbers", partitions=1, fields=["i", "j"],
                                 options={"n": 3})
    assert list(as_tuples(0, iter(()))) == [(0, None), (1, None), (2, None)]


def test_reader_errors_name_the_source(url: str) -> None:
    with pytest.raises(SourceError, match="route 'missing' partition 0: no source named 'missing'"):
        list(open_partition_stream(url, "missing", 0, 1))
    got: list[Any] = []
    with pytest.raises(SourceError, match="disk gone at 2500"):
        for batch in open_partition_stream(url, "numbers", 0, 1, {"n": 5000, "fail_at": 2500}):
            got.extend(batch)
    assert got == rows(len(got)) and len(got) <= 2500  # whole batches before the error
    with pytest.raises(SourceError, match=r"partition 3 not in 0\.\.1"):
        list(open_partition_stream(url, "numbers", 3, 2))
    with pytest.raises(ValueError, match="unknown URL scheme"):
        open_partition_stream("ftp://127.0.0.1:1", "numbers", 0, 1)


class Replayable:
    def latest(self) -> int:
        return 42

    def __call__(self, partition: int, partitions: int, options: Mapping[str, Any]) -> Any:
        return ({"i": i} for i in range(options["start"], options["end"]))


def test_latest_offset_of_replayable_sources_only(url: str) -> None:
    with pytest.raises(SourceError, match="'numbers' is not replayable"):
        latest_offset(url, "numbers")
    with pytest.raises(SourceError, match="no source named 'nope'"):
        latest_offset(url, "nope")
    with serve("tcp://127.0.0.1:0", Service(sources={"log": Replayable()})) as server:
        assert latest_offset(server.url, "log") == 42
        got = list(open_partition_stream(server.url, "log", 0, 1, {"start": 40, "end": 42}))
        assert got == [rows(2, 40)]


class GatedSink(MemorySink):
    """Takes a payload only when the test releases it: a slow sink."""

    def __init__(self) -> None:
        super().__init__(prefetch=4)
        self.gate = threading.Semaphore(0)
        self.seen = 0
        self.cond = threading.Condition()

    def check_batch(self, header: WriteHeader, data: bytes) -> None:
        assert self.gate.acquire(timeout=30)
        with self.cond:
            self.seen += data.count(b"\n")
            self.cond.notify_all()


def test_slow_sink_bounds_the_writer_by_protocol_credit() -> None:
    sink = GatedSink()
    per_payload, payloads = 10, 400
    total = per_payload * payloads
    lag = 0
    produced = 0

    def source() -> Iterator[dict[str, int]]:
        nonlocal produced, lag
        for i in range(total):
            produced += 1
            lag = max(lag, produced - sink.seen)
            yield {"i": i, "pad": "x" * 50}  # type: ignore[misc]

    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink})) as server:
        target = WriteTarget(url=server.url, route="out", rows_per_payload=per_payload)
        result: list[Any] = []
        writer = threading.Thread(
            target=lambda: result.append(write_partition(target, source(), partition=0))
        )
        writer.start()
        for step in range(1, payloads + 1):
            sink.gate.release()
            with sink.cond:
                assert sink.cond.wait_for(lambda s=step: sink.seen >= s * per_payload, 30)
        writer.join(30)
    assert result and result[0].rows == total
    # In flight at most: the sink's window (4 payloads) + its queue's replenished
    # half + one payload the channel worker holds + one read ahead + the batch
    # being filled; far below the 4000 rows (240 KB) loopback buffers would hold.
    assert lag <= 9 * per_payload, lag


def test_slow_rows_iterator_is_not_a_stall(url: str, sink: CountingSink) -> None:
    # The job's own pace (an expensive upstream stage) must never trip the
    # sink-stall timeout: only waiting for credit or for the ack counts.
    pause = threading.Event()  # never set: its wait is the slow computation

    def slow() -> Iterator[dict[str, int]]:
        yield from rows(10)
        pause.wait(0.8)
        yield from rows(10, 10)

    target = WriteTarget(url=url, route="out", rows_per_payload=5, timeout=0.3)
    assert write_partition(target, slow(), partition=0).rows == 20
    assert sink.rows() == rows(20)


def test_stalled_sink_times_out_the_writer() -> None:
    sink = GatedSink()  # never released
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink})) as server:
        target = WriteTarget(url=server.url, route="out", rows_per_payload=1, timeout=0.5)
        with pytest.raises(TimeoutError, match="sink stalled"):
            write_partition(target, rows(100), partition=0)
        for _ in range(100):
            sink.gate.release()
