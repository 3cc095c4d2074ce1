"""What a writer can make a Spark sink hold, and rows never dropped silently
(docs/security.md, docs/spark.md): staged bytes budgeted per writer and per
sink (memory and spooled files counted), stages nobody commits expiring on
an injected clock, the records of closed partitions bounded; a writer reused
outside Spark refused; an abort of a write nobody wrote owning nothing.

Most tests drive the sink through the service's write path directly (what a
write channel's worker thread runs), without a connection: bytes held and
files spooled are counted, not RSS."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.rsocket.types import Payload, Request
from sansrs.adapters.spark import (
    Ack,
    JobRequest,
    MemorySink,
    Service,
    SinkConfig,
    SinkError,
    SparkServer,
    StagingLimitError,
    WriteHeader,
    WriteTarget,
    commit_job,
    partition_writer,
    serve,
    write_partition,
)
from sansrs.adapters.spark.sink import STAGE_COST

from tests.adapters.spark.counting_sink import CountingSink

KIB = 1024


class Clock:
    """The sink's clock, moved by the test: expiry needs no sleep."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def header(
    write: str, partition: int = 0, *, owner: str = "owner-a", commit: str = "job",
    attempt: int = 0, stage: int = -1,
) -> WriteHeader:
    return WriteHeader(route="out", app="app", write=write, partition=partition,
                       attempt=attempt, stage=stage, commit=commit, owner=owner)


def batch(nbytes: int) -> bytes:
    """One JSON line of ``nbytes`` bytes (at least 11)."""
    assert nbytes >= 11
    return b'{"pad":"' + b"x" * (nbytes - 11) + b'"}\n'


def write(service: Service, h: WriteHeader, *payloads: bytes) -> Ack:
    """One write channel as the service runs it (a failure aborts the stage)."""
    replies = service.request_channel(
        Request(b"", h.to_bytes(), None), iter([Payload(p, None) for p in payloads])
    )
    return Ack.from_bytes(next(replies))


def job(service: Service, op: str, write_id: str, partitions: tuple[int, ...] = (),
        owner: str = "owner-a") -> Any:
    request = JobRequest(op=op, route="out", app="app", write=write_id,
                         partitions=partitions, owner=owner)
    return service._sink("out").job(request)


def open_files() -> int:
    """Temporary files this process holds open: a spooled stage holds one.
    Only those: counting every descriptor let sockets of earlier tests,
    closed by the GC meanwhile, cancel the stages' files out (seen once
    under CPython 3.13)."""
    where = os.path.realpath(tempfile.gettempdir())
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
        count += target.startswith(where + os.sep)
    return count


def held_in_stages(sink: MemorySink) -> int:
    """Bytes the stages really hold (what the sink's counters must match)."""
    return sum(s.size for w in sink._writes.values() for s in w.pending.values())


# -- finding 5: staged bytes are budgeted ---------------------------------------------


def test_spark_sink_job_writes_never_committed_stay_within_the_sinks_budget() -> None:
    """The issue's attack, scaled down 100 times: a secret holder makes 100
    job-mode writes of ~39 KiB (fresh writers, so fresh owner tokens) and
    never commits. The sink holds at most max_staged; memory at most
    max_memory, the rest in spooled files; every write beyond is refused."""
    config = SinkConfig(spool_bytes=64 * KIB, max_memory=128 * KIB, max_staged=1024 * KIB)
    sink = MemorySink(config)
    service = Service(sinks={"out": sink})
    files = open_files()
    accepted = refused = 0
    for k in range(100):
        try:
            write(service, header(f"w{k}", owner=f"writer-{k}"), batch(20 * KIB), batch(19 * KIB))
            accepted += 1
        except StagingLimitError as exc:
            assert "SinkConfig.max_staged (1048576)" in str(exc)
            refused += 1
        assert sink.staged_bytes <= config.max_staged
        assert sink.memory_bytes <= config.max_memory
    assert accepted == 1024 * KIB // (39 * KIB + STAGE_COST) == 25 and refused == 75
    assert sink.stages == accepted and held_in_stages(sink) == accepted * 39 * KIB
    assert sink.staged_bytes == accepted * (39 * KIB + STAGE_COST)
    in_memory = config.max_memory // (39 * KIB)  # 3 stages, the 22 others spooled
    assert sink.memory_bytes == in_memory * 39 * KIB
    assert sink.spooled_stages == accepted - in_memory
    assert open_files() - files == sink.spooled_stages  # one temporary file each
    for k in range(accepted):
        assert job(service, "abort", f"w{k}", owner=f"writer-{k}") == {"aborted": 1}
    assert (sink.staged_bytes, sink.memory_bytes, sink.spooled_stages, sink.stages) == (0, 0, 0, 0)
    assert open_files() == files


