"""Fragmentation of outgoing payloads and reassembly of incoming ones.

Spec: Fragmentation And Reassembly. Metadata goes completely before data; a
request is fragmented as the REQUEST_* frame with F followed by PAYLOAD
frames; only the last fragment lacks F. Follow-up PAYLOAD fragments carry N
(as rsocket-java sends them); the last one carries the C flag of the whole.
``Fragmenter`` is the part of ``Connection`` that applies both limits.
"""

from __future__ import annotations

from .._errors import LocalProtocolError
from ._config import ConnectionConfig
from ._frames import (
    MAX_METADATA_LENGTH,
    PayloadFrame,
    RequestChannelFrame,
    RequestFrame,
    RequestStreamFrame,
)
from ._output import Output

__all__ = [
    "FRAGMENT_GRACE",
    "FRAGMENT_OVERHEAD",
    "Fragmenter",
    "Reassembly",
    "ReassemblyBudget",
    "fragment_payload",
    "fragment_request",
    "header_size",
]

#: What holding one fragment costs beyond its bytes (a bytes object and its
#: list slot, rounded up): counted so that a flood of tiny fragments is
#: charged what it really costs.
FRAGMENT_OVERHEAD = 64
#: FOLLOWS fragments a connection may receive before their mean size is
#: held to ``ConnectionConfig.min_mean_fragment_size`` (a few small ones are
#: no attack).
FRAGMENT_GRACE = 1024


def header_size(first: type, has_metadata: bool) -> int:
    """Bytes before the metadata/data of a frame of this class."""
    base = 10 if first in (RequestStreamFrame, RequestChannelFrame) else 6
    return base + 3 if has_metadata else base


def _slices(
    metadata: bytes | None, data: bytes, first_header: type, limit: int
) -> list[tuple[bytes | None, bytes]]:
    """Split into (metadata, data) slices, each fitting ``limit`` with its header."""
    out: list[tuple[bytes | None, bytes]] = []
    m_off = 0
    d_off = 0
    m_len = len(metadata) if metadata is not None else 0
    d_len = len(data)
    header_class: type = first_header
    while True:
        has_md = metadata is not None and (m_off < m_len or (m_len == 0 and not out))
        room = limit - header_size(header_class, has_md)
        md: bytes | None = None
        if has_md:
            assert metadata is not None
            take = min(room, m_len - m_off)
            md = metadata[m_off : m_off + take]
            m_off += take
            room -= take
        dt = b""
        if m_off >= m_len and room > 0:
            take = min(room, d_len - d_off)
            dt = data[d_off : d_off + take]
            d_off += take
        out.append((md, dt))
        header_class = PayloadFrame
        if m_off >= m_len and d_off >= d_len:
            return out


def fragment_payload(
    stream_id: int,
    data: bytes,
    metadata: bytes | None,
    complete: bool,
    next: bool,
    limit: int,
) -> list[PayloadFrame]:
    parts = _slices(metadata, data, PayloadFrame, limit)
    last = len(parts) - 1
    return [
        PayloadFrame(
            stream_id,
            dt,
            md,
            follows=i != last,
            complete=complete and i == last,
            next=next,
        )
        for i, (md, dt) in enumerate(parts)
    ]


def fragment_request(first: RequestFrame, limit: int) -> list[RequestFrame | PayloadFrame]:
    """``first`` (its ``follows`` flag ignored) as the fragments to send."""
    parts = _slices(first.metadata, first.data, type(first), limit)
    if len(parts) == 1:
        return [first]
    md, dt = parts[0]
    first.metadata = md
    first.data = dt
    first.follows = True
    out: list[RequestFrame | PayloadFrame] = [first]
    last = len(parts) - 1
    for i in range(1, len(parts)):
        md, dt = parts[i]
        out.append(PayloadFrame(first.stream_id, dt, md, follows=i != last, next=True))
    return out


class Reassembly:
    """Fragments of one payload (or request) received so far: ``size``
    (their bytes), ``fragments`` (how many), ``cost`` (bytes held: their
    bytes plus :data:`FRAGMENT_OVERHEAD` each)."""

    __slots__ = ("cost", "data", "first", "fragments", "metadata", "saw_data", "size")

    def __init__(self, first: RequestFrame | PayloadFrame) -> None:
        self.first = first  # the frame that started the sequence (its flags count)
        self.metadata: list[bytes] | None = None
        self.data: list[bytes] = []
        self.size = 0
        self.fragments = 0
        self.cost = 0
        self.saw_data = False

    def add(self, metadata: bytes | None, data: bytes) -> bool:
        """Add one fragment; False if metadata follows data (a protocol error)."""
        if metadata is not None:
            if self.saw_data:
                return False
            if self.metadata is None:
                self.metadata = []
            self.metadata.append(metadata)
            self.size += len(metadata)
        if data:
            self.saw_data = True
            self.data.append(data)
            self.size += len(data)
        self.fragments += 1
        return True

    def result(self) -> tuple[bytes | None, bytes]:
        md = None if self.metadata is None else b"".join(self.metadata)
        return md, b"".join(self.data)


