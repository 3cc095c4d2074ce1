"""Per-stream data MIME types (RSocket extension: Stream Data MIME Types
Metadata): the "one" form (``message/x.rsocket.mime-type.v0``: the data
MIME type of this request's payloads) and the "accept" form
(``message/x.rsocket.accept-mime-types.v0``: the types the requester accepts
in answer). Each MIME type is an ``M|ID/Len`` header (and name).

The rules a responder and a requester follow (:func:`effective_data_mime`,
:func:`response_data_mime`, :func:`needs_response_mime`):

- no declared data MIME type: the SETUP's one MUST be used;
- answering in a type other than the requester specified: the responder
  MUST declare it in the response's composite metadata;
- a responder's accept entry MUST be ignored by the requester.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .errors import MetadataDecodeError, MetadataEncodeError
from .mime import ID_BY_MIME, MIME_BY_ID, decode_name, encode_name

__all__ = [
    "decode_accept_mimes",
    "decode_data_mime",
    "encode_accept_mimes",
    "encode_data_mime",
]

EXTENSION = "data MIME type"
ACCEPT = "accept MIME types"


def encode_data_mime(mime: str | int) -> bytes:
    """The "one" form: a single MIME type."""
    return encode_name(mime, ID_BY_MIME, MIME_BY_ID, EXTENSION)


def decode_data_mime(content: bytes | memoryview) -> str:
    mime, _, offset = decode_name(content, 0, MIME_BY_ID, EXTENSION)
    if offset != len(content):
        raise MetadataDecodeError(EXTENSION, f"{len(content) - offset} bytes after the MIME type")
    return mime


def encode_accept_mimes(mimes: Iterable[str | int]) -> bytes:
    """The "accept" form: one or more MIME types, in order of preference."""
    parts = [encode_name(m, ID_BY_MIME, MIME_BY_ID, ACCEPT) for m in mimes]
    if not parts:
        raise MetadataEncodeError(ACCEPT, "at least one MIME type is needed")
    return b"".join(parts)


def iter_accept_mimes(content: bytes | memoryview) -> Iterator[str]:
    offset = 0
    while offset < len(content):
        mime, _, offset = decode_name(content, offset, MIME_BY_ID, ACCEPT)
        yield mime


def decode_accept_mimes(content: bytes | memoryview) -> tuple[str, ...]:
    return tuple(iter_accept_mimes(content))