def test_spark_sink_refuses_a_writer_beyond_its_budget_and_serves_the_others() -> None:
    config = SinkConfig(max_writer_staged=100 * KIB + 4 * STAGE_COST)
    sink = MemorySink(config)
    service = Service(sinks={"out": sink})
    for p in range(4):  # 4 x 25 KiB: exactly the writer's budget
        write(service, header("big", p), batch(25 * KIB))
    with pytest.raises(StagingLimitError, match=r"its writer has 106496 bytes staged .* "
                       r"SinkConfig.max_writer_staged \(106496\)"):
        write(service, header("big", 4), b"")  # even an empty partition costs STAGE_COST
    with pytest.raises(StagingLimitError, match="max_writer_staged"):
        write(service, header("big-too", 0), batch(20))  # the same writer's other write
    # Another writer is not starved by it, and the refused attempts hold nothing.
    assert write(service, header("small", 0, owner="owner-b"), batch(50)).rows == 1
    assert sink.staged_bytes == 4 * (25 * KIB + STAGE_COST) + 50 + STAGE_COST
    assert job(service, "commit", "big", (0, 1, 2, 3)) == {"committed": 4, "partitions": 4}
    assert write(service, header("next", 0), batch(25 * KIB)).rows == 1  # its budget is back


def test_spark_sink_budget_refusal_fails_the_writing_task_loudly() -> None:
    sink = CountingSink(max_writer_staged=64 * KIB)
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink})) as server:
        target = WriteTarget(url=server.url, route="out", commit="job", rows_per_payload=100)
        rows = [{"i": i, "pad": "x" * 100} for i in range(1000)]
        with pytest.raises(SinkError, match=r"partition 0: .*SinkConfig.max_writer_staged"):
            write_partition(target, rows, partition=0)
        assert sink.settled(30)  # the refused attempt was aborted on the sink
        assert (sink.aborted, sink.staged_bytes, sink.stages) == (1, 0, 0)
        assert write_partition(target, rows[:100], partition=0).rows == 100


def test_spark_sink_memory_beyond_max_memory_spools_the_growing_stage() -> None:
    sink = MemorySink(SinkConfig(spool_bytes=64 * KIB, max_memory=100 * KIB))
    service = Service(sinks={"out": sink})
    files = open_files()
    for p in range(5):
        write(service, header("w", p), batch(20 * KIB), batch(20 * KIB))
        assert sink.memory_bytes <= 100 * KIB
    # Two stages of 40 KiB fit the sink's memory; the three others spooled.
    assert (sink.memory_bytes, sink.spooled_stages) == (2 * 40 * KIB, 3)
    assert open_files() - files == 3
    assert held_in_stages(sink) == 5 * 40 * KIB
    assert job(service, "commit", "w", tuple(range(5))) == {"committed": 10, "partitions": 5}
    assert len(sink.rows()) == 10  # spooled or not, every row is published
    assert (sink.memory_bytes, sink.spooled_stages, sink.staged_bytes) == (0, 0, 0)
    assert open_files() == files


# -- finding 5: stages nobody commits expire ----------------------------------------------


