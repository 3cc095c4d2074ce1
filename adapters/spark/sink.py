"""The receiving end of Spark writes: a sink that keeps exactly one attempt of
every partition, served over RSocket by :class:`~.service.Service`.

Delivery semantics (docs/spark.md): a partition's rows are *staged* while its
channel is open; when the writer completes the channel the stage is *closed*
and, in commit mode ``partition``, published at once; in mode ``job`` it waits
for the driver's job commit. Only then is the ack sent, so a Spark task
succeeds only once its rows are safe. A partition is named by
``(app, write, partition)``: a retried attempt whose partition was already
closed is dropped (``duplicate`` in the ack), which gives exactly-once results
per partition for deterministic partitions. An attempt that ends any other way
(error, cancel, lost connection) is discarded.

A write belongs to its *owner*: the first partition of ``(app, write)`` to
arrive binds the write to its owner token and its Spark stage. Later
partitions, the job commit and the abort are taken only with that token (a
client that learnt a write id cannot abort or fill another job's write),
and a partition from another stage is refused: a writer reused for a second
Spark action fails that action loudly instead of having its rows dropped as
duplicates.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import struct
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ._arrow import count_rows_arrow, decode_rows_arrow
from ._wire import (
    Ack,
    JobRequest,
    WireError,
    WriteHeader,
    count_rows,
    decode_rows,
    encode_rows,
)

__all__ = ["JsonLinesSink", "MemorySink", "Sink", "Stage"]

Key = tuple[str, str, int]
_LENGTH = struct.Struct(">I")


def _digest(owner: str) -> bytes:
    return hashlib.sha256(owner.encode("utf-8")).digest()


@dataclass(slots=True)
class _Write:
    """Who a write belongs to: its owner token's digest and its Spark stage
    (-1 until a partition from inside Spark arrives)."""

    owner: bytes
    stage: int


class Stage:
    """One attempt of one partition, staged in a spooled file: memory stays
    bounded by ``spool_bytes`` however large the partition. JSON-lines
    payloads are stored as they came (whole lines); Arrow payloads each with
    a 4-byte length before it."""

    def __init__(self, header: WriteHeader, spool_bytes: int) -> None:
        self.header = header
        self.arrow = header.encoding == "arrow"
        self.rows = 0
        self.bytes = 0
        # closed by discard(), which every path through the sink reaches
        self._file: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=spool_bytes)  # noqa: SIM115

    def write(self, data: bytes, rows: int | None = None) -> None:
        """Stage one payload of ``rows`` rows (counted here for JSON lines)."""
        if self.arrow:
            self._file.write(_LENGTH.pack(len(data)))
            if rows is None:
                raise ValueError("an Arrow payload needs its row count")
        self._file.write(data)
        self.rows += count_rows(data) if rows is None else rows
        self.bytes += len(data)

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The staged rows as JSON lines, in chunks of about ``size`` bytes made
        of whole lines (Arrow payloads are converted)."""
        if self.arrow:
            for payload in self._payloads():
                yield from encode_rows(decode_rows_arrow(payload), 1 << 30, size)
            return
        self._file.seek(0)
        rest = b""
        while chunk := self._file.read(size):
            chunk = rest + chunk
            cut = chunk.rfind(b"\n") + 1
            if cut:
                rest = chunk[cut:]
                yield chunk[:cut]
            else:  # one line longer than size: keep reading
                rest = chunk
        if rest:  # cannot happen: every received batch ends with a newline
            yield rest

    def _payloads(self) -> Iterator[bytes]:
        self._file.seek(0)
        read = self._file.read
        while head := read(4):
            (size,) = _LENGTH.unpack(head)
            yield read(size)

    def decoded(self) -> Iterator[list[Any]]:
        """The staged rows, decoded, a batch at a time."""
        if self.arrow:
            for payload in self._payloads():
                yield decode_rows_arrow(payload)
        else:
            for chunk in self.chunks():
                yield decode_rows(chunk)

    def discard(self) -> None:
        self._file.close()


