"""The wire formats sansrs's Spark pieces speak over RSocket, and the row codec.

No pyspark here: the services (sinks, sources) run in plain processes too.
Every format is written down in docs/spark.md; in short:

* rows travel as JSON lines: each payload carries whole lines, each line one
  row, each line ends with ``\\n``. A Spark ``Row`` (or a dict) is a JSON
  object keyed by column name; a tuple or list is a JSON array; anything else
  is the JSON value itself. A writer may choose ``arrow`` instead (one Arrow
  IPC stream per payload, :mod:`._arrow`); the header says which.
* a write is a REQUEST_CHANNEL whose first payload has empty data and a JSON
  *header* as metadata (:class:`WriteHeader`); the following payloads are row
  batches; the requester's COMPLETE means "that was everything". The sink
  answers with one JSON *ack* payload, then COMPLETE.
* a read is a REQUEST_STREAM whose data is a JSON *read request*
  (:class:`ReadRequest`); the answer is a stream of row batches.
* job-level commit / abort is a REQUEST_RESPONSE whose data is a JSON object
  with ``"op": "commit" | "abort"``; ``"op": "latest"`` asks a replayable
  source for its latest offset.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "ENCODING",
    "WIRE_VERSION",
    "Ack",
    "JobRequest",
    "OffsetQuery",
    "ReadRequest",
    "WireError",
    "WriteHeader",
    "count_rows",
    "decode_rows",
    "encode_rows",
]

WIRE_VERSION = 1
ENCODING = "jsonl"
#: Row encodings of write payloads: JSON lines (default), Arrow IPC streams.
ENCODINGS = ("jsonl", "arrow")
#: Commit modes: a partition is published when its channel completes
#: (``partition``), or held until the driver commits the job (``job``).
COMMIT_MODES = ("partition", "job")


class WireError(ValueError):
    """A header, request or ack that does not follow the formats above."""


def _json_default(value: object) -> object:
    # Values Spark rows commonly hold that JSON has no type for.
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    as_dict = getattr(value, "asDict", None)  # a nested Spark Row
    if callable(as_dict):
        return as_dict()
    raise TypeError(f"cannot encode a {type(value).__name__} as JSON")


_encode = json.JSONEncoder(separators=(",", ":"), default=_json_default).encode


def _make_chunk_encoder() -> Any:
    """``obj -> list of JSON str chunks`` for dicts and lists. CPython's C
    encoder called directly costs a third less per row than
    ``JSONEncoder.encode``, which builds a new one on every call; the output
    is the same."""
    from json import encoder as std

    c_make = getattr(std, "c_make_encoder", None)
    if c_make is None:  # pragma: no cover - other interpreters
        return lambda obj, _level: [_encode(obj)]
    return c_make(
        None, _json_default, std.encode_basestring_ascii, None, ":", ",", False, False, True
    )


_encode_chunks = _make_chunk_encoder()
_decode = json.JSONDecoder().decode


def encode_rows(
    rows: Iterable[Any], rows_per_payload: int, bytes_per_payload: int
) -> Iterator[bytes]:
    """Row batches as JSON-lines payloads of at most ``rows_per_payload`` rows
    and ``bytes_per_payload`` bytes (a single row larger than that travels
    alone). Lazy: pulls rows only as batches are taken."""
    if rows_per_payload <= 0 or bytes_per_payload <= 0:
        raise ValueError("rows_per_payload and bytes_per_payload must be positive")
    it = iter(rows)
    first = next(it, _END)
    if first is _END:
        return
    fields = getattr(first, "__fields__", None)  # a Spark Row with column names
    batch: list[str] = []
    size = 0
    lines: Iterator[str]
    if fields is not None:
        # All rows of one DataFrame partition share the schema.
        names = tuple(fields)
        chunks, join = _encode_chunks, "".join
        lines = (
            join(chunks(dict(zip(names, row, strict=True)), 0)) for row in _chain1(first, it)
        )
    elif isinstance(first, dict):
        chunks, join = _encode_chunks, "".join
        lines = (
            join(chunks(row, 0)) if type(row) is dict else _encode(row)
            for row in _chain1(first, it)
        )
    else:
        lines = map(_encode, _chain1(first, it))
    append = batch.append
    for line in lines:
        n = len(line) + 1  # ensure_ascii: characters are bytes
        if batch and size + n > bytes_per_payload:
            append("")
            yield "\n".join(batch).encode()
            batch.clear()
            size = 0
        append(line)
        size += n
        if len(batch) >= rows_per_payload:
            append("")
            yield "\n".join(batch).encode()
            batch.clear()
            size = 0
    if batch:
        batch.append("")
        yield "\n".join(batch).encode()


_END: Any = object()


def _chain1(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def count_rows(data: bytes) -> int:
    """Rows in one JSON-lines payload (every line ends with ``\\n``)."""
    return data.count(b"\n")


def decode_rows(data: bytes) -> list[Any]:
    """The rows of one JSON-lines payload, decoded in one call: JSON strings
    never hold a raw newline, so the lines can be joined into one array."""
    text = data.decode()
    if not text:
        return []
    if not text.endswith("\n"):
        raise WireError("a row batch must end with a newline")
    try:
        rows = _decode("[" + text[:-1].replace("\n", ",") + "]")
    except json.JSONDecodeError as exc:
        raise WireError(f"malformed row batch: {exc}") from None
    assert isinstance(rows, list)
    return rows


def _dump_object(message: Any) -> bytes:
    """A wire dataclass as compact JSON (what :func:`_load_object` reads)."""
    return json.dumps(asdict(message), separators=(",", ":")).encode()


def _load_object(data: bytes | None, what: str) -> dict[str, Any]:
    if not data:
        raise WireError(f"missing {what}")
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"malformed {what}: {exc}") from None
    if not isinstance(value, dict):
        raise WireError(f"{what} must be a JSON object")
    return value


def _field(obj: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise WireError(f"{what}: field {name!r} missing or of the wrong type")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteHeader:
    """Metadata of a write channel's first payload: who writes what.

    ``(app, write, partition)`` names a partition of one write; retried
    attempts of a partition share it, so the sink keeps one of them.
    ``owner``: the write's private token (the sink takes later partitions,
    the commit and the abort of the write only with the first one's)."""

    route: str
    app: str
    write: str
    partition: int
    attempt: int = 0
    stage: int = -1
    task: int = -1
    commit: str = "partition"
    encoding: str = ENCODING
    owner: str = field(default="", repr=False)
    v: int = WIRE_VERSION

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.app, self.write, self.partition)

    def to_bytes(self) -> bytes:
        return _dump_object(self)

    @classmethod
    def from_bytes(cls, data: bytes | None) -> WriteHeader:
        obj = _load_object(data, "write header")
        what = "write header"
        header = cls(
            route=_field(obj, "route", str, what),
            app=_field(obj, "app", str, what),
            write=_field(obj, "write", str, what),
            partition=_field(obj, "partition", int, what),
            attempt=obj.get("attempt", 0),
            stage=obj.get("stage", -1),
            task=obj.get("task", -1),
            commit=obj.get("commit", "partition"),
            encoding=obj.get("encoding", ENCODING),
            owner=obj.get("owner", ""),
            v=obj.get("v", WIRE_VERSION),
        )
        if not isinstance(header.owner, str):
            raise WireError("write header: owner must be a string")
        if header.v != WIRE_VERSION:
            raise WireError(f"unsupported wire version {header.v!r}")
        if header.encoding not in ENCODINGS:
            raise WireError(f"unsupported encoding {header.encoding!r}")
        if header.commit not in COMMIT_MODES:
            raise WireError(f"unknown commit mode {header.commit!r}")
        if not all(isinstance(x, int) for x in (header.attempt, header.stage, header.task)):
            raise WireError("write header: attempt, stage and task must be integers")
        if header.partition < 0:
            raise WireError("write header: partition must not be negative")
        return header


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """The sink's answer to a write channel: the partition is safely received.
    ``duplicate``: another attempt of it was kept already; these rows were dropped."""

    partition: int
    attempt: int
    rows: int
    nbytes: int
    duplicate: bool = False

    def to_bytes(self) -> bytes:
        return _dump_object(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> Ack:
        obj = _load_object(data, "ack")
        return cls(
            partition=_field(obj, "partition", int, "ack"),
            attempt=_field(obj, "attempt", int, "ack"),
            rows=_field(obj, "rows", int, "ack"),
            nbytes=_field(obj, "nbytes", int, "ack"),
            duplicate=bool(obj.get("duplicate", False)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadRequest:
    """Data of a read's REQUEST_STREAM: partition ``partition`` of ``partitions``
    of the stream ``route``; ``options`` are passed to the source as they are."""

    route: str
    partition: int = 0
    partitions: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    v: int = WIRE_VERSION

    def to_bytes(self) -> bytes:
        return _dump_object(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> ReadRequest:
        obj = _load_object(data, "read request")
        what = "read request"
        options = obj.get("options", {})
        if not isinstance(options, dict):
            raise WireError("read request: options must be a JSON object")
        request = cls(
            route=_field(obj, "route", str, what),
            partition=_field(obj, "partition", int, what),
            partitions=_field(obj, "partitions", int, what),
            options=options,
            v=obj.get("v", WIRE_VERSION),
        )
        if request.v != WIRE_VERSION:
            raise WireError(f"unsupported wire version {request.v!r}")
        if not 0 <= request.partition < request.partitions:
            raise WireError(
                f"read request: partition {request.partition} not in 0..{request.partitions - 1}"
            )
        return request


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """Job-level commit or abort of a write (commit mode ``job``): publish the
    listed partitions of ``(app, write)``, or drop everything staged for it.
    ``owner``: the write's token (see :class:`WriteHeader`)."""

    op: str
    route: str
    app: str
    write: str
    partitions: tuple[int, ...] = ()
    owner: str = field(default="", repr=False)
    v: int = WIRE_VERSION

    def to_bytes(self) -> bytes:
        obj = asdict(self)
        obj["partitions"] = list(self.partitions)
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> JobRequest:
        obj = _load_object(data, "job request")
        what = "job request"
        op = _field(obj, "op", str, what)
        if op not in ("commit", "abort"):
            raise WireError(f"job request: unknown op {op!r}")
        parts = obj.get("partitions", [])
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in parts
        ):
            raise WireError("job request: partitions must be a list of integers")
        owner = obj.get("owner", "")
        if not isinstance(owner, str):
            raise WireError("job request: owner must be a string")
        return cls(
            op=op,
            route=_field(obj, "route", str, what),
            app=_field(obj, "app", str, what),
            write=_field(obj, "write", str, what),
            partitions=tuple(parts),
            owner=owner,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetQuery:
    """REQUEST_RESPONSE asking a replayable source for its latest offset
    (records so far); the answer is JSON ``{"offset": n}``."""

    route: str
    op: str = "latest"
    v: int = WIRE_VERSION

    def to_bytes(self) -> bytes:
        return _dump_object(self)

    @classmethod
    def from_bytes(cls, data: bytes) -> OffsetQuery:
        obj = _load_object(data, "offset query")
        if obj.get("op") != "latest":
            raise WireError("not an offset query")
        return cls(route=_field(obj, "route", str, "offset query"))