def test_spark_sink_stages_never_committed_expire_and_free_memory_and_files(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    sink = MemorySink(SinkConfig(spool_bytes=8 * KIB, stage_expiry=60.0), clock=clock)
    service = Service(sinks={"out": sink})
    files = open_files()
    write(service, header("crashed", 0), batch(4 * KIB))
    write(service, header("crashed", 1), batch(16 * KIB))  # spooled
    clock.now += 50
    write(service, header("crashed", 2), batch(20))  # activity: the write lives on
    clock.now += 59
    sink.expire()
    assert sink.stages == 3 and sink.expired == 0
    assert open_files() - files == 1
    with caplog.at_level(logging.WARNING, logger="sansrs.adapters.spark"):
        clock.now += 1  # 60 s without a partition, commit or abort: the driver is gone
        write(service, header("other", 0, owner="owner-b", commit="partition"), batch(20))
        for _ in range(3):
            clock.now += 60
            sink.expire()
    assert sink.expired == 3
    assert (sink.stages, sink.staged_bytes, sink.memory_bytes, sink.spooled_stages) == (0, 0, 0, 0)
    assert open_files() == files
    expiries = [r.getMessage() for r in caplog.records if "expiry" in r.getMessage()]
    assert expiries == [
        "write 'crashed' of app 'app': 3 staged partitions (23572 bytes) dropped, no commit "
        "or abort for 60 s (SinkConfig.stage_expiry)"
    ]
    # The write is remembered as expired: nothing of it is taken silently.
    with pytest.raises(ValueError, match=r"'crashed' expired: .* dropped after 60 s"):
        job(service, "commit", "crashed", (0, 1, 2))
    with pytest.raises(ValueError, match="'crashed' expired"):
        write(service, header("crashed", 3), batch(20))
    assert job(service, "abort", "crashed") == {"aborted": 0}
    assert sink.partitions.keys() == {("app", "other", 0)}


def test_spark_sink_a_write_being_written_does_not_expire() -> None:
    clock = Clock()
    sink = MemorySink(SinkConfig(stage_expiry=60.0), clock=clock)
    service = Service(sinks={"out": sink})
    write(service, header("w", 0), batch(100))
    slow = sink.open(header("w", 1))  # a task still writing (its channel alive)
    clock.now += 600
    sink.expire()
    assert sink.expired == 0
    sink.receive(slow, batch(100))
    sink.finish(slow)
    assert job(service, "commit", "w", (0, 1)) == {"committed": 2, "partitions": 2}


class SignallingSink(MemorySink):
    """Tells the test each time its expiry has run."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.ran = threading.Condition()

    def expire(self, now: float | None = None) -> None:
        super().expire(now)
        with self.ran:
            self.ran.notify_all()


def test_spark_served_sink_expires_stages_without_any_traffic() -> None:
    """A crashed driver's stages are freed on time although nothing else
    reaches the sink: the served sink runs its expiry every expiry_interval."""
    clock = Clock()
    sink = SignallingSink(stage_expiry=60.0, expiry_interval=0.02, clock=clock)
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink})) as server:
        target = WriteTarget(url=server.url, route="out", commit="job")
        write_partition(target, rows(10), partition=0)
        assert sink.stages == 1
        clock.now += 60  # the driver never commits nor aborts
        with sink.ran:
            assert sink.ran.wait_for(lambda: sink.expired == 1, 30)
        assert (sink.stages, sink.staged_bytes) == (0, 0)
        timer = server._expiry
    assert timer is not None and not timer._thread.is_alive()  # stopped with the server


# -- finding 5: the records of closed partitions are bounded ------------------------------


def test_spark_sink_records_of_closed_partitions_are_bounded_by_horizon_and_count() -> None:
    clock = Clock()
    config = SinkConfig(record_horizon=3600.0, max_records=50)
    sink = MemorySink(config, clock=clock)
    service = Service(sinks={"out": sink})
    for k in range(100):  # 100 writes of 2 partitions: 300 records unbounded
        clock.now += 1
        for p in range(2):
            write(service, header(f"w{k}", p, commit="partition"), batch(20))
        assert sink.records <= config.max_records
    assert sink.records == 48 and len(sink._writes) == 16  # whole writes forgotten, oldest first
    # Within what is remembered, a retry is recognised: exactly once.
    assert write(service, header("w99", 1, commit="partition", attempt=1), batch(20)).duplicate
    clock.now += 3600
    sink.expire()
    assert sink.records == 0 and len(sink._writes) == 0
    # Beyond the horizon a late retry is not recognised: written again (docs/spark.md).
    assert not write(service, header("w99", 1, commit="partition", attempt=2), batch(20)).duplicate


# -- finding 6: a writer reused outside Spark ---------------------------------------------


@pytest.fixture
def sink() -> MemorySink:
    return MemorySink()


@pytest.fixture
def server(sink: MemorySink) -> Iterator[SparkServer]:
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink})) as s:
        yield s


def rows(n: int, start: int = 0) -> list[dict[str, int]]:
    return [{"i": i} for i in range(start, start + n)]


@pytest.mark.parametrize("mode", ["partition", "job"])
def test_spark_writer_reused_outside_spark_is_refused_never_dropped(
    server: SparkServer, sink: MemorySink, mode: str
) -> None:
    writer = partition_writer(server.url, route="out", commit=mode)
    assert writer.write(rows(3)).rows == 3
    with pytest.raises(SinkError, match=r"partition 0 of write .* was written already"):
        writer.write(rows(4, 3))  # new rows, not a retry: loud, not a "duplicate"
    assert writer.write(rows(2, 7), partition=1).rows == 2  # another partition is fine
    # A retry says so with a higher attempt number (Spark's own retries do).
    assert write_partition(writer.target, rows(3), partition=0, attempt=1).duplicate
    if mode == "job":
        assert sink.partitions == {}
        assert writer.commit([0, 1]) == {"committed": 5, "partitions": 2}
        with pytest.raises(SinkError, match="was committed already: make a new writer"):
            writer.write(rows(1), partition=2)
    assert sink.rows() == rows(3) + rows(2, 7)


def test_spark_sink_concurrent_first_attempts_outside_spark_keep_one_refuse_the_other() -> None:
    sink = MemorySink()
    service = Service(sinks={"out": sink})
    first, second = sink.open(header("w", 0)), sink.open(header("w", 0))
    sink.receive(first, batch(20))
    sink.receive(second, batch(20))
    assert not sink.finish(first).duplicate
    with pytest.raises(ValueError, match="written already"):
        sink.finish(second)
    sink.abort(second)  # what the service does on the error
    assert sink.stages == 1 and sink.staged_bytes == 20 + STAGE_COST
    assert job(service, "commit", "w", (0,)) == {"committed": 1, "partitions": 1}


# -- finding 7: an abort that owns nothing owns nothing ----------------------------------


def test_spark_abort_or_commit_of_an_unwritten_write_owns_nothing(
    server: SparkServer, sink: MemorySink
) -> None:
    owner = WriteTarget(url=server.url, route="out", app="etl", write="nightly", commit="job")
    squatter = WriteTarget(url=server.url, route="out", app="etl", write="nightly", commit="job")
    assert commit_job(squatter, (), abort=True) == {"aborted": 0}
    assert commit_job(squatter, ()) == {"committed": 0, "partitions": 0}
    with pytest.raises(SinkError, match=r"partitions \[0\] were not received"):
        commit_job(squatter, [0])
    for p in range(2):
        write_partition(owner, rows(2, 2 * p), partition=p)
    assert commit_job(owner, [0, 1]) == {"committed": 4, "partitions": 2}
    assert sink.rows() == rows(4)
    with pytest.raises(SinkError, match="only its owner may abort"):
        commit_job(squatter, (), abort=True)
