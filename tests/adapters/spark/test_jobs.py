"""Spark jobs end to end (one shared ``local[2,4]`` session): partition writer
and reader with exact content, retries giving exactly-once results, a sink
error on the driver, the ``sansrs`` data source both ways, and the pipeline."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sansrs.adapters.spark import (
    MemorySink,
    Service,
    WriteHeader,
    partition_reader,
    partition_writer,
    read_rdd,
    serve,
)

from tests.adapters.spark.counting_sink import CountingSink

pytestmark = pytest.mark.timeout(240)


def _pickle_this_module_by_value() -> None:
    # Workers cannot import this test module: ship its functions by value.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


_pickle_this_module_by_value()


def readings(partition: int, partitions: int, options: Mapping[str, Any]) -> Iterator[Any]:
    n = int(options.get("n", 1000))
    for i in range(partition * n // partitions, (partition + 1) * n // partitions):
        yield {"id": i, "device": f"d{i % 7}", "value": i / 4}


class GrowingLog:
    """A replayable source: records 0..latest()-1, served by offset range."""

    def __init__(self) -> None:
        self.size = 0

    def latest(self) -> int:
        return self.size

    def __call__(self, partition: int, partitions: int, options: Mapping[str, Any]) -> Any:
        lo, hi = int(options.get("start", 0)), int(options.get("end", self.size))
        share = range(lo + partition, hi, partitions)
        return ({"seq": i, "device": f"d{i % 3}"} for i in share)


LOG = GrowingLog()


class PickySink(MemorySink):
    def check_batch(self, header: WriteHeader, data: bytes) -> None:
        if b'"id":4242,' in data:
            raise ValueError("sink refuses id 4242: negative voltage")


@pytest.fixture(scope="module")
def services() -> Iterator[tuple[str, dict[str, MemorySink]]]:
    sinks: dict[str, MemorySink] = {
        "out": MemorySink(), "retry": CountingSink(), "picky": PickySink(), "ds": MemorySink(),
        "ds-fail": MemorySink(),
    }
    service = Service(
        sources={"readings": readings, "log": LOG}, sinks=sinks, rows_per_payload=100
    )
    with serve("tcp://127.0.0.1:0", service) as server:
        yield server.url, sinks


def test_partition_writer_dataframe_exact_rows(spark: Any, services: Any) -> None:
    url, sinks = services
    df = spark.range(0, 5000, numPartitions=3).selectExpr("id", "id * 3 AS triple")
    writer = partition_writer(url, route="out", rows_per_payload=64)
    df.foreachPartition(writer)
    sink = sinks["out"]
    app = spark.sparkContext.applicationId
    ((write,),) = {(key[1],) for key in sink.partitions}
    assert write.startswith(writer.target.write + ".")  # the action's own write id
    assert sorted(sink.partitions) == [(app, write, p) for p in range(3)]
    assert sorted(r["id"] for r in sink.rows()) == list(range(5000))
    assert all(r["triple"] == 3 * r["id"] for r in sink.rows())
    # The same writer in a second action writes again: nothing is taken
    # for a retried attempt and dropped.
    df.where("id < 10").foreachPartition(writer)
    assert sink.duplicates == 0 and len(sink.partitions) == 6
    assert sorted(r["id"] for r in sink.rows()) == sorted([*range(5000), *range(10)])


def test_arrow_encoded_writers_exact_rows(spark: Any) -> None:
    sink = MemorySink()
    with serve("tcp://127.0.0.1:0", Service(sinks={"s": sink})) as server:
        df = spark.range(0, 3000, numPartitions=2).selectExpr("id", "CAST(id AS STRING) AS s")
        df.foreachPartition(partition_writer(server.url, route="s", encoding="arrow"))
        assert sorted((r["id"], r["s"]) for r in sink.rows()) == [(i, str(i)) for i in range(3000)]
        df.write.format("sansrs").option("url", server.url).option("route", "s").option(
            "encoding", "arrow"
        ).mode("append").save()
    assert sink.rows_published == 6000 and sink.partitions_published == 4


def test_partition_writer_rdd_form_returns_acks(spark: Any) -> None:
    sink = MemorySink()
    with serve("tcp://127.0.0.1:0", Service(sinks={"s": sink})) as server:
        writer = partition_writer(server.url, route="s")
        rdd = spark.sparkContext.parallelize([(i, str(i)) for i in range(300)], 4)
        acks = rdd.mapPartitions(writer.acks).collect()
    assert sorted(a["partition"] for a in acks) == [0, 1, 2, 3]
    assert sum(a["rows"] for a in acks) == 300
    assert sorted(tuple(r) for r in sink.rows()) == [(i, str(i)) for i in range(300)]


def test_partition_reader_reads_exact_content(spark: Any, services: Any) -> None:
    url, _ = services
    reader = partition_reader(url, route="readings", partitions=4, options={"n": 3001})
    got = read_rdd(spark.sparkContext, reader).collect()
    assert got == list(readings(0, 1, {"n": 3001}))
    typed = partition_reader(url, route="readings", partitions=2, options={"n": 10},
                             fields=["id", "device"])
    df = spark.createDataFrame(read_rdd(spark.sparkContext, typed), "id long, device string")
    assert [tuple(r) for r in df.orderBy("id").collect()] == [(i, f"d{i % 7}") for i in range(10)]


def _fail_first_attempt(rows: Iterator[Any]) -> Iterator[Any]:
    """Partition 1 dies half way on its first attempt (before any ack)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    for i, row in enumerate(rows):
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and i == 150:
            raise RuntimeError("injected failure in partition 1, attempt 0")
        yield row


