"""Well-known MIME types (RSocket extension: Well-known MIME Types) and the
one-byte header every extension uses to name a MIME type or an
authentication type.

The header is ``M|ID/Len``: with the high bit set, the low 7 bits are a
well-known id; clear, they are the length of the US-ASCII name that follows,
minus one (a name has 1..128 bytes; rsocket-java, rsocket-py and
rsocket-js all count this way). Ids 0x00-0x7F not in the table are
reserved: decoding one is an error (:class:`~.errors.MetadataDecodeError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType

from .errors import MetadataDecodeError, MetadataEncodeError

__all__ = [
    "ACCEPT_MIME_TYPES",
    "AUTHENTICATION",
    "COMPOSITE_METADATA",
    "DATA_MIME_TYPE",
    "MAX_NAME_LENGTH",
    "ROUTING",
    "TRACING_ZIPKIN",
    "WellKnownMimeType",
    "decode_name",
    "encode_name",
    "mime_id",
    "mime_name",
]

#: Longest MIME (or authentication type) name the 7-bit length can carry.
MAX_NAME_LENGTH = 128
_KNOWN = 0x80


class WellKnownMimeType(IntEnum):
    """Every id of the well-known MIME table; ``.mime`` is its name."""

    APPLICATION_AVRO = 0x00
    APPLICATION_CBOR = 0x01
    APPLICATION_GRAPHQL = 0x02
    APPLICATION_GZIP = 0x03
    APPLICATION_JAVASCRIPT = 0x04
    APPLICATION_JSON = 0x05
    APPLICATION_OCTET_STREAM = 0x06
    APPLICATION_PDF = 0x07
    APPLICATION_THRIFT = 0x08
    APPLICATION_PROTOBUF = 0x09
    APPLICATION_XML = 0x0A
    APPLICATION_ZIP = 0x0B
    AUDIO_AAC = 0x0C
    AUDIO_MP3 = 0x0D
    AUDIO_MP4 = 0x0E
    AUDIO_MPEG3 = 0x0F
    AUDIO_MPEG = 0x10
    AUDIO_OGG = 0x11
    AUDIO_OPUS = 0x12
    AUDIO_VORBIS = 0x13
    IMAGE_BMP = 0x14
    IMAGE_GIF = 0x15
    IMAGE_HEIC_SEQUENCE = 0x16
    IMAGE_HEIC = 0x17
    IMAGE_HEIF_SEQUENCE = 0x18
    IMAGE_HEIF = 0x19
    IMAGE_JPEG = 0x1A
    IMAGE_PNG = 0x1B
    IMAGE_TIFF = 0x1C
    MULTIPART_MIXED = 0x1D
    TEXT_CSS = 0x1E
    TEXT_CSV = 0x1F
    TEXT_HTML = 0x20
    TEXT_PLAIN = 0x21
    TEXT_XML = 0x22
    VIDEO_H264 = 0x23
    VIDEO_H265 = 0x24
    VIDEO_VP8 = 0x25
    APPLICATION_HESSIAN = 0x26
    APPLICATION_JAVA_OBJECT = 0x27
    APPLICATION_CLOUDEVENTS_JSON = 0x28
    APPLICATION_CAPNP = 0x29
    APPLICATION_FLATBUFFERS = 0x2A
    MESSAGE_RSOCKET_MIMETYPE = 0x7A
    MESSAGE_RSOCKET_ACCEPT_MIMETYPES = 0x7B
    MESSAGE_RSOCKET_AUTHENTICATION = 0x7C
    MESSAGE_RSOCKET_TRACING_ZIPKIN = 0x7D
    MESSAGE_RSOCKET_ROUTING = 0x7E
    MESSAGE_RSOCKET_COMPOSITE_METADATA = 0x7F

    @property
    def mime(self) -> str:
        return _NAMES[self]


_NAMES: dict[int, str] = {
    0x00: "application/avro",
    0x01: "application/cbor",
    0x02: "application/graphql",
    0x03: "application/gzip",
    0x04: "application/javascript",
    0x05: "application/json",
    0x06: "application/octet-stream",
    0x07: "application/pdf",
    0x08: "application/vnd.apache.thrift.binary",
    0x09: "application/vnd.google.protobuf",
    0x0A: "application/xml",
    0x0B: "application/zip",
    0x0C: "audio/aac",
    0x0D: "audio/mp3",
    0x0E: "audio/mp4",
    0x0F: "audio/mpeg3",
    0x10: "audio/mpeg",
    0x11: "audio/ogg",
    0x12: "audio/opus",
    0x13: "audio/vorbis",
    0x14: "image/bmp",
    0x15: "image/gif",
    0x16: "image/heic-sequence",
    0x17: "image/heic",
    0x18: "image/heif-sequence",
    0x19: "image/heif",
    0x1A: "image/jpeg",
    0x1B: "image/png",
    0x1C: "image/tiff",
    0x1D: "multipart/mixed",
    0x1E: "text/css",
    0x1F: "text/csv",
    0x20: "text/html",
    0x21: "text/plain",
    0x22: "text/xml",
    0x23: "video/H264",
    0x24: "video/H265",
    0x25: "video/VP8",
    0x26: "application/x-hessian",
    0x27: "application/x-java-object",
    0x28: "application/cloudevents+json",
    0x29: "application/x-capnp",
    0x2A: "application/x-flatbuffers",
    0x7A: "message/x.rsocket.mime-type.v0",
    0x7B: "message/x.rsocket.accept-mime-types.v0",
    0x7C: "message/x.rsocket.authentication.v0",
    0x7D: "message/x.rsocket.tracing-zipkin.v0",
    0x7E: "message/x.rsocket.routing.v0",
    0x7F: "message/x.rsocket.composite-metadata.v0",
}

#: Well-known id -> MIME name, and the reverse (read only).
MIME_BY_ID: Mapping[int, str] = MappingProxyType(_NAMES)
ID_BY_MIME: Mapping[str, int] = MappingProxyType({v: k for k, v in _NAMES.items()})

DATA_MIME_TYPE = _NAMES[0x7A]
ACCEPT_MIME_TYPES = _NAMES[0x7B]
AUTHENTICATION = _NAMES[0x7C]
TRACING_ZIPKIN = _NAMES[0x7D]
ROUTING = _NAMES[0x7E]
COMPOSITE_METADATA = _NAMES[0x7F]


def mime_name(well_known_id: int) -> str:
    """The MIME name of a well-known id; ``KeyError`` for a reserved one."""
    return _NAMES[well_known_id]


def mime_id(mime: str) -> int | None:
    """The well-known id of ``mime`` (exact spelling, as the table has it), or None."""
    return ID_BY_MIME.get(mime)


def encode_name(
    name: str | int, ids: Mapping[str, int], names: Mapping[int, str], extension: str
) -> bytes:
    """The ``M|ID/Len`` header (and name) for ``name``: its well-known id when
    ``ids`` has it (the compact form, as every implementation sends), else
    the US-ASCII name. An int must be a known id."""
    if isinstance(name, int):
        if name not in names:
            raise MetadataEncodeError(extension, f"{name:#x} is not a well-known id")
        return bytes((_KNOWN | name,))
    known = ids.get(name)
    if known is not None:
        return bytes((_KNOWN | known,))
    try:
        raw = name.encode("ascii")
    except UnicodeEncodeError:
        raise MetadataEncodeError(extension, f"type name {name!r} is not US-ASCII") from None
    if not 0 < len(raw) <= MAX_NAME_LENGTH:
        raise MetadataEncodeError(
            extension, f"type name must have 1..{MAX_NAME_LENGTH} bytes, not {len(raw)}"
        )
    if raw.endswith(b"\x00"):
        raise MetadataEncodeError(extension, "type name MUST NOT be null terminated")
    return bytes((len(raw) - 1,)) + raw


def decode_name(
    buf: bytes | memoryview, offset: int, names: Mapping[int, str], extension: str
) -> tuple[str, bool, int]:
    """Read one ``M|ID/Len`` header at ``offset``: (name, well_known, next offset)."""
    if offset >= len(buf):
        raise MetadataDecodeError(extension, "truncated: type header missing")
    head = buf[offset]
    if head & _KNOWN:
        name = names.get(head & 0x7F)
        if name is None:
            raise MetadataDecodeError(extension, f"reserved well-known id {head & 0x7F:#04x}")
        return name, True, offset + 1
    end = offset + 1 + head + 1
    if end > len(buf):
        raise MetadataDecodeError(
            extension, f"truncated: type name of {head + 1} bytes, {len(buf) - offset - 1} left"
        )
    raw = bytes(buf[offset + 1 : end])
    if raw[-1] == 0:
        raise MetadataDecodeError(extension, "type name is null terminated")
    try:
        return raw.decode("ascii"), False, end
    except UnicodeDecodeError:
        raise MetadataDecodeError(extension, f"type name {raw!r} is not US-ASCII") from None
