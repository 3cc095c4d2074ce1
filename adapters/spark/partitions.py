"""Partition functions for ``foreachPartition`` / ``mapPartitions`` (DataFrame
and RDD forms). They are picklable values: each task opens its own
connection, so nothing that holds a lock or a socket is captured."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._wire import Ack
from .auth import Access, ClientTls
from .remote import (
    DEFAULT_TIMEOUT,
    WriteTarget,
    commit_job,
    default_prefetch,
    open_partition_stream,
    write_partition,
)

__all__ = [
    "PartitionReader",
    "PartitionWriter",
    "partition_reader",
    "partition_writer",
    "read_rdd",
    "task_info",
]


def task_info() -> tuple[int, int, int, int] | None:
    """``(partition, attempt, stage, task attempt id)`` of the running Spark
    task, or None outside one."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is in the spark extra
        return None
    ctx = TaskContext.get()
    if ctx is None:
        return None
    return (ctx.partitionId(), ctx.attemptNumber(), ctx.stageId(), ctx.taskAttemptId())


def _application_id() -> str:
    """The driver's Spark application id, if a SparkContext runs here."""
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover
        return ""
    sc = SparkContext._active_spark_context
    return str(sc.applicationId) if sc is not None else ""


@dataclass(frozen=True, slots=True)
class PartitionWriter:
    """``df.foreachPartition(writer)`` / ``rdd.foreachPartition(writer)``:
    streams each partition to the sink (see :func:`partition_writer`).
    ``rdd.mapPartitions(writer.acks)`` does the same and yields each
    partition's ack (a dict) to the driver."""

    target: WriteTarget

    def __call__(self, rows: Iterable[Any]) -> None:
        self.write(rows)

    def write(self, rows: Iterable[Any], partition: int | None = None) -> Ack:
        """Write ``rows`` as one partition: inside a Spark task the task's
        (``partition`` overrides its index); outside Spark partition
        ``partition`` (default 0), once: the sink refuses the same partition
        again (a ``SinkError``), as it cannot be a Spark retry."""
        info = task_info()
        if info is None:
            return write_partition(self.target, rows, partition=partition or 0)
        pid, attempt, stage, task = info
        target = self.target
        # Commit mode partition: each Spark action (its own stage) is a write
        # of its own, so a writer reused for another action writes again
        # instead of having its partitions taken for retries. Mode job has
        # one commit per write: the sink refuses a second stage instead.
        write = f"{target.write}.{stage}" if target.commit == "partition" else None
        return write_partition(
            target,
            rows,
            partition=pid if partition is None else partition,
            attempt=attempt,
            stage=stage,
            task=task,
            write=write,
        )

    def acks(self, rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
        ack = self.write(rows)
        yield {
            "partition": ack.partition,
            "attempt": ack.attempt,
            "rows": ack.rows,
            "nbytes": ack.nbytes,
            "duplicate": ack.duplicate,
        }

    def commit(self, partitions: Iterable[int]) -> Any:
        """Commit mode ``job``: publish these partitions (call on the driver
        after the Spark action succeeded)."""
        return commit_job(self.target, partitions)

    def abort(self) -> Any:
        """Commit mode ``job``: drop everything staged for this write."""
        return commit_job(self.target, (), abort=True)


def partition_writer(
    url: str,
    *,
    route: str,
    rows_per_payload: int = 1000,
    bytes_per_payload: int = 256 * 1024,
    commit: str = "partition",
    timeout: float = DEFAULT_TIMEOUT,
    app: str | None = None,
    write: str | None = None,
    encoding: str = "jsonl",
    secret: str | None = None,
    tls: ClientTls | None = None,
) -> PartitionWriter:
    """A partition function writing to the sink ``route`` at ``url``.

    Call it on the driver: it takes the application id from the running
    SparkContext (``app``) and names this write uniquely (``write``); the
    sink keeps one attempt per ``(app, write, partition)``. ``commit="job"``
    holds partitions at the sink until :meth:`PartitionWriter.commit`.
    ``encoding="arrow"`` sends Arrow IPC payloads (needs pyarrow on both
    sides) instead of JSON lines. ``secret``: the service's secret (default:
    the one ``url`` carries, as ``server.url`` does, else
    ``$SANSRS_SPARK_SECRET``); ``tls``: TLS settings for ``tls://`` URLs.

    In commit mode ``partition`` each Spark action using the writer is a
    write of its own; in mode ``job`` a writer serves one action (the sink
    refuses partitions of a second one: make a writer per action). Outside
    Spark, :meth:`PartitionWriter.write` writes each partition once (the
    sink refuses it again rather than drop its rows as a retry's)."""
    target = WriteTarget(
        url=url,
        route=route,
        app=_application_id() if app is None else app,
        write=write or "",
        commit=commit,
        rows_per_payload=rows_per_payload,
        bytes_per_payload=bytes_per_payload,
        timeout=timeout,
        encoding=encoding,
        access=None if secret is None and tls is None else Access(secret=secret, tls=tls),
    )
    return PartitionWriter(target)


@dataclass(frozen=True, slots=True)
class PartitionReader:
    """``sc.parallelize(range(n), n).mapPartitionsWithIndex(reader)`` (or
    ``mapPartitions``, which takes the index from the task): partition i reads
    share i of n of the remote stream, ``prefetch`` batches ahead."""

    url: str = field(repr=False)  # may carry the service's secret
    route: str
    partitions: int
    options: Mapping[str, Any] = field(default_factory=dict)
    fields: tuple[str, ...] | None = None
    prefetch: int = 8
    timeout: float = DEFAULT_TIMEOUT
    access: Access | None = None

    def __call__(self, index_or_rows: Any, rows: Any = None) -> Iterator[Any]:
        if rows is None:  # mapPartitions(reader): the index comes from the task
            info = task_info()
            index = info[0] if info is not None else 0
        else:
            index = int(index_or_rows)
        return self.read(index)

    def read(self, index: int) -> Iterator[Any]:
        batches = open_partition_stream(
            self.url,
            self.route,
            index,
            self.partitions,
            self.options,
            prefetch=self.prefetch,
            timeout=self.timeout,
            access=self.access,
            columns=self.fields,
        )
        fields = self.fields
        if fields is None:
            for batch in batches:
                yield from batch
        else:
            for batch in batches:
                yield from (tuple(map(row.get, fields)) for row in batch)


def partition_reader(
    url: str,
    *,
    route: str,
    partitions: int,
    options: Mapping[str, Any] | None = None,
    fields: Iterable[str] | None = None,
    prefetch: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    secret: str | None = None,
    tls: ClientTls | None = None,
) -> PartitionReader:
    """A mapPartitions reader of ``route`` at ``url`` split into ``partitions``
    shares. Rows are yielded as the source sent them (dicts for JSON objects),
    or as tuples of ``fields`` (ready for ``createDataFrame``). ``prefetch``:
    payloads over RSocket (default 8), events over Ditto (``ws://``, 1,024).
    ``secret`` / ``tls``: as for :func:`partition_writer` (``tcp://``,
    ``tls://`` and ``unix://`` URLs reach a sansrs service)."""
    if partitions <= 0:
        raise ValueError("partitions must be positive")
    if prefetch is None:
        prefetch = default_prefetch(url)
    return PartitionReader(
        url,
        route,
        partitions,
        dict(options or {}),
        None if fields is None else tuple(fields),
        prefetch,
        timeout,
        None if secret is None and tls is None else Access(secret=secret, tls=tls),
    )


def read_rdd(sc: Any, reader: PartitionReader) -> Any:
    """The RDD of ``reader``'s rows: one Spark partition per share."""
    n = reader.partitions
    return sc.parallelize(range(n), n).mapPartitionsWithIndex(reader)