def test_retried_partitions_give_exactly_once_results(spark: Any, services: Any) -> None:
    url, sinks = services
    sink = sinks["retry"]
    writer = partition_writer(url, route="retry", rows_per_payload=20)

    def write_then_fail(rows: Iterator[Any]) -> Iterator[Any]:
        # Partition 0 fails *after* its ack on the first attempt: the retry's
        # rows arrive again and must be dropped as a duplicate.
        from pyspark import TaskContext

        ctx = TaskContext.get()
        yield from writer.acks(_fail_first_attempt(rows))
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            raise RuntimeError("injected failure after the ack of partition 0")

    rdd = spark.sparkContext.parallelize(range(1200), 3)
    acks = rdd.mapPartitions(write_then_fail).collect()
    assert sorted(a["partition"] for a in acks) == [0, 1, 2]
    assert sorted(sink.rows()) == list(range(1200))  # exactly once
    assert sink.duplicates == 1  # partition 0's second attempt
    # Every stage opened has ended: published (3), a duplicate (1), or
    # aborted: partition 1's broken first attempt, unless its channel ended
    # before the write started, and then nothing was opened for it.
    assert sink.settled(30)
    assert sink.finished == 4 and sink.aborted <= 1
    attempts = {key[2]: a for key, a in sink.attempts.items()}
    assert attempts == {0: 0, 1: 1, 2: 0}


def test_sink_error_surfaces_on_the_driver(spark: Any, services: Any) -> None:
    url, sinks = services
    df = spark.range(0, 5000, numPartitions=2).selectExpr("id", "'x' AS pad")
    with pytest.raises(Exception, match="sink refuses id 4242: negative voltage"):
        df.foreachPartition(partition_writer(url, route="picky"))
    assert 4242 not in {r["id"] for r in sinks["picky"].rows()}


def test_data_source_round_trip(spark: Any, services: Any) -> None:
    url, sinks = services
    df = (
        spark.read.format("sansrs")
        .option("url", url)
        .option("route", "readings")
        .option("partitions", 3)
        .option("query", '{"n": 2500}')
        .option("schema", "id long, device string, value double")
        .load()
    )
    assert df.rdd.getNumPartitions() == 3
    rows = sorted(tuple(r) for r in df.collect())
    assert rows == [(r["id"], r["device"], r["value"]) for r in readings(0, 1, {"n": 2500})]
    plain = (
        spark.read.format("sansrs").option("url", url).option("route", "readings")
        .option("arrow", "false").option("query", '{"n": 5}')
        .schema("device string, id long").load()
    )
    assert [tuple(r) for r in plain.collect()] == [(f"d{i}", i) for i in range(5)]
    df.write.format("sansrs").option("url", url).option("route", "ds").mode("append").save()
    sink = sinks["ds"]
    assert sorted(r["id"] for r in sink.rows()) == list(range(2500))
    assert sink.partitions_published == 3


def test_data_source_over_tls_with_the_secret_in_options(spark: Any) -> None:
    from tests.adapters.transport.tls_certs import certs

    sink = MemorySink()
    service = Service(sources={"readings": readings}, sinks={"s": sink})
    with serve("tls://127.0.0.1:0", service, ssl_context=certs().server_context()) as server:
        ca = certs().ca.cert_pem.bytes().decode()
        assert server.secret is not None
        df = (
            spark.read.format("sansrs").option("url", server.address)
            .option("secret", server.secret).option("tls_ca", ca)
            .option("route", "readings").option("partitions", 2).option("query", '{"n": 40}')
            .option("schema", "id long").load()
        )
        assert sorted(r[0] for r in df.collect()) == list(range(40))
        df.write.format("sansrs").option("url", server.url).option("tls_ca", ca).option(
            "route", "s"
        ).mode("append").save()
        with pytest.raises(Exception, match="REJECTED_SETUP"):
            spark.read.format("sansrs").option("url", server.address).option(
                "tls_ca", ca
            ).option("route", "readings").option("schema", "id long").load().collect()
    assert sorted(r["id"] for r in sink.rows()) == list(range(40))


