"""What one RSocket connection sends: the queued frames, the sent position
(spec: Implied Position) and, for a resumable session, the retained copies
of the positioned frames (``RetainedFrames``).

``Output`` is a part of ``Connection``; every other part queues through it.
Frames are queued as ``bytes`` pieces, exactly as they go to the transport:
prefix + body for length-prefixed framing, the body alone (one message)
for message framing. The hot send paths of ``Connection`` append pieces
themselves and keep the counters (``size``, ``sent_position``) in step.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct

from ._config import ConnectionConfig, Framing
from ._encode import encode_frame
from ._frames import POSITIONED, ErrorFrame, Frame
from ._retained import RetainedBudget, RetainedFrames

__all__ = ["Output"]

_U24 = Struct(">BH")


class Output:
    """The frames queued for the transport.

    - ``queue(frame)`` / ``queue_error(...)`` / ``queue_pieces(...)``: add a
      frame (the last for frames already packed as pieces);
    - ``take_bytes()`` / ``take_frames()``: what the transport writes;
    - ``start_retaining()`` / ``trim_retained(position)`` /
      ``sync_retained()``: the retained frames of a resumable session.
    """

    __slots__ = (
        "fast_payload_max",
        "fast_request_max",
        "fragment_size",
        "framed",
        "framed_head",
        "limit",
        "pieces",
        "prefixed",
        "resume_buffer_size",
        "retain",
        "retain_at",
        "retained",
        "sent_position",
        "size",
    )

    def __init__(self, config: ConnectionConfig) -> None:
        self.prefixed = prefixed = config.framing is Framing.LENGTH_PREFIXED
        self.pieces: list[bytes] = []
        self.size = 0  # bytes in ``pieces``
        self.limit = config.max_queued_output
        self.fragment_size = config.fragment_size
        self.resume_buffer_size = config.resume_buffer_size
        # The largest data ``send_payload``'s first path takes (-1: none):
        # one prefixed frame, nothing retained.
        self.fast_payload_max = config.fragment_size - 9 if prefixed else -1
        # The same for a request without metadata (the limit of queue_request).
        self.fast_request_max = config.fragment_size - 13 if prefixed else -1
        #: Bytes of the ``POSITIONED`` frames with a stream ID > 0 sent so far.
        self.sent_position = 0
        # Resumable sessions only: the sent frames the peer may still lack.
        self.retained: RetainedFrames | None = None
        # Its ``frames`` while frames are retained (None: not resumable, or
        # past the limit), and the sent position that calls for a check.
        self.retain: list[bytes] | None = None
        self.retain_at: float = 0.0
        #: ``Connection.frame_runs``: the message transport's header of a
        #: message of n bytes (None: runs go length-prefixed like the rest),
        #: and where each run queued so (two pieces) starts in ``pieces``.
        self.framed_head: Callable[[int], bytes] | None = None
        self.framed: list[int] = []

    # ------------------------------------------------------------------
    # queueing

    def queue(self, frame: Frame) -> None:
        body = encode_frame(frame)
        n = len(body)
        if self.prefixed:
            pieces: tuple[bytes, ...] = (_U24.pack(n >> 16, n & 0xFFFF), body)
            self.size += n + 3
        else:
            pieces = (body,)
            self.size += n
        self.pieces += pieces
        if frame.stream_id and type(frame) in POSITIONED:
            self.sent_position += n
            keep = self.retain
            if keep is not None:
                keep.extend(pieces)
                if self.sent_position > self.retain_at:
                    self.check_retained()

    def queue_pieces(self, pieces: tuple[bytes, bytes], n: int) -> None:
        """A positioned frame already packed as two pieces, prefix+header
        (and metadata) then the data (length-prefixed framing; ``n``: its
        length without the prefix), retained when resumable. Two pieces,
        always: the retained frames find frame boundaries by that."""
        self.pieces += pieces
        self.size += n + 3
        self.sent_position += n
        keep = self.retain
        if keep is not None:  # resumable: retain the frame (spec: Resuming Operation)
            keep.extend(pieces)
            if self.sent_position > self.retain_at:
                self.check_retained()

    def queue_error(self, stream_id: int, code: int, message: str) -> None:
        """ERROR with ``message`` cut to what fits one frame."""
        data = message.encode("utf-8")
        room = self.fragment_size - 10
        if len(data) > room:
            data = data[:room]
        self.queue(ErrorFrame(stream_id, code, data))

    def clear(self) -> None:
        """Drop everything queued (nothing of it reaches the transport)."""
        self.pieces.clear()
        self.framed.clear()
        self.size = 0

    def keep_first(self, count: int) -> None:
        """Keep only the first ``count`` pieces queued."""
        pieces = self.pieces
        del pieces[count:]
        self.framed = [at for at in self.framed if at + 2 <= count]
        self.size = sum(map(len, pieces))

    # ------------------------------------------------------------------
    # taking

    def take_bytes(self) -> bytes:
        """Everything queued, joined once (length-prefixed framing)."""
        pieces = self.pieces
        if not pieces:
            return b""
        data = b"".join(pieces)
        pieces.clear()
        self.size = 0
        return data

    def take_pieces(self) -> list[bytes]:
        """Everything queued, as the pieces queued: one frame per item
        (message framing), or pieces whose concatenation is what
        :meth:`take_bytes` would return (length-prefixed framing)."""
        pieces = self.pieces
        self.pieces = []
        self.size = 0
        return pieces

    take_frames = take_pieces

    def take_framed_pieces(self) -> tuple[list[bytes], list[int]]:
        """:meth:`take_pieces`, and where each run queued already framed
        (``framed_head``) starts among them: two pieces each, whose
        concatenation is the run's frames, each behind its transport
        header (not length-prefixed); every other piece as in
        :meth:`take_pieces`."""
        framed = self.framed
        if framed:
            self.framed = []
        return self.take_pieces(), framed

    # ------------------------------------------------------------------
    # retained frames (resumable sessions)

    def start_retaining(self, shared: RetainedBudget | None = None) -> None:
        """Retain what is sent from now on (``shared``: a server's budget
        for all its sessions)."""
        r = self.retained = RetainedFrames(
            self.resume_buffer_size, self.prefixed, self.sent_position, shared
        )
        self.retain = r.frames
        self.retain_at = r.check_at
        # Resumable PAYLOADs take send_payload's second path, which retains
        # them: the first stays free of any resumption cost.
        self.fast_payload_max = -1

    def stop_retaining(self) -> None:
        if self.retained is not None:
            self.retained.give_up()  # gives its share of the server's budget back
        self.retained = None
        self.retain = None

    def check_retained(self) -> None:
        r = self.retained
        assert r is not None
        r.check(self.sent_position)
        self.sync_retained()

    def trim_retained(self, position: int) -> None:
        """The peer has every frame up to ``position``."""
        if self.retained is not None:
            self.retained.trim(position)
            self.sync_retained()

    def sync_retained(self) -> None:
        """Follow the retained frames' limits (after they changed)."""
        r = self.retained
        assert r is not None
        self.retain_at = r.check_at
        if r.overflowed:
            self.retain = None
            if self.prefixed:  # nothing is retained any more: the fast path again
                self.fast_payload_max = self.fragment_size - 9
