"""Zipkin tracing metadata (RSocket extension: Tracing (Zipkin)): a flags
byte, then, when the IDs-set flag is on, a 64- or 128-bit trace id, a 64-bit
span id and, with the P flag, a 64-bit parent span id.

Flags: I (0x80) ids set, D (0x40) debug, S (0x20) sampled, N (0x10) not
sampled, T (0x08) 128-bit trace id, P (0x04) parent span id present. The
sampling decision follows the precedence the spec gives: D wins over S
("S is ignored when D is set"), S over N.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .errors import MetadataDecodeError, MetadataEncodeError

__all__ = ["Sampling", "ZipkinTrace", "decode_zipkin", "encode_zipkin"]

EXTENSION = "tracing (zipkin)"
IDS_SET = 0x80
DEBUG = 0x40
SAMPLED = 0x20
NOT_SAMPLED = 0x10
TRACE_ID_128 = 0x08
HAS_PARENT = 0x04
_U64 = (1 << 64) - 1
_U128 = (1 << 128) - 1


class Sampling(Enum):
    """The sampling decision the flags carry."""

    UNDECIDED = "undecided"
    NOT_SAMPLED = "not-sampled"
    SAMPLED = "sampled"
    DEBUG = "debug"


@dataclass(frozen=True, slots=True, kw_only=True)
class ZipkinTrace:
    """One tracing entry. ``trace_id`` / ``span_id`` are None when the
    entry carries only the sampling decision (I flag clear)."""

    sampling: Sampling = Sampling.UNDECIDED
    trace_id: int | None = None
    span_id: int | None = None
    parent_span_id: int | None = None
    trace_id_128: bool = False

    @property
    def flags(self) -> int:
        flags = {
            Sampling.UNDECIDED: 0,
            Sampling.NOT_SAMPLED: NOT_SAMPLED,
            Sampling.SAMPLED: SAMPLED,
            Sampling.DEBUG: DEBUG,
        }[self.sampling]
        if self.trace_id is not None:
            flags |= IDS_SET
            if self.trace_id_128:
                flags |= TRACE_ID_128
            if self.parent_span_id is not None:
                flags |= HAS_PARENT
        return flags


def sampling_of(flags: int) -> Sampling:
    if flags & DEBUG:
        return Sampling.DEBUG
    if flags & SAMPLED:
        return Sampling.SAMPLED
    if flags & NOT_SAMPLED:
        return Sampling.NOT_SAMPLED
    return Sampling.UNDECIDED


def decode_zipkin(content: bytes | memoryview) -> ZipkinTrace:
    raw = bytes(content)
    if not raw:
        raise MetadataDecodeError(EXTENSION, "truncated: no flags byte")
    flags = raw[0]
    sampling = sampling_of(flags)
    if not flags & IDS_SET:
        if len(raw) != 1:
            raise MetadataDecodeError(EXTENSION, f"{len(raw) - 1} bytes after flags without ids")
        return ZipkinTrace(sampling=sampling)
    wide = bool(flags & TRACE_ID_128)
    parent = bool(flags & HAS_PARENT)
    need = 1 + (16 if wide else 8) + 8 + (8 if parent else 0)
    if len(raw) != need:
        what = "truncated" if len(raw) < need else "too long"
        raise MetadataDecodeError(EXTENSION, f"{what}: {len(raw)} bytes, the flags say {need}")
    end_trace = 17 if wide else 9
    return ZipkinTrace(
        sampling=sampling,
        trace_id=int.from_bytes(raw[1:end_trace], "big"),
        span_id=int.from_bytes(raw[end_trace : end_trace + 8], "big"),
        parent_span_id=int.from_bytes(raw[end_trace + 8 :], "big") if parent else None,
        trace_id_128=wide,
    )


def encode_zipkin(trace: ZipkinTrace) -> bytes:
    flags = trace.flags
    if trace.trace_id is None:
        if trace.span_id is not None or trace.parent_span_id is not None:
            raise MetadataEncodeError(EXTENSION, "span ids need a trace id")
        return bytes((flags,))
    if trace.span_id is None:
        raise MetadataEncodeError(EXTENSION, "a trace id needs a span id")
    limit = _U128 if trace.trace_id_128 else _U64
    ids = [(trace.trace_id, limit, "trace id"), (trace.span_id, _U64, "span id")]
    if trace.parent_span_id is not None:
        ids.append((trace.parent_span_id, _U64, "parent span id"))
    out = bytearray((flags,))
    for value, top, what in ids:
        if not 0 <= value <= top:
            raise MetadataEncodeError(EXTENSION, f"{what} {value} out of range")
        out += value.to_bytes(16 if top == _U128 else 8, "big")
    return bytes(out)