def test_data_source_failed_job_publishes_nothing(spark: Any, services: Any) -> None:
    url, sinks = services

    def always_fail(i: int) -> int:
        if i == 1999:
            raise ValueError("poisoned row")
        return i

    from pyspark.sql.types import LongType

    bad = spark.range(0, 2000, numPartitions=2).selectExpr("id")
    poison = bad.rdd.map(lambda r: (always_fail(r[0]),)).toDF(["id"])
    poison = poison.select(poison["id"].cast(LongType()))
    with pytest.raises(Exception, match="poisoned row"):
        poison.write.format("sansrs").option("url", url).option("route", "ds-fail").mode(
            "append"
        ).save()
    sink = sinks["ds-fail"]
    # partition 0 reached the sink and was staged, then the job abort dropped it
    assert sink.partitions == {} and sink.rows_published == 0
    assert sink.rows_received >= 1000


def test_data_source_write_over_the_sinks_budget_fails_the_job_loudly(spark: Any) -> None:
    # Each partition stages ~70 KiB until the job commit; the writer's budget
    # holds one: the other partition's task is refused, Spark fails the job
    # with the sink's message, the job abort frees what was staged.
    sink = CountingSink(max_writer_staged=100 * 1024)
    with serve("tcp://127.0.0.1:0", Service(sinks={"s": sink})) as server:
        df = spark.range(0, 4000, numPartitions=2).selectExpr("id", "repeat('x', 20) AS pad")
        with pytest.raises(Exception, match=r"SinkConfig\.max_writer_staged \(102400\)"):
            df.write.format("sansrs").option("url", server.url).option("route", "s").mode(
                "append"
            ).save()
        assert sink.settled(30)
    assert sink.partitions == {} and sink.rows_published == 0
    assert (sink.staged_bytes, sink.stages) == (0, 0)


def test_streaming_reader_resumes_from_its_checkpointed_offset(
    spark: Any, services: Any, tmp_path: Path
) -> None:
    url, _ = services

    def run_available_now() -> list[int]:
        got: list[int] = []
        batches: list[int] = []

        def collect(df: Any, batch_id: int) -> None:  # runs on the driver
            batches.append(batch_id)
            got.extend(r["seq"] for r in df.collect())

        stream = (
            spark.readStream.format("sansrs").option("url", url).option("route", "log")
            .option("partitions", 2).option("max_rows_per_batch", 400)
            .option("schema", "seq long, device string").load()
        )
        query = (
            stream.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True).start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None
        assert len(batches) >= 2  # max_rows_per_batch splits the backlog
        return sorted(got)

    LOG.size = 1000
    assert run_available_now() == list(range(1000))
    LOG.size = 1500  # the log grew: a restarted query reads only what is new
    assert run_available_now() == list(range(1000, 1500))


@pytest.mark.parametrize("source_kind", ["ditto", "rsocket"])
def test_pipeline_runs_and_checks_pass(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], source_kind: str
) -> None:
    path = Path(__file__).resolve().parents[3] / "examples" / "pipeline.py"
    spec = importlib.util.spec_from_file_location("sansrs_pipeline", path)
    assert spec is not None and spec.loader is not None
    pipeline = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = pipeline  # dataclasses look their module up
    spec.loader.exec_module(pipeline)
    out = tmp_path / "stats.jsonl"
    status = pipeline.run(spark, events=20_000, devices=37, partitions=3, out=out,
                          progress=False, source_kind=source_kind)
    text = capsys.readouterr().out
    assert status == 0, text
    assert ("ws://127.0.0.1:" in text) == (source_kind == "ditto")
    assert "rows in:     20,000 events" in text
    assert "rows out:    37 device rows" in text
    assert len(out.read_text().splitlines()) == 37
    # the check really checks: a stored row too many fails it
    with out.open("a") as f:
        f.write(out.read_text().splitlines()[0] + "\n")
    assert any("stored twice" in p for p in pipeline.check_output(out, pipeline.DeviceHistory(
        20_000, 37)))
