"""Configuration of an RSocket ``Connection``: every limit in one place."""

from __future__ import annotations

import enum
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from ._frames import MAX_FRAME_LENGTH

__all__ = ["ConnectionConfig", "Framing", "Role"]


class Role(enum.Enum):
    """Which end of the transport connection this core is."""

    CLIENT = "client"
    SERVER = "server"


class Framing(enum.Enum):
    """How frames travel on the transport (spec: Framing Protocol Usage)."""

    #: Byte stream (TCP): each frame preceded by a 24-bit length.
    LENGTH_PREFIXED = "length-prefixed"
    #: Message transport (WebSocket): one frame per message, no prefix.
    MESSAGES = "messages"


#: Smallest fragment size accepted: headers plus a useful slice of data.
MIN_FRAGMENT_SIZE = 64

#: Default size of a resume identification token: 128 random bits.
RESUME_TOKEN_BYTES = 16


def default_resume_token() -> bytes:
    """A fresh resume identification token: 16 bytes from ``secrets``."""
    return secrets.token_bytes(RESUME_TOKEN_BYTES)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionConfig:
    """Limits and options of one connection. All sizes are in bytes.

    - ``framing``: ``Framing.LENGTH_PREFIXED`` (``receive_data`` /
      ``data_to_send``) or ``Framing.MESSAGES`` (``receive_frame`` /
      ``frames_to_send``).
    - ``max_frame_size``: largest frame accepted from the peer (without the
      length prefix). Default 16 MiB - 1, the most the 24-bit prefix can say.
    - ``fragment_size``: largest frame this end sends; larger payloads and
      requests are fragmented. Default 16 MiB - 1 (fragment only what could
      not be sent otherwise). At least 64.
    - ``max_reassembly_size``: largest reassembled payload (metadata + data)
      accepted from the peer. Default 64 MiB.
    - ``max_fragments``: fragments of one reassembled payload or request.
      Default 65,536 (so a payload in tiny fragments costs at most that many
      objects).
    - ``max_reassemblies``: fragmented payloads and requests in progress at
      once on the connection (a fire-and-forget with F included); beyond it:
      ERROR[CONNECTION_ERROR]. Default 256.
    - ``max_reassembly_total``: bytes held by all reassemblies of the
      connection, counting ``FRAGMENT_OVERHEAD`` (64) bytes per fragment
      for what holding it costs beyond its bytes; beyond it:
      ERROR[CONNECTION_ERROR]. Default 80 MiB (one payload of the largest
      size, in the smallest fragments the count allows).
    - ``min_mean_fragment_size``: the frames the peer sends with FOLLOWS
      (fragments that are not the last of their payload or request, on any
      stream, even one whose reassembly was refused) must average at least
      this many bytes (frame header included, length prefix not) once more
      than ``FRAGMENT_GRACE`` (1024) of them have arrived; beyond it:
      ERROR[CONNECTION_ERROR]. Every frame costs its parse whatever its
      size, so tiny fragments are a way to make a server spend a core
      (2-byte fragments: about 75 ms a MiB); this bounds that cost per byte
      received (256: at most 4,096 fragments a MiB; docs/security.md has
      the figures). Default 256: a conforming sender fragments at its
      ``fragment_size`` (at least 64, usually far more: sansrs fragments
      only beyond 16 MiB by default, rsocket-java not at all), so only its
      last fragment is small. Lower it for peers that fragment below 256
      bytes; 0: no minimum.
    - ``max_concurrent_streams``: streams the peer may have open towards us at
      once; a request beyond it is answered ERROR[REJECTED]. Default 1024.
    - ``max_queued_output``: bytes queued for sending above which
      ``output_blocked`` is true and ``send_payload`` refuses (back-pressure
      for the adapter). Default 4 MiB.
    - ``max_early_frames``: frames a server holds between receiving SETUP and
      the application accepting it (a client may send requests right behind
      its SETUP). Beyond it: ERROR[CONNECTION_ERROR]. Default 1024.
    - ``reuse_stream_ids``: wrap stream IDs after 2**31-1, skipping IDs still
      in use (spec: Stream Identifiers, Lifetime). Default True.
    - ``resume_buffer_size``: resumable sessions only: bytes of sent frames
      (REQUEST_*, REQUEST_N, CANCEL, ERROR, PAYLOAD) retained until the peer
      acknowledges them with a KEEPALIVE or RESUME_OK position. Past it the
      retained frames are dropped and the session can no longer be resumed
      (it still works while its transport lasts). Default 8 MiB.
    - ``resume_token_source``: client: makes the resume identification
      token of ``setup(resume=True)``. Default ``secrets.token_bytes(16)``.
    - ``payload_runs``: report consecutive whole PAYLOAD(N) items without
      metadata on one stream as one ``PayloadRunReceived`` (their data in a
      list) instead of one ``PayloadReceived`` each: the same items in the
      same order, the same state, a fraction of the work per item. Default
      False.
    - ``fnf_runs``: report consecutive whole REQUEST_FNF frames (metadata or
      not, not fragmented) as one ``FireAndForgetRunReceived`` (stream IDs,
      data and metadata in three lists) instead of one
      ``FireAndForgetReceived`` each: the same requests in the same order,
      the same state and positions. Frames the plain path would not take
      as a fire-and-forget there and then (a fragment, a stream ID in use or
      of our parity, a lease in force, before SETUP is accepted, while
      closing) end the run and take the plain path. Length-prefixed framing
      only (``receive_data``). Default False.
    - ``resume_timeout``: client: seconds a RESUME may wait for RESUME_OK;
      then the session detaches again (resume on another transport). Default
      None: the SETUP's max lifetime plus its keepalive interval.
    """

    framing: Framing = Framing.LENGTH_PREFIXED
    max_frame_size: int = MAX_FRAME_LENGTH
    fragment_size: int = MAX_FRAME_LENGTH
    max_reassembly_size: int = 64 * 1024 * 1024
    max_fragments: int = 65_536
    max_reassemblies: int = 256
    max_reassembly_total: int = 80 * 1024 * 1024
    min_mean_fragment_size: int = 256
    max_concurrent_streams: int = 1024
    max_queued_output: int = 4 * 1024 * 1024
    max_early_frames: int = 1024
    reuse_stream_ids: bool = True
    resume_buffer_size: int = 8 * 1024 * 1024
    resume_token_source: Callable[[], bytes] = field(default=default_resume_token, repr=False)
    resume_timeout: float | None = None
    payload_runs: bool = False
    fnf_runs: bool = False

    def __post_init__(self) -> None:
        if not 6 <= self.max_frame_size <= MAX_FRAME_LENGTH:
            raise ValueError(f"max_frame_size must be in 6..{MAX_FRAME_LENGTH}")
        if not MIN_FRAGMENT_SIZE <= self.fragment_size <= MAX_FRAME_LENGTH:
            raise ValueError(f"fragment_size must be in {MIN_FRAGMENT_SIZE}..{MAX_FRAME_LENGTH}")
        for name in (
            "max_reassembly_size",
            "max_fragments",
            "max_reassemblies",
            "max_reassembly_total",
            "max_concurrent_streams",
            "max_queued_output",
            "max_early_frames",
            "resume_buffer_size",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.min_mean_fragment_size < 0:
            raise ValueError("min_mean_fragment_size must be >= 0")
        if self.resume_timeout is not None and not self.resume_timeout > 0:
            raise ValueError("resume_timeout must be > 0 seconds (or None)")
