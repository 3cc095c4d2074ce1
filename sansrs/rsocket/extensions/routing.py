"""Routing metadata (RSocket extension: Routing): any number of tags, each
an 8-bit length and that many bytes of UTF-8 text, never null terminated.
Responders route by the first tag (as Spring and rsocket-py do)."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import MetadataDecodeError, MetadataEncodeError

__all__ = ["MAX_TAG_LENGTH", "decode_routing", "encode_routing"]

EXTENSION = "routing"
MAX_TAG_LENGTH = 0xFF


def encode_routing(tags: Iterable[str] | str) -> bytes:
    """The routing entry content for ``tags`` (one string: one tag)."""
    if isinstance(tags, str):
        tags = (tags,)
    parts = []
    for tag in tags:
        if not isinstance(tag, str):
            raise MetadataEncodeError(EXTENSION, f"a tag is text, not {type(tag).__name__}")
        raw = _utf8(tag)
        if len(raw) > MAX_TAG_LENGTH:
            raise MetadataEncodeError(
                EXTENSION, f"tag of {len(raw)} bytes exceeds {MAX_TAG_LENGTH}: {tag[:40]!r}..."
            )
        if raw.endswith(b"\x00"):
            raise MetadataEncodeError(EXTENSION, f"tag {tag!r} MUST NOT be null terminated")
        parts.append(bytes((len(raw),)))
        parts.append(raw)
    if not parts:
        raise MetadataEncodeError(EXTENSION, "at least one tag is needed")
    return b"".join(parts)


def _utf8(tag: str) -> bytes:
    try:
        return tag.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates
        raise MetadataEncodeError(EXTENSION, f"tag {tag!r} is not valid Unicode") from None


def decode_routing(content: bytes | memoryview) -> tuple[str, ...]:
    """The tags of a routing entry, in order."""
    tags = []
    offset = 0
    end = len(content)
    while offset < end:
        length = content[offset]
        offset += 1
        stop = offset + length
        if stop > end:
            raise MetadataDecodeError(
                EXTENSION, f"truncated: tag of {length} bytes, {end - offset} left"
            )
        raw = bytes(content[offset:stop])
        if raw.endswith(b"\x00"):
            raise MetadataDecodeError(EXTENSION, f"tag {raw!r} is null terminated")
        try:
            tags.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise MetadataDecodeError(EXTENSION, f"tag {raw!r} is not UTF-8") from None
        offset = stop
    return tuple(tags)
