"""Composite metadata (RSocket extension: Composite Metadata): any number of
entries, each a MIME type (well-known id or US-ASCII name), a 24-bit length
and that many bytes of content.

:func:`iter_composite` walks the entries lazily and without copying (each
``content`` is a ``memoryview`` slice of the input); a malformed entry
raises :class:`~.errors.MetadataDecodeError` when the walk reaches it,
after the well-formed entries before it. :func:`encode_composite` writes
entries back, a well-known MIME type always in its one-byte form. Entry
order is kept both ways (the spec: the order MUST be preserved when
presented to responders), and several entries may share a MIME type.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .errors import MetadataDecodeError, MetadataEncodeError
from .mime import ID_BY_MIME, MIME_BY_ID, decode_name, encode_name

__all__ = [
    "MAX_CONTENT_LENGTH",
    "CompositeEntry",
    "composite_framing_error",
    "encode_composite",
    "iter_composite",
]

EXTENSION = "composite metadata"
#: Largest entry content (24-bit length).
MAX_CONTENT_LENGTH = 0xFFFFFF
_AUTHENTICATION = MIME_BY_ID[0x7C]


@dataclass(frozen=True, slots=True)
class CompositeEntry:
    """One entry: its MIME type, whether it was sent as a well-known id, and
    its content (a zero-copy view into the metadata; ``bytes(entry.content)``
    copies it out)."""

    mime: str
    content: memoryview
    well_known: bool = False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompositeEntry):
            return NotImplemented
        return self.mime == other.mime and self.content == other.content

    def __hash__(self) -> int:
        return hash((self.mime, bytes(self.content)))

    def __repr__(self) -> str:
        if self.mime == _AUTHENTICATION:  # credentials stay out of logs
            return f"CompositeEntry({self.mime!r}, <{len(self.content)} bytes>)"
        return f"CompositeEntry({self.mime!r}, {bytes(self.content)!r})"


def iter_composite(metadata: bytes | bytearray | memoryview) -> Iterator[CompositeEntry]:
    """The entries of ``metadata``, one at a time, as they are reached."""
    view = memoryview(metadata)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    end = len(view)
    offset = 0
    names = MIME_BY_ID
    while offset < end:
        mime, well_known, offset = decode_name(view, offset, names, EXTENSION)
        if offset + 3 > end:
            raise MetadataDecodeError(
                EXTENSION, f"truncated: entry {mime!r} has no complete 24-bit length"
            )
        length = (view[offset] << 16) | (view[offset + 1] << 8) | view[offset + 2]
        offset += 3
        stop = offset + length
        if stop > end:
            raise MetadataDecodeError(
                EXTENSION,
                f"truncated: entry {mime!r} declares {length} bytes, {end - offset} left",
            )
        yield CompositeEntry(mime, view[offset:stop], well_known)
        offset = stop


def composite_framing_error(metadata: bytes | bytearray | memoryview) -> str | None:
    """Why ``metadata`` is not framed as composite metadata (None: it is):
    every entry's type header, its 24-bit length and that many bytes must
    fit. Only the framing: a well-known id this table lacks (a newer
    extension's) passes, as does any content. A sender's check that the
    bytes it is about to declare composite are composite (raw bytes fail
    it but by rare chance; a peer decoding them would fail the same way)."""
    end = len(metadata)
    offset = 0
    while offset < end:
        head = metadata[offset]
        if head & 0x80:
            offset += 1
        else:
            offset += 2 + head
            if offset > end:
                return f"entry type name of {head + 1} bytes runs past the end"
        if offset + 3 > end:
            return "entry has no complete 24-bit length"
        offset += 3 + int.from_bytes(metadata[offset : offset + 3], "big")
        if offset > end:
            return "entry content runs past the end"
    return None


def entry_bytes(mime: str | int, content: bytes | bytearray | memoryview) -> bytes:
    """One encoded entry."""
    length = len(content)
    if length > MAX_CONTENT_LENGTH:
        raise MetadataEncodeError(
            EXTENSION, f"entry content of {length} bytes exceeds {MAX_CONTENT_LENGTH}"
        )
    head = encode_name(mime, ID_BY_MIME, MIME_BY_ID, EXTENSION)
    return b"".join((head, length.to_bytes(3, "big"), content))


def encode_composite(
    entries: Iterable[CompositeEntry | tuple[str | int, bytes | bytearray | memoryview]],
) -> bytes:
    """Composite metadata of ``entries`` (``CompositeEntry`` or ``(mime,
    content)`` pairs, ``mime`` a name or a well-known id), in order."""
    parts = []
    for entry in entries:
        if isinstance(entry, CompositeEntry):
            parts.append(entry_bytes(entry.mime, entry.content))
        else:
            mime, content = entry
            parts.append(entry_bytes(mime, content))
    return b"".join(parts)
