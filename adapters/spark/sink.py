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
(error, cancel, lost connection) is discarded. Outside Spark (stage -1) a
partition that arrives again with no higher attempt number is not a retry
but a writer reused: it is refused, never dropped.

A write belongs to its *owner*: the first partition of ``(app, write)`` to
arrive binds the write to its owner token and its Spark stage. Later
partitions, the job commit and the abort are taken only with that token (a
client that learnt a write id cannot abort or fill another job's write),
and a partition from another stage is refused: a writer reused for a second
Spark action fails that action loudly instead of having its rows dropped as
duplicates. A commit or an abort of a write nobody has written owns nothing.

What a writer can make the sink hold is bounded (:class:`SinkConfig`): the
bytes staged, per writer (owner token) and per sink, in memory and spooled
to disk alike; stages a driver never commits nor aborts expire; the records
of closed partitions and writes are forgotten after a horizon or beyond a
count, which is how long retries stay exactly-once.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import io
import logging
import struct
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
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
from .errors import StagingLimitError

__all__ = ["STAGE_COST", "JsonLinesSink", "MemorySink", "Sink", "SinkConfig", "Stage"]

log = logging.getLogger("sansrs.adapters.spark")

Key = tuple[str, str, int]
Job = tuple[str, str]
_LENGTH = struct.Struct(">I")
#: Bytes every stage is charged on top of its rows, for what holding it
#: costs (its objects and records): empty partitions are not free either.
STAGE_COST = 1024


def _digest(owner: str) -> bytes:
    return hashlib.sha256(owner.encode("utf-8")).digest()


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkConfig:
    """Limits of a :class:`Sink` (bytes, seconds, counts).

    ``prefetch``: payloads a writer may have in flight per channel (RSocket
    REQUEST_N; 8). ``spool_bytes``: a stage's rows kept in memory before it
    spools to a temporary file (4 MiB). ``max_memory``: bytes all stages
    together keep in memory (64 MiB); beyond it, the stage that grows
    spools. ``max_staged``: bytes staged in the sink, in memory and spooled,
    open attempts and partitions held for a job commit alike, each stage
    charged :data:`STAGE_COST` more (1 GiB). ``max_writer_staged``: the same
    for the writes of one owner token, i.e. one writer (512 MiB). A batch or
    a new attempt beyond either is refused (:class:`StagingLimitError`): the
    writing task fails with the message. ``stage_expiry``: a write whose
    partitions wait for a job commit and that has seen no partition, commit
    nor abort for this many seconds has them dropped, and later partitions
    and its commit are refused (1 hour). ``expiry_interval``: how often a
    served sink (:func:`~.service.serve`) runs its expiry when it has no
    traffic (60 s; every write, commit and abort runs it too).
    ``record_horizon``: the records of closed partitions and of writes with
    nothing staged are forgotten after this many seconds without activity
    of their write (24 hours), or, oldest write first, when more than
    ``max_records`` are held (100,000; a write and each of its closed
    partitions count one).
    Retries of a partition are recognised (``duplicate``) and job commits
    are idempotent only while their write is remembered."""

    prefetch: int = 8
    spool_bytes: int = 4 << 20
    max_memory: int = 64 << 20
    max_staged: int = 1 << 30
    max_writer_staged: int = 512 << 20
    stage_expiry: float = 3600.0
    expiry_interval: float = 60.0
    record_horizon: float = 86400.0
    max_records: int = 100_000

    def __post_init__(self) -> None:
        for name in ("prefetch", "max_records"):
            if getattr(self, name) <= 0:
                raise ValueError(f"SinkConfig.{name} must be positive")
        for name in ("spool_bytes", "max_memory", "max_staged", "max_writer_staged"):
            if getattr(self, name) < 0:
                raise ValueError(f"SinkConfig.{name} must not be negative")
        for name in ("stage_expiry", "expiry_interval", "record_horizon"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SinkConfig.{name} must be positive")


class Stage:
    """One attempt of one partition, staged in memory up to ``spool_bytes``,
    then in a temporary file. JSON-lines payloads are stored as they came
    (whole lines); Arrow payloads each with a 4-byte length before it.
    ``size``: the bytes it holds; ``spooled``: whether they are on disk."""

    def __init__(self, header: WriteHeader, spool_bytes: int) -> None:
        self.header = header
        self.arrow = header.encoding == "arrow"
        self.rows = 0
        self.bytes = 0
        self.size = 0
        self.spool_bytes = spool_bytes
        self.spooled = False
        self.discarded = False
        self._memory: io.BytesIO | None = io.BytesIO()
        self._file: IO[bytes] = self._memory
        # The sink's accounting: what it charged for the stage, to whom, and
        # whether it counts the stage's bytes on disk (set before the copy).
        self._charged = 0
        self._owner = b""
        self._on_disk = False

    def stored_size(self, data: bytes) -> int:
        """The bytes writing ``data`` adds to the stage."""
        return len(data) + (_LENGTH.size if self.arrow else 0)

    def rollover(self) -> None:
        """Move the staged bytes to a temporary file (no-op if there)."""
        memory = self._memory
        if memory is None or self.discarded:
            return
        # closed by discard(), which every path through the sink reaches
        spool: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        spool.write(memory.getbuffer())
        self._file, self._memory = spool, None
        self.spooled = True
        memory.close()

    def write(self, data: bytes, rows: int | None = None) -> None:
        """Stage one payload of ``rows`` rows (counted here for JSON lines)."""
        if self.arrow and rows is None:
            raise ValueError("an Arrow payload needs its row count")
        if self.size + self.stored_size(data) > self.spool_bytes:
            self.rollover()
        self._file.seek(0, io.SEEK_END)
        if self.arrow:
            self._file.write(_LENGTH.pack(len(data)))
        self._file.write(data)
        self.rows += count_rows(data) if rows is None else rows
        self.bytes += len(data)
        self.size += self.stored_size(data)

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
        self.discarded = True
        self._file.close()


@dataclass(slots=True)
class _Write:
    """What the sink knows of one write: its owner token's digest, its Spark
    stage (-1 until a partition from inside Spark arrives), when it was last
    active, its stages being written (``open``) and held for the job commit
    (``pending``), the attempt number each closed partition closed with."""

    owner: bytes
    stage: int
    last: float
    open: int = 0
    pending: dict[int, Stage] = field(default_factory=dict)
    closed: dict[int, int] = field(default_factory=dict)
    committed: bool = False
    expired_after: float | None = None  # its pending stages expired after so many s


class Sink:
    """Keeps one attempt per partition and publishes it; thread-safe (every
    write channel runs on its own worker thread). Attempts staged for a job
    commit stay (spooled beyond ``spool_bytes``) until the driver commits or
    aborts that write, or until they expire. Limits: ``config`` (a
    :class:`SinkConfig`), or its fields as keywords (``spool_bytes=...``).
    ``clock``: seconds, for expiry and the records' horizon.

    Subclass and override :meth:`publish` (where rows go), and optionally
    :meth:`check_header` / :meth:`check_batch`: an exception from any of them
    fails the writing Spark task with its message (ERROR APPLICATION_ERROR).
    """

    def __init__(
        self,
        config: SinkConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        **limits: Any,
    ) -> None:
        self.config = replace(config or SinkConfig(), **limits)
        self._clock = clock
        self._lock = threading.Lock()
        # Oldest activity first: expiry and forgetting take from the front.
        self._writes: OrderedDict[Job, _Write] = OrderedDict()
        self._records = 0  # writes + closed partitions remembered
        self._owner_staged: dict[bytes, int] = {}
        self.staged_bytes = 0  # charged to stages: their bytes + STAGE_COST each
        self.memory_bytes = 0  # stage bytes held in memory
        self.spooled_stages = 0  # stages whose bytes are in a temporary file
        self.stages = 0  # stages held (open or pending)
        self.rows_received = 0  # every row that arrived, duplicates included
        self.rows_published = 0
        self.partitions_published = 0
        self.duplicates = 0
        self.aborted = 0
        self.expired = 0  # stages dropped by expiry

    @property
    def prefetch(self) -> int:
        """Payloads a writer may have in flight per channel (RSocket REQUEST_N)."""
        return self.config.prefetch

    @property
    def records(self) -> int:
        """Writes and closed partitions remembered (bounded by ``max_records``)."""
        return self._records

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
        stage = Stage(header, self.config.spool_bytes)
        stage._owner = _digest(header.owner)
        with self._lock:
            now = self._clock()
            self._sweep(now)
            write = self._claim(header, stage._owner, now)
            self._charge(stage, STAGE_COST)  # raises before anything is held
            write.open += 1
            self.stages += 1
        return stage

    def _claim(self, header: WriteHeader, digest: bytes, now: float) -> _Write:
        """Under the lock: the first partition of a write binds it to its
        owner and stage; the next ones must match (see the module notes)."""
        job = (header.app, header.write)
        write = self._writes.get(job)
        if write is None:
            write = self._remember(job, _Write(digest, header.stage, now))
        else:
            if not hmac.compare_digest(write.owner, digest):
                raise PermissionError(
                    f"write {header.write!r} of app {header.app!r} belongs to another writer"
                )
            if write.expired_after is not None:
                raise ValueError(_expired_message(header.write, write.expired_after))
            if write.stage < 0:
                write.stage = header.stage
            elif 0 <= header.stage != write.stage:
                raise ValueError(
                    f"write {header.write!r} belongs to Spark stage {write.stage}, not "
                    f"{header.stage}: a writer serves one action (make a new one per action)"
                )
            self._check_reuse(header, write)
            self._touch(job, write, now)
        return write

    @staticmethod
    def _check_reuse(header: WriteHeader, write: _Write) -> None:
        """Outside Spark (stage -1) nothing retries by itself: a partition
        that arrives again without a higher attempt number is a writer reused
        for new rows, which must not be dropped as a retry's: refused."""
        if header.stage >= 0:
            return
        closed = write.closed.get(header.partition)
        if closed is not None and header.attempt <= closed:
            raise ValueError(
                f"partition {header.partition} of write {header.write!r} was written "
                f"already (attempt {closed}): outside Spark a writer writes each partition "
                "once (pass partition=, or make a new writer; a retry passes a higher attempt)"
            )
        if closed is None and write.committed and header.commit == "job":
            raise ValueError(
                f"write {header.write!r} was committed already: make a new writer"
            )

    def _check_owner(self, request: JobRequest) -> _Write | None:
        """Under the lock: the write, or None if nothing was written yet;
        raises if ``request`` is not from the write's owner."""
        write = self._writes.get((request.app, request.write))
        if write is None:
            return None
        if not hmac.compare_digest(write.owner, _digest(request.owner)):
            raise PermissionError(
                f"write {request.write!r} of app {request.app!r} belongs to another writer: "
                f"only its owner may {request.op} it"
            )
        return write

    def receive(self, stage: Stage, data: bytes) -> None:
        if stage.arrow:
            rows = count_rows_arrow(data)  # WireError if it is not Arrow IPC
        elif data and not data.endswith(b"\n"):
            # Whole JSON lines only: a cut line would merge with the next.
            raise WireError("a row batch must end with a newline")
        else:
            rows = count_rows(data)
        self.check_batch(stage.header, data)
        header = stage.header
        with self._lock:
            now = self._clock()
            write = self._writes.get((header.app, header.write))
            if write is not None:  # always, while the stage is open
                self._touch((header.app, header.write), write, now)
            n = stage.stored_size(data)
            self._charge(stage, n)
            spool = self._hold(stage, n)
            self.rows_received += rows
        # The stage is written by its channel's thread only: no lock for I/O.
        if spool:
            stage.rollover()
        stage.write(data, rows)

    def _charge(self, stage: Stage, n: int) -> None:
        """Under the lock: count ``n`` more bytes for ``stage``, refused
        beyond the writer's or the sink's budget."""
        config = self.config
        held = self._owner_staged.get(stage._owner, 0)
        where = f"write {stage.header.write!r} partition {stage.header.partition}"
        if held + n > config.max_writer_staged:
            raise StagingLimitError(
                f"{where}: its writer has {held} bytes staged at the sink and {n} more "
                f"would pass SinkConfig.max_writer_staged ({config.max_writer_staged}): "
                "commit or abort its earlier writes, or raise the limit"
            )
        if self.staged_bytes + n > config.max_staged:
            raise StagingLimitError(
                f"{where}: the sink has {self.staged_bytes} bytes staged and {n} more "
                f"would pass SinkConfig.max_staged ({config.max_staged}): retry once "
                "other writes commit, or raise the limit"
            )
        self._owner_staged[stage._owner] = held + n
        self.staged_bytes += n
        stage._charged += n

    def _hold(self, stage: Stage, n: int) -> bool:
        """Under the lock: ``n`` more bytes of ``stage`` are held; True if the
        stage must spool now (its own ``spool_bytes`` or the sink's
        ``max_memory`` passed)."""
        if stage._on_disk:
            return False
        if stage.size + n <= stage.spool_bytes and self.memory_bytes + n <= self.config.max_memory:
            self.memory_bytes += n
            return False
        self.memory_bytes -= stage.size
        self.spooled_stages += 1
        stage._on_disk = True
        return True

    def _release(self, stage: Stage) -> None:
        """Under the lock: ``stage`` holds nothing more; its bytes are free."""
        if stage.discarded:
            return
        held = self._owner_staged.get(stage._owner, 0) - stage._charged
        if held > 0:
            self._owner_staged[stage._owner] = held
        else:
            self._owner_staged.pop(stage._owner, None)
        self.staged_bytes -= stage._charged
        stage._charged = 0
        if stage._on_disk:
            self.spooled_stages -= 1
        else:
            self.memory_bytes -= stage.size
        self.stages -= 1
        stage.discard()

    def finish(self, stage: Stage) -> Ack:
        """The writer sent everything: publish (or hold for the job commit)
        unless another attempt of the partition was closed first. If this
        raises, the stage is still open: the caller aborts it."""
        header = stage.header
        job = (header.app, header.write)
        with self._lock:
            now = self._clock()
            write = self._writes[job]  # remembered while a stage of it is open
            self._check_reuse(header, write)  # a concurrent first attempt closed
            duplicate = header.partition in write.closed or (
                header.commit == "job" and write.committed
            )
            if not duplicate and header.commit == "partition":
                self._publish(stage)
            write.open -= 1
            if duplicate:
                self.duplicates += 1
            else:
                write.closed[header.partition] = header.attempt
                self._records += 1
            if duplicate or header.commit == "partition":
                self._release(stage)
            else:
                write.pending[header.partition] = stage
            self._touch(job, write, now)
            self._sweep(now)
        return Ack(
            partition=header.partition,
            attempt=header.attempt,
            rows=stage.rows,
            nbytes=stage.bytes,
            duplicate=duplicate,
        )

    def abort(self, stage: Stage) -> None:
        header = stage.header
        with self._lock:
            write = self._writes.get((header.app, header.write))
            if write is not None:
                write.open -= 1
            self.aborted += 1
            self._release(stage)

    def _publish(self, stage: Stage) -> None:
        self.publish(stage.header, stage)
        self.rows_published += stage.rows
        self.partitions_published += 1

    def job(self, request: JobRequest) -> dict[str, Any]:
        """Job commit: publish the listed partitions of the write; abort: drop
        what is pending. Commit is idempotent (the driver may retry it). A
        commit or abort of a write nobody has written owns nothing."""
        job = (request.app, request.write)
        with self._lock:
            now = self._clock()
            self._sweep(now)
            write = self._check_owner(request)
            if request.op == "abort":
                if write is None:
                    return {"aborted": 0}
                pending, write.pending = write.pending, {}
                for partition, stage in pending.items():
                    self._release(stage)
                    del write.closed[partition]
                    self._records -= 1
                self._touch(job, write, now)
                return {"aborted": len(pending)}
            if write is None:
                if request.partitions:
                    raise ValueError(
                        f"job commit of write {request.write}: partitions "
                        f"{sorted(request.partitions)} were not received"
                    )
                return {"committed": 0, "partitions": 0}
            if write.expired_after is not None:
                raise ValueError(_expired_message(request.write, write.expired_after))
            if write.committed:
                return {"committed": 0, "again": True}
            missing = sorted(set(request.partitions) - set(write.pending))
            if missing:
                raise ValueError(
                    f"job commit of write {request.write}: partitions {missing} were not received"
                )
            rows = 0
            try:
                for partition in sorted(request.partitions):
                    stage = write.pending[partition]
                    self._publish(stage)
                    rows += stage.rows
            finally:
                pending, write.pending = write.pending, {}
                write.committed = True
                for stage in pending.values():
                    self._release(stage)
                self._touch(job, write, now)
            return {"committed": rows, "partitions": len(request.partitions)}

    # -- bounded bookkeeping -------------------------------------------------
    def expire(self, now: float | None = None) -> None:
        """Drop what is due (stages past ``stage_expiry``, records past
        ``record_horizon`` or ``max_records``). Every write, commit and abort
        does it; call it yourself to free an idle sink's stages on time."""
        with self._lock:
            self._sweep(self._clock() if now is None else now)

    def _remember(self, job: Job, write: _Write) -> _Write:
        self._writes[job] = write
        self._records += 1
        return write

    def _forget(self, job: Job, write: _Write) -> None:
        del self._writes[job]
        self._records -= 1 + len(write.closed)

    def _touch(self, job: Job, write: _Write, now: float) -> None:
        write.last = now
        self._writes.move_to_end(job)

    def _sweep(self, now: float) -> None:
        """Under the lock: expire and forget from the least recently active
        write on. A write being written (an open stage: its channel is alive,
        bounded by the connection's own timeouts) is active: it moves to the
        back. The rest are in order of activity, so the sweep stops at the
        first write with nothing due."""
        config = self.config
        writes = self._writes
        for _ in range(len(writes)):
            job, write = next(iter(writes.items()))
            if write.open:
                writes.move_to_end(job)
                write.last = now
                continue
            idle = now - write.last
            if write.pending and idle >= config.stage_expiry:
                self._expire(job, write, idle)
            if write.pending:
                if self._records > config.max_records:
                    writes.move_to_end(job)  # cannot forget held rows: look further
                    continue
                break
            if idle >= config.record_horizon or self._records > config.max_records:
                self._forget(job, write)
                continue
            break

    def _expire(self, job: Job, write: _Write, idle: float) -> None:
        pending, write.pending = write.pending, {}
        held = sum(stage._charged for stage in pending.values())
        for partition, stage in pending.items():
            self._release(stage)
            del write.closed[partition]
            self._records -= 1
        write.expired_after = idle
        self.expired += len(pending)
        log.warning(
            "write %r of app %r: %d staged partitions (%d bytes) dropped, no commit or "
            "abort for %.0f s (SinkConfig.stage_expiry)",
            job[1], job[0], len(pending), held, idle,
        )


def _expired_message(write: str, after: float) -> str:
    return (
        f"write {write!r} expired: its staged partitions were dropped after {after:.0f} s "
        "without commit or abort (SinkConfig.stage_expiry); write it again as a new write"
    )


class MemorySink(Sink):
    """Publishes decoded rows into :attr:`partitions` (``key -> rows``): for
    tests and small results."""

    def __init__(self, config: SinkConfig | None = None, **options: Any) -> None:
        super().__init__(config, **options)
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

    def __init__(self, path: str | Path, config: SinkConfig | None = None, **options: Any) -> None:
        super().__init__(config, **options)
        self.path = Path(path)
        self._out: IO[bytes] = self.path.open("wb")

    def publish(self, header: WriteHeader, stage: Stage) -> None:
        for chunk in stage.chunks():
            self._out.write(chunk)
        self._out.flush()

    def close_file(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._out.close()
