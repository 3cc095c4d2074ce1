"""The byte-trace file format (version 1): records, writer and reader.

A trace holds one captured connection: a header with free-form JSON metadata,
then one record per chunk of bytes exactly as a side read it (chunk
boundaries preserved), one end-of-connection record per direction, and a
final end-of-trace record. docs/trace.md is the normative description; the
layout in short (all integers big-endian):

    header   magic "\\x89SRT\\r\\n\\x1a\\n" (8)  version u16  flags u16 (0)
             metadata_length u32  metadata (UTF-8 JSON object)  crc32 u32
    record   kind u8  direction u8  timestamp f64  length u32  body  crc32 u32

The core never reads a clock: timestamps (seconds since the capture started)
come from the caller. Reading takes any binary file object; nothing here
opens sockets.
"""

from __future__ import annotations

import io
import json
import math
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from struct import Struct
from typing import IO, Any

from .._errors import LocalProtocolError, RemoteProtocolError

MAGIC = b"\x89SRT\r\n\x1a\n"
FORMAT_VERSION = 1
#: Format limit on one record's body (a chunk); readers may set a lower one.
MAX_RECORD_SIZE = 1 << 24
#: Format limit on the metadata JSON.
MAX_METADATA_SIZE = 1 << 16

_HEADER = Struct(">8sHHI")  # magic, version, flags, metadata length
_RECORD = Struct(">BBdI")  # kind, direction, timestamp, body length
_CRC = Struct(">I")
_COUNT = Struct(">Q")

_KIND_DATA = 1
_KIND_END = 2
_KIND_TRACE_END = 3

#: Error code carried by ``TraceFormatError`` (it is not a wire protocol error;
#: 0 is the "no protocol code" value of ``ProtocolError``).
TRACE_ERROR_CODE = 0


class TraceFormatError(RemoteProtocolError):
    """The trace file is corrupt, truncated or of an unknown version.

    A ``RemoteProtocolError``: the bytes came from outside, and fuzzing's rule
    ("nothing but RemoteProtocolError escapes a decoder") covers the reader.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, TRACE_ERROR_CODE)


class Direction(IntEnum):
    """Which way a chunk travelled."""

    CLIENT_TO_SERVER = 0
    SERVER_TO_CLIENT = 1

    @property
    def arrow(self) -> str:
        return "C->S" if self is Direction.CLIENT_TO_SERVER else "S->C"


class EndReason(IntEnum):
    """Why a direction ended (body byte of an end record)."""

    EOF = 0  # the sender closed its side cleanly (recv returned b"")
    ERROR = 1  # reset or other socket error
    ABORTED = 2  # the capturing tool stopped (shutdown, timeout)


# Declarations alike in shape by design (the duplicates scan lists them, with
# the cores' events): one frozen, slotted, keyword-only dataclass per record.


@dataclass(frozen=True, slots=True, kw_only=True)
class DataRecord:
    """One chunk, exactly as read from the sender's side of the connection."""

    direction: Direction
    timestamp: float
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class EndRecord:
    """No more bytes in ``direction``."""

    direction: Direction
    timestamp: float
    reason: EndReason = EndReason.EOF


Record = DataRecord | EndRecord


def _check_timestamp(timestamp: float, last: float) -> str | None:
    if not math.isfinite(timestamp) or timestamp < 0.0:
        return f"timestamp {timestamp!r} is not a finite number >= 0"
    if timestamp < last:
        return f"timestamp {timestamp!r} goes backwards (previous {last!r})"
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} out of range")
    return value


