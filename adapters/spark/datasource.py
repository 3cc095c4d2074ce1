"""The PySpark Python Data Source ``sansrs``.

    spark.read.format("sansrs").option("url", url).option("route", "events")
        .option("partitions", 4).option("schema", "device string, temp double").load()
    df.write.format("sansrs").option("url", url).option("route", "stats").mode("append").save()

Reads: one input partition per share of the remote stream (REQUEST_STREAM with
the partition index and count; for ``ws://`` URLs the Ditto history of the
things hashed to the partition). Streaming reads: offsets are record counts
over RSocket, revisions over Ditto. Writes: every task streams its partition to
the sink in commit mode ``job``; the driver's ``commit`` publishes exactly the
partitions whose tasks succeeded (one attempt each) and ``abort`` drops them,
so a failed job leaves nothing behind. A service's secret comes with its URL
(``server.url``) or option ``secret``; ``tls://`` URLs take the ``tls_*``
options. Options are listed in docs/spark.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .auth import Access, ClientTls
from .partitions import task_info
from .remote import (
    DEFAULT_TIMEOUT,
    WriteTarget,
    commit_job,
    default_prefetch,
    latest_offset,
    open_partition_columns,
    open_partition_stream,
    write_partition,
)

__all__ = ["SansrsDataSource", "register"]

NAME = "sansrs"


def _option(options: Any, name: str, default: str | None = None) -> str:
    value = options.get(name, default)
    if value is None:
        raise ValueError(f'the sansrs data source needs option("{name}", ...)')
    return str(value)


def _int_option(options: Any, name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name!r} must be an integer, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"option {name!r} must be positive, not {value}")
    return value


def _access(options: Any) -> Access | None:
    """Option ``secret`` and the ``tls_*`` options as an :class:`Access`
    (None when none is set: the URL's secret, if any, is used)."""
    secret = options.get("secret")
    tls = None
    if any(options.get(k) is not None for k in ("tls_ca", "tls_cert", "tls_check_hostname")):
        tls = ClientTls(
            ca=options.get("tls_ca"),
            cert=options.get("tls_cert"),
            key=options.get("tls_key"),
            check_hostname=str(options.get("tls_check_hostname", "true")).lower() == "true",
            server_hostname=options.get("tls_server_hostname"),
        )
    if secret is None and tls is None:
        return None
    return Access(secret=None if secret is None else str(secret), tls=tls)


class SansrsDataSource(DataSource):
    """``format("sansrs")``: rows from and to sansrs services over RSocket, and
    from Ditto history over WebSocket (``ws://``, ``wss://``: :mod:`.ditto`)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType | str:
        schema = self.options.get("schema")
        if not schema:
            raise ValueError(
                'the sansrs data source needs a schema: .schema(...) or option("schema", DDL)'
            )
        return str(schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = dict(self.options)
        if str(options.get("url", "")).split("://", 1)[0] in ("ws", "wss"):
            return _DittoStreamReader(options, schema)
        return _StreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError("the sansrs data source appends: use mode('append')")
        return _Writer(dict(self.options))


class _Reader(DataSourceReader):
    def __init__(self, options: dict[str, Any], schema: StructType) -> None:
        self.url = _option(options, "url")
        self.route = _option(options, "route")
        self.partitions_ = _int_option(options, "partitions", 1)
        self.prefetch = _int_option(options, "prefetch", default_prefetch(self.url))
        self.timeout = float(options.get("timeout", DEFAULT_TIMEOUT))
        self.query = json.loads(options.get("query", "{}"))
        self.fields = tuple(schema.fieldNames())
        self.arrow = str(options.get("arrow", "true")).lower() == "true"
        self.schema = schema
        self.access = _access(options)

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(i) for i in range(self.partitions_)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self._rows(int(partition.value), self.query)

    def _rows(self, index: int, query: dict[str, Any]) -> Iterator[Any]:
        share = (self.url, self.route, index, self.partitions_, query)
        if self.arrow:
            # One Arrow batch per payload: decoded in C++, no per-row Python
            # conversion on Spark's side.
            from pyarrow import RecordBatch
            from pyspark.sql.pandas.types import to_arrow_schema

            arrow_schema = to_arrow_schema(self.schema)
            columns = open_partition_columns(
                *share,
                prefetch=self.prefetch,
                timeout=self.timeout,
                fields=self.fields,
                access=self.access,
            )
            if columns is not None:  # Ditto: the columns without a dict per row
                for named in columns:
                    yield RecordBatch.from_pydict(named, schema=arrow_schema)
                return
        batches = open_partition_stream(
            *share,
            prefetch=self.prefetch,
            timeout=self.timeout,
            access=self.access,
            columns=self.fields,
        )
        if self.arrow:
            for batch in batches:
                if batch:
                    yield RecordBatch.from_pylist(batch, schema=arrow_schema)
            return
        fields = self.fields
        for batch in batches:
            for row in batch:
                yield tuple(map(row.get, fields))


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over a replayable source: offsets are ``{"offset": n}``
    (records so far); a batch ``[start, end)`` is read as ``partitions``
    shares, each a REQUEST_STREAM with ``start`` / ``end`` in its options, so
    a restarted query resumes from its checkpointed offset."""

    def __init__(self, options: dict[str, Any], schema: StructType) -> None:
        self.batch_reader = _Reader(options, schema)
        self.initial = int(options.get("start_offset", 0))
        raw_max = options.get("max_rows_per_batch")
        self.max_rows = None if raw_max is None else _int_option(options, "max_rows_per_batch", 1)
        #: Trigger.AvailableNow: the latest offset when the query started.
        self.target: int | None = None

    def initialOffset(self) -> dict[str, int]:
        return {"offset": self.initial}

    def getDefaultReadLimit(self) -> Any:
        if self.max_rows is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_rows)

    def latestOffset(
        self, start: dict[str, int] | None = None, limit: Any = None
    ) -> dict[str, int]:
        # Spark passes (start, limit) since 4.2; without them it reads all.
        latest = self._latest() if self.target is None else self.target
        if start is not None and isinstance(limit, ReadMaxRows):
            latest = min(latest, int(start["offset"]) + limit.max_rows)
        return {"offset": latest}

    def _latest(self) -> int:
        r = self.batch_reader
        return latest_offset(r.url, r.route, timeout=r.timeout, access=r.access)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        lo, hi = int(start["offset"]), int(end["offset"])
        if hi <= lo:
            return []
        return [InputPartition((i, lo, hi)) for i in range(self.batch_reader.partitions_)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        index, lo, hi = partition.value
        r = self.batch_reader
        return r._rows(int(index), {**r.query, "start": int(lo), "end": int(hi)})

    def commit(self, end: dict[str, int]) -> None:
        pass  # the source keeps its history; nothing to release


class _DittoStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over Ditto history: offsets are revisions,
    ``{"revisions": {thingId: last revision read}}`` (0 or absent: none;
    Ditto's revisions start at 1). The latest offset asks
    Ditto for each thing's latest revision; a batch reads, per thing of the
    partition, ``subscribeForPersistedEvents`` from the start revision + 1
    to the end revision, so a restarted query resumes where its checkpoint
    ends (Ditto replays any revision range)."""

    def __init__(self, options: dict[str, Any], schema: StructType) -> None:
        self.batch_reader = _Reader(options, schema)
        raw_max = options.get("max_rows_per_batch")
        self.max_rows = None if raw_max is None else _int_option(options, "max_rows_per_batch", 1)
        #: Trigger.AvailableNow: the latest revisions when the query started.
        self.target: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, Any]:
        return {"revisions": {}}  # nothing read: every thing from its first revision

    def getDefaultReadLimit(self) -> Any:
        if self.max_rows is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_rows)

    def _latest(self) -> dict[str, int]:
        from .ditto import latest_revisions

        r = self.batch_reader
        tls = r.access.tls if r.access is not None else None
        return latest_revisions(r.url, r.route, r.query, r.timeout, tls)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        latest = self._latest() if self.target is None else self.target
        done: dict[str, int] = dict((start or {}).get("revisions", {}))
        end = {**done, **{t: max(rev, done.get(t, 0)) for t, rev in latest.items()}}
        if start is not None and isinstance(limit, ReadMaxRows):
            # Spend the row budget thing by thing in ID order (revisions
            # stand for events: a filter or a gap only makes a batch smaller).
            budget = limit.max_rows
            for thing in sorted(end):
                before = done.get(thing, 0)
                take = min(end[thing] - before, budget)
                if take <= 0 and thing not in done:
                    del end[thing]
                else:
                    end[thing] = before + max(take, 0)
                budget -= max(take, 0)
        return {"revisions": end}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        lo, hi = dict(start.get("revisions", {})), dict(end.get("revisions", {}))
        if all(lo.get(t, 0) >= rev for t, rev in hi.items()):
            return []
        n = self.batch_reader.partitions_
        return [InputPartition((i, lo, hi)) for i in range(n)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        index, lo, hi = partition.value
        r = self.batch_reader
        return r._rows(int(index), {**r.query, "start": lo, "end": hi})

    def commit(self, end: dict[str, Any]) -> None:
        pass  # Ditto keeps the history; nothing to release


@dataclass
class SansrsCommitMessage(WriterCommitMessage):
    partition: int
    attempt: int
    rows: int
    duplicate: bool


class _Writer(DataSourceWriter):
    def __init__(self, options: dict[str, Any]) -> None:
        # Built once per save() on the planning side; the same instance (and
        # so the same write id) is sent to every task and to commit/abort.
        self.target = WriteTarget(
            url=_option(options, "url"),
            route=_option(options, "route", NAME),
            app=str(options.get("app", "")),
            commit="job",
            rows_per_payload=_int_option(options, "rows_per_payload", 1000),
            bytes_per_payload=_int_option(options, "bytes_per_payload", 256 * 1024),
            timeout=float(options.get("timeout", DEFAULT_TIMEOUT)),
            encoding=str(options.get("encoding", "jsonl")),
            access=_access(options),
        )

    def write(self, iterator: Iterator[Any]) -> SansrsCommitMessage:
        info = task_info()
        pid, attempt, stage, task = info if info is not None else (0, 0, -1, -1)
        ack = write_partition(
            self.target, iterator, partition=pid, attempt=attempt, stage=stage, task=task
        )
        return SansrsCommitMessage(pid, attempt, ack.rows, ack.duplicate)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        partitions = [m.partition for m in messages if isinstance(m, SansrsCommitMessage)]
        commit_job(self.target, partitions)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_job(self.target, (), abort=True)


def register(spark: Any) -> None:
    """Make ``format("sansrs")`` available in ``spark``."""
    spark.dataSource.register(SansrsDataSource)