class ReassemblyBudget:
    """The limits of every reassembly of one connection (``ConnectionConfig``:
    ``max_reassembly_size`` and ``max_fragments`` per payload,
    ``max_reassemblies`` and ``max_reassembly_total`` per connection): the
    receive path asks :meth:`start` before a new reassembly, :meth:`over`
    after each fragment, and calls :meth:`end` when one is finished or
    dropped. The answers are the reasons to refuse, ``None`` when within."""

    __slots__ = (
        "active",
        "held",
        "max_active",
        "max_fragments",
        "max_size",
        "max_total",
        "min_mean",
        "seen",
        "seen_bytes",
    )

    def __init__(
        self,
        *,
        max_size: int,
        max_fragments: int,
        max_active: int,
        max_total: int,
        min_mean: int = 0,
    ) -> None:
        self.max_size = max_size
        self.max_fragments = max_fragments
        self.max_active = max_active
        self.max_total = max_total
        self.min_mean = min_mean
        self.active = 0
        self.held = 0
        self.seen = 0  # FOLLOWS fragments received on the connection
        self.seen_bytes = 0  # and their frames' bytes

    def fragment(self, size: int) -> str | None:
        """A frame with FOLLOWS of ``size`` bytes arrived (on any stream,
        reassembled or ignored): the reason to fail the connection once the
        fragments average less than ``min_mean`` bytes, else ``None``."""
        self.seen += 1
        self.seen_bytes += size
        if self.seen > FRAGMENT_GRACE and self.seen_bytes < self.seen * self.min_mean:
            return (
                f"{self.seen} fragments averaging {self.seen_bytes // self.seen} bytes, "
                f"below min_mean_fragment_size ({self.min_mean})"
            )
        return None

    def start(self) -> str | None:
        """Room for one more reassembly? (connection-wide)"""
        if self.active >= self.max_active:
            return f"more than {self.max_active} fragmented payloads in progress"
        self.active += 1
        return None

    def grew(self, r: Reassembly) -> tuple[str, bool] | None:
        """``r`` took a fragment: charge it; ``(reason, connection_wide)``
        if a limit is passed."""
        cost = r.size + r.fragments * FRAGMENT_OVERHEAD
        self.held += cost - r.cost
        r.cost = cost
        if r.size > self.max_size:
            return f"payload exceeds the maximum reassembly size ({self.max_size})", False
        if r.fragments > self.max_fragments:
            return f"payload in more than {self.max_fragments} fragments", False
        if self.held > self.max_total:
            return (
                f"fragmented payloads in progress hold more than {self.max_total} bytes",
                True,
            )
        return None

    def end(self, r: Reassembly) -> None:
        """``r`` is done (complete, or dropped with its stream)."""
        self.active -= 1
        self.held -= r.cost
        r.cost = 0

    def clear(self) -> None:
        """The connection closed: every reassembly is gone."""
        self.active = 0
        self.held = 0


class Fragmenter:
    """Fragmentation and reassembly limits of one connection (a part of
    ``Connection``): ``queue_request`` / ``queue_payload`` queue a frame,
    fragmented beyond ``fragment_size``; ``reassemblies`` is what the
    peer's fragments in progress may hold (:class:`ReassemblyBudget`)."""

    __slots__ = ("fragment_size", "output", "reassemblies")

    def __init__(self, config: ConnectionConfig, output: Output) -> None:
        self.fragment_size = config.fragment_size
        self.output = output
        self.reassemblies = ReassemblyBudget(
            max_size=config.max_reassembly_size,
            max_fragments=config.max_fragments,
            max_active=config.max_reassemblies,
            max_total=config.max_reassembly_total,
            min_mean=config.min_mean_fragment_size,
        )

    def queue_request(self, frame: RequestFrame) -> None:
        limit = self.fragment_size
        md = frame.metadata
        if md is not None and len(md) > MAX_METADATA_LENGTH:
            raise LocalProtocolError("metadata exceeds 16 MiB - 1")
        if 13 + len(frame.data) + (0 if md is None else len(md)) <= limit:
            self.output.queue(frame)
            return
        for part in fragment_request(frame, limit):
            self.output.queue(part)

    def queue_payload(
        self, sid: int, data: bytes, metadata: bytes | None, complete: bool, nxt: bool
    ) -> None:
        if metadata is not None and len(metadata) > MAX_METADATA_LENGTH:
            raise LocalProtocolError("metadata exceeds 16 MiB - 1")
        size = 9 + len(data) + (0 if metadata is None else len(metadata))
        if size <= self.fragment_size:
            self.output.queue(PayloadFrame(sid, data, metadata, False, complete, nxt))
            return
        for part in fragment_payload(sid, data, metadata, complete, nxt, self.fragment_size):
            self.output.queue(part)
