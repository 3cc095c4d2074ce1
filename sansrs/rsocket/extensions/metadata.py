"""Composite metadata as an application reads and writes it: every
well-known extension entry decoded at once (:class:`CompositeMetadata`,
:func:`decode_metadata`), and built from keyword arguments
(:func:`compose`); the per-stream data MIME rules; where each extension may
appear (:data:`ALLOWED_FRAMES`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from .._frames import FrameType
from .auth import Authentication, decode_authentication, encode_authentication
from .composite import CompositeEntry, entry_bytes, iter_composite
from .data_mime import (
    decode_data_mime,
    encode_accept_mimes,
    encode_data_mime,
    iter_accept_mimes,
)
from .errors import MetadataEncodeError
from .mime import (
    ACCEPT_MIME_TYPES,
    AUTHENTICATION,
    COMPOSITE_METADATA,
    DATA_MIME_TYPE,
    ROUTING,
    TRACING_ZIPKIN,
)
from .routing import decode_routing, encode_routing
from .tracing import ZipkinTrace, decode_zipkin, encode_zipkin

__all__ = [
    "ALLOWED_FRAMES",
    "CompositeMetadata",
    "compose",
    "decode_metadata",
    "effective_data_mime",
    "needs_response_mime",
    "response_data_mime",
]

_REQUESTS = frozenset(
    {
        FrameType.REQUEST_FNF,
        FrameType.REQUEST_RESPONSE,
        FrameType.REQUEST_STREAM,
        FrameType.REQUEST_CHANNEL,
    }
)
#: The frames each extension's spec allows it in ("MUST only be used in
#: frame types used to initiate interactions", plus SETUP for
#: authentication and PAYLOAD for tracing). Two peers go further and this
#: library follows them where asked to: Spring sends a route in SETUP, and
#: rsocket-py routes METADATA_PUSH (docs/extensions.md, Interoperability).
ALLOWED_FRAMES: Mapping[str, frozenset[FrameType]] = MappingProxyType(
    {
        COMPOSITE_METADATA: _REQUESTS | {FrameType.SETUP},
        ROUTING: _REQUESTS,
        AUTHENTICATION: _REQUESTS | {FrameType.SETUP},
        DATA_MIME_TYPE: _REQUESTS,
        ACCEPT_MIME_TYPES: _REQUESTS,
        TRACING_ZIPKIN: _REQUESTS | {FrameType.PAYLOAD},
    }
)


@dataclass(frozen=True, slots=True)
class CompositeMetadata:
    """Composite metadata, decoded: every entry in order (``entries``) and
    the well-known ones interpreted. Several routing entries add their tags
    in order, several accept entries their types; for authentication, data
    MIME type and tracing the first entry counts."""

    entries: tuple[CompositeEntry, ...] = ()
    tags: tuple[str, ...] = ()
    auth: Authentication | None = None
    data_mime: str | None = None
    accept: tuple[str, ...] = ()
    tracing: ZipkinTrace | None = None

    @property
    def route(self) -> str | None:
        """The first routing tag: what responders route by."""
        return self.tags[0] if self.tags else None

    def all(self, mime: str) -> list[CompositeEntry]:
        """Every entry of MIME type ``mime``, in order."""
        return [e for e in self.entries if e.mime == mime]


def decode_metadata(metadata: bytes | bytearray | memoryview | None) -> CompositeMetadata:
    """Decode composite metadata and every well-known entry in it (``None`` or
    empty: nothing). Raises :class:`~.errors.MetadataDecodeError` for any
    malformed entry, well-known content included."""
    if not metadata:
        return _EMPTY
    entries = []
    tags: list[str] = []
    auth: Authentication | None = None
    data_mime: str | None = None
    accept: list[str] = []
    tracing: ZipkinTrace | None = None
    # One branch per well-known MIME type, alike by design: each entry is
    # decoded (a malformed one raises), the first of a single-valued kind kept.
    for entry in iter_composite(metadata):
        entries.append(entry)
        mime = entry.mime
        if mime == ROUTING:
            tags.extend(decode_routing(entry.content))
        elif mime == AUTHENTICATION:
            decoded = decode_authentication(entry.content)
            if auth is None:
                auth = decoded
        elif mime == DATA_MIME_TYPE:
            one = decode_data_mime(entry.content)
            if data_mime is None:
                data_mime = one
        elif mime == ACCEPT_MIME_TYPES:
            accept.extend(iter_accept_mimes(entry.content))
        elif mime == TRACING_ZIPKIN:
            trace = decode_zipkin(entry.content)
            if tracing is None:
                tracing = trace
    return CompositeMetadata(tuple(entries), tuple(tags), auth, data_mime, tuple(accept), tracing)


_EMPTY = CompositeMetadata()


def compose(
    route: str | Sequence[str] | None = None,
    *,
    auth: Authentication | None = None,
    data_mime: str | int | None = None,
    accept: Iterable[str | int] = (),
    tracing: ZipkinTrace | None = None,
    entries: Iterable[CompositeEntry | tuple[str | int, bytes | bytearray | memoryview]] = (),
) -> bytes:
    """Composite metadata carrying a route (a tag, or several), credentials,
    the data MIME type of this stream, the accepted response types, a Zipkin
    trace, and any further ``(mime, content)`` entries, in that order."""
    parts = []
    if route is not None:
        if not isinstance(route, str) and not route:
            raise MetadataEncodeError("routing", "at least one tag is needed")
        parts.append(entry_bytes(ROUTING, encode_routing(route)))
    if auth is not None:
        parts.append(entry_bytes(AUTHENTICATION, encode_authentication(auth)))
    if data_mime is not None:
        parts.append(entry_bytes(DATA_MIME_TYPE, encode_data_mime(data_mime)))
    accepted = list(accept)
    if accepted:
        parts.append(entry_bytes(ACCEPT_MIME_TYPES, encode_accept_mimes(accepted)))
    if tracing is not None:
        parts.append(entry_bytes(TRACING_ZIPKIN, encode_zipkin(tracing)))
    for entry in entries:
        if isinstance(entry, CompositeEntry):
            parts.append(entry_bytes(entry.mime, entry.content))
        else:
            parts.append(entry_bytes(*entry))
    return b"".join(parts)


def effective_data_mime(metadata: CompositeMetadata, setup_data_mime: str) -> str:
    """The data MIME type of a request's payloads: the stream's own, else the
    SETUP's (the spec: without a declared one, the SETUP's MUST be used)."""
    return metadata.data_mime if metadata.data_mime is not None else setup_data_mime


def needs_response_mime(metadata: CompositeMetadata, setup_data_mime: str, produced: str) -> bool:
    """Whether a responder answering in ``produced`` MUST declare it (a type
    other than the requester specified: not among its accepted types, or,
    with none given, not the request's data MIME type)."""
    if metadata.accept:
        return produced not in metadata.accept
    return produced != effective_data_mime(metadata, setup_data_mime)


def response_data_mime(metadata: bytes | memoryview | None, default: str) -> str:
    """Requester side: the data MIME type of a response payload, the one its
    composite metadata declares, else ``default``. An accept entry from the
    responder MUST be ignored, and is."""
    if not metadata:
        return default
    for entry in iter_composite(metadata):
        if entry.mime == DATA_MIME_TYPE:
            return decode_data_mime(entry.content)
    return default