class TraceWriter:
    """Writes a trace to a binary file object.

    The header goes out at construction; ``close()`` writes the end-of-trace
    record (a reader rejects a file without it as truncated) and, when the
    writer opened the file from a path, closes it. Misuse (timestamps going
    backwards, data after a direction's end, oversized chunks) raises
    ``LocalProtocolError``.
    """

    def __init__(
        self,
        file: IO[bytes] | str | Path,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        try:
            meta = json.dumps(
                dict(metadata or {}),
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            ).encode()
        except (TypeError, ValueError) as exc:
            raise LocalProtocolError(f"metadata is not JSON-serialisable: {exc}") from None
        if len(meta) > MAX_METADATA_SIZE:
            raise LocalProtocolError(f"metadata of {len(meta)} bytes exceeds {MAX_METADATA_SIZE}")
        self._owns = isinstance(file, str | Path)
        if isinstance(file, str | Path):
            self._file: IO[bytes] = open(file, "wb")  # noqa: SIM115
        else:
            self._file = file
        header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(meta)) + meta
        self._file.write(header + _CRC.pack(zlib.crc32(header)))
        self._last = 0.0
        self._count = 0
        self._ended: set[Direction] = set()
        self._closed = False

    @property
    def ended(self) -> frozenset[Direction]:
        return frozenset(self._ended)

    def _record(self, kind: int, direction: Direction, timestamp: float, body: bytes) -> None:
        if self._closed:
            raise LocalProtocolError("trace writer is closed")
        problem = _check_timestamp(timestamp, self._last)
        if problem:
            raise LocalProtocolError(problem)
        head = _RECORD.pack(kind, direction, timestamp, len(body))
        crc = zlib.crc32(body, zlib.crc32(head))
        self._file.write(b"".join((head, body, _CRC.pack(crc))))
        self._last = timestamp
        self._count += 1

    def write_data(self, direction: Direction, timestamp: float, data: bytes) -> None:
        """Record one chunk (non-empty, at most ``MAX_RECORD_SIZE`` bytes)."""
        direction = Direction(direction)
        if direction in self._ended:
            raise LocalProtocolError(f"{direction.arrow} already ended")
        if not data:
            raise LocalProtocolError("a chunk must not be empty (use write_end)")
        if len(data) > MAX_RECORD_SIZE:
            raise LocalProtocolError(f"chunk of {len(data)} bytes exceeds {MAX_RECORD_SIZE}")
        self._record(_KIND_DATA, direction, timestamp, bytes(data))

    def write_end(
        self, direction: Direction, timestamp: float, reason: EndReason = EndReason.EOF
    ) -> None:
        """Record the end of ``direction`` (once per direction)."""
        direction = Direction(direction)
        if direction in self._ended:
            raise LocalProtocolError(f"{direction.arrow} already ended")
        self._record(_KIND_END, direction, timestamp, bytes((EndReason(reason),)))
        self._ended.add(direction)

    def close(self) -> None:
        """Write the end-of-trace record; idempotent."""
        if self._closed:
            return
        end = _COUNT.pack(self._count)
        self._record(_KIND_TRACE_END, Direction.CLIENT_TO_SERVER, self._last, end)
        self._closed = True
        self._file.flush()
        if self._owns:
            self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TraceReader:
    """Reads a trace from a binary file object, a path or bytes.

    ``metadata`` is parsed at construction; iterating yields the records in
    file order and raises ``TraceFormatError`` on the first problem (after
    yielding every valid record before it), including a file that ends
    without its end-of-trace record. ``max_record_size`` bounds the memory a
    record may take; ``verify_checksums=False`` skips the CRC checks (for
    salvaging a damaged file, and for fuzzing the parser behind them).
    """

    def __init__(
        self,
        source: IO[bytes] | bytes | str | Path,
        *,
        max_record_size: int = MAX_RECORD_SIZE,
        verify_checksums: bool = True,
    ) -> None:
        if not 1 <= max_record_size <= MAX_RECORD_SIZE:
            raise ValueError(f"max_record_size must be in 1..{MAX_RECORD_SIZE}")
        self.max_record_size = max_record_size
        self.verify_checksums = verify_checksums
        self._owns = False
        if isinstance(source, bytes | bytearray | memoryview):
            self._file: IO[bytes] = io.BytesIO(bytes(source))
        elif isinstance(source, str | Path):
            self._file = open(source, "rb")  # noqa: SIM115
            self._owns = True
        else:
            self._file = source
        try:
            self.metadata: dict[str, Any] = self._read_header()
        except BaseException:
            self.close()
            raise
        self._iterated = False

    def _read(self, n: int, what: str) -> bytes:
        data = self._file.read(n)
        if len(data) != n:
            raise TraceFormatError(f"truncated trace: {what} needs {n} bytes, {len(data)} left")
        return data

    def _crc(self, expected_from: bytes, crc: int, what: str) -> None:
        if self.verify_checksums and zlib.crc32(expected_from) != crc:
            raise TraceFormatError(f"checksum mismatch in {what}")

    def _read_header(self) -> dict[str, Any]:
        head = self._file.read(_HEADER.size)
        if len(head) < len(MAGIC) or head[: len(MAGIC)] != MAGIC:
            raise TraceFormatError("not a sansrs trace (bad magic)")
        if len(head) != _HEADER.size:
            raise TraceFormatError("truncated trace header")
        _, version, flags, meta_len = _HEADER.unpack(head)
        if version != FORMAT_VERSION:
            raise TraceFormatError(f"unsupported trace version {version} (this reader: 1)")
        if flags != 0:
            raise TraceFormatError(f"unknown header flags {flags:#06x}")
        if meta_len > MAX_METADATA_SIZE:
            raise TraceFormatError(f"metadata length {meta_len} exceeds {MAX_METADATA_SIZE}")
        meta = self._read(meta_len, "metadata")
        (crc,) = _CRC.unpack(self._read(4, "header checksum"))
        self._crc(head + meta, crc, "the header")
        try:
            value = json.loads(
                meta.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float
            )
        except (ValueError, RecursionError) as exc:
            raise TraceFormatError(f"metadata is not UTF-8 JSON: {exc}") from None
        if not isinstance(value, dict):
            raise TraceFormatError("metadata is not a JSON object")
        return value

    def __iter__(self) -> Iterator[Record]:
        if self._iterated:
            raise LocalProtocolError("a TraceReader can be iterated once")
        self._iterated = True
        try:
            yield from self._records()
        finally:
            self.close()

    def _records(self) -> Iterator[Record]:
        last = 0.0
        count = 0
        ended: set[Direction] = set()
        while True:
            head = self._file.read(_RECORD.size)
            if not head:
                raise TraceFormatError("truncated trace: no end-of-trace record")
            if len(head) != _RECORD.size:
                raise TraceFormatError(f"truncated trace: partial record header at record {count}")
            kind, direction, timestamp, length = _RECORD.unpack(head)
            where = f"record {count}"
            if length > self.max_record_size:
                raise TraceFormatError(
                    f"{where}: length {length} exceeds the limit {self.max_record_size}"
                )
            body = self._read(length, f"{where} body")
            (crc,) = _CRC.unpack(self._read(4, f"{where} checksum"))
            self._crc(head + body, crc, where)
            if direction > 1:
                raise TraceFormatError(f"{where}: unknown direction {direction}")
            problem = _check_timestamp(timestamp, last)
            if problem:
                raise TraceFormatError(f"{where}: {problem}")
            last = timestamp
            d = Direction(direction)
            if kind == _KIND_DATA:
                if d in ended:
                    raise TraceFormatError(f"{where}: data after the end of {d.arrow}")
                if not length:
                    raise TraceFormatError(f"{where}: empty data record")
                yield DataRecord(direction=d, timestamp=timestamp, data=body)
            elif kind == _KIND_END:
                if d in ended:
                    raise TraceFormatError(f"{where}: second end of {d.arrow}")
                if length != 1 or body[0] > max(EndReason):
                    raise TraceFormatError(f"{where}: bad end-of-direction body {body!r}")
                ended.add(d)
                yield EndRecord(direction=d, timestamp=timestamp, reason=EndReason(body[0]))
            elif kind == _KIND_TRACE_END:
                if length != _COUNT.size or direction != 0:
                    raise TraceFormatError(f"{where}: bad end-of-trace record")
                (declared,) = _COUNT.unpack(body)
                if declared != count:
                    raise TraceFormatError(
                        f"{where}: end-of-trace declares {declared} records, read {count}"
                    )
                if self._file.read(1):
                    raise TraceFormatError("trailing bytes after the end-of-trace record")
                return
            else:
                raise TraceFormatError(f"{where}: unknown record kind {kind}")
            count += 1

    def close(self) -> None:
        if self._owns:
            self._file.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """A whole trace in memory."""

    metadata: dict[str, Any]
    records: tuple[Record, ...]

    def data(self, direction: Direction) -> bytes:
        """Every byte sent in ``direction``, chunks joined."""
        return b"".join(
            r.data for r in self.records if isinstance(r, DataRecord) and r.direction == direction
        )

    def chunks(self, direction: Direction) -> list[bytes]:
        return [
            r.data for r in self.records if isinstance(r, DataRecord) and r.direction == direction
        ]


def read_trace(
    source: IO[bytes] | bytes | str | Path, *, max_record_size: int = MAX_RECORD_SIZE
) -> Trace:
    """Read a whole trace (raises ``TraceFormatError`` on any problem)."""
    reader = TraceReader(source, max_record_size=max_record_size)
    return Trace(metadata=reader.metadata, records=tuple(reader))