class Sink:
    """Keeps one attempt per partition and publishes it; thread-safe (every
    write channel runs on its own worker thread). Attempts staged for a job
    commit stay (spooled) until the driver commits or aborts that write.

    Subclass and override :meth:`publish` (where rows go), and optionally
    :meth:`check_header` / :meth:`check_batch`: an exception from any of them
    fails the writing Spark task with its message (ERROR APPLICATION_ERROR).
    """

    #: payloads a writer may have in flight per channel (RSocket REQUEST_N)
    prefetch = 8

    def __init__(self, *, prefetch: int | None = None, spool_bytes: int = 4 << 20) -> None:
        if prefetch is not None:
            if prefetch <= 0:
                raise ValueError("prefetch must be positive")
            self.prefetch = prefetch
        self.spool_bytes = spool_bytes
        self._lock = threading.Lock()
        self._closed: set[Key] = set()  # closed attempts: published or pending
        self._pending: dict[tuple[str, str], dict[int, Stage]] = {}
        self._committed_jobs: set[tuple[str, str]] = set()
        self._writes: dict[tuple[str, str], _Write] = {}
        self.rows_received = 0  # every row that arrived, duplicates included
        self.rows_published = 0
        self.partitions_published = 0
        self.duplicates = 0
        self.aborted = 0

    # -- hooks -----------------------------------------------------------
    def check_header(self, header: WriteHeader) -> None:
        """Refuse a write before any row arrives (raise)."""

    def check_batch(self, header: WriteHeader, data: bytes) -> None:
        """Refuse a batch (raise); the attempt is then discarded. ``data`` is the
        payload as received: JSON lines, or an Arrow IPC stream when
        ``header.encoding`` is ``arrow``."""

    def publish(self, header: WriteHeader, stage: Stage) -> None:
        """Make a partition's rows visible. Called once per partition, under
        the sink's lock, so publications never interleave. ``stage.chunks()``
        gives the rows as JSON lines, ``stage.decoded()`` as Python values."""
        raise NotImplementedError

    # -- the write protocol (called by the service) ------------------------
    def open(self, header: WriteHeader) -> Stage:
        self.check_header(header)
        self._claim(header)
        return Stage(header, self.spool_bytes)

    def _claim(self, header: WriteHeader) -> None:
        """The first partition of a write binds it to its owner and stage;
        the next ones must match (see the module notes)."""
        job = (header.app, header.write)
        digest = _digest(header.owner)
        with self._lock:
            write = self._writes.get(job)
            if write is None:
                self._writes[job] = _Write(digest, header.stage)
                return
            if not hmac.compare_digest(write.owner, digest):
                raise PermissionError(
                    f"write {header.write!r} of app {header.app!r} belongs to another writer"
                )
            if write.stage < 0:
                write.stage = header.stage
            elif 0 <= header.stage != write.stage:
                raise ValueError(
                    f"write {header.write!r} belongs to Spark stage {write.stage}, not "
                    f"{header.stage}: a writer serves one action (make a new one per action)"
                )

    def _check_owner(self, request: JobRequest) -> bool:
        """Under the lock: False if nothing was written yet; raises if
        ``request`` is not from the write's owner."""
        write = self._writes.get((request.app, request.write))
        if write is None:
            return False
        if not hmac.compare_digest(write.owner, _digest(request.owner)):
            raise PermissionError(
                f"write {request.write!r} of app {request.app!r} belongs to another writer: "
                f"only its owner may {request.op} it"
            )
        return True

    def receive(self, stage: Stage, data: bytes) -> None:
        if stage.arrow:
            rows = count_rows_arrow(data)  # WireError if it is not Arrow IPC
        elif data and not data.endswith(b"\n"):
            # Whole JSON lines only: a cut line would merge with the next.
            raise WireError("a row batch must end with a newline")
        else:
            rows = count_rows(data)
        self.check_batch(stage.header, data)
        stage.write(data, rows)
        with self._lock:
            self.rows_received += rows

    def finish(self, stage: Stage) -> Ack:
        """The writer sent everything: publish (or hold for the job commit)
        unless another attempt of the partition was closed first."""
        header = stage.header
        with self._lock:
            duplicate = header.key in self._closed or (
                header.commit == "job" and (header.app, header.write) in self._committed_jobs
            )
            if not duplicate:
                if header.commit == "partition":
                    self._publish(stage)
                else:
                    self._pending.setdefault((header.app, header.write), {})[
                        header.partition
                    ] = stage
                self._closed.add(header.key)
            else:
                self.duplicates += 1
        if duplicate or header.commit == "partition":
            stage.discard()
        return Ack(
            partition=header.partition,
            attempt=header.attempt,
            rows=stage.rows,
            nbytes=stage.bytes,
            duplicate=duplicate,
        )

    def abort(self, stage: Stage) -> None:
        with self._lock:
            self.aborted += 1
        stage.discard()

    def _publish(self, stage: Stage) -> None:
        self.publish(stage.header, stage)
        self.rows_published += stage.rows
        self.partitions_published += 1

    def job(self, request: JobRequest) -> dict[str, Any]:
        """Job commit: publish the listed partitions of the write; abort: drop
        what is pending. Commit is idempotent (the driver may retry it)."""
        job = (request.app, request.write)
        with self._lock:
            if not self._check_owner(request):
                # Nothing written yet: the caller owns the write from now on.
                self._writes[job] = _Write(_digest(request.owner), -1)
            if request.op == "abort":
                pending = self._pending.pop(job, {})
                for stage in pending.values():
                    stage.discard()
                for partition in pending:
                    self._closed.discard((request.app, request.write, partition))
                return {"aborted": len(pending)}
            if job in self._committed_jobs:
                return {"committed": 0, "again": True}
            pending = self._pending.get(job, {})
            missing = sorted(set(request.partitions) - set(pending))
            if missing:
                raise ValueError(
                    f"job commit of write {request.write}: partitions {missing} were not received"
                )
            rows = 0
            try:
                for partition in sorted(request.partitions):
                    stage = pending[partition]
                    self._publish(stage)
                    rows += stage.rows
            finally:
                self._pending.pop(job, None)
                self._committed_jobs.add(job)
                for stage in pending.values():
                    stage.discard()
            return {"committed": rows, "partitions": len(request.partitions)}


class MemorySink(Sink):
    """Publishes decoded rows into :attr:`partitions` (``key -> rows``): for
    tests and small results."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.partitions: dict[Key, list[Any]] = {}
        self.attempts: dict[Key, int] = {}

    def publish(self, header: WriteHeader, stage: Stage) -> None:
        rows: list[Any] = []
        for batch in stage.decoded():
            rows.extend(batch)
        self.partitions[header.key] = rows
        self.attempts[header.key] = header.attempt

    def rows(self) -> list[Any]:
        with self._lock:
            return [row for key in sorted(self.partitions) for row in self.partitions[key]]


class JsonLinesSink(Sink):
    """Appends every published partition to one JSON-lines file (rows of a
    partition stay together). ``path`` is created or truncated."""

    def __init__(self, path: str | Path, **options: Any) -> None:
        super().__init__(**options)
        self.path = Path(path)
        self._out: IO[bytes] = self.path.open("wb")

    def publish(self, header: WriteHeader, stage: Stage) -> None:
        for chunk in stage.chunks():
            self._out.write(chunk)
        self._out.flush()

    def close_file(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._out.close()
