"""What one rsio connection sends: the queued messages, as the transport
takes them.

``Output`` is a part of ``Connection``; every other part queues through it
(``ctx.output``). Messages are queued as pieces (``bytes``, or a
``memoryview`` of a split or packed element) and joined once by
``take_bytes``. The hot send paths of ``Connection`` (``send_next``,
``send_packed``, ``send_part``) append pieces themselves and keep ``size``
in step.
"""

from __future__ import annotations

from ._codec import Message, encode_message
from ._config import ConnectionConfig

__all__ = ["Output"]


class Output:
    """The bytes queued for the transport.

    - ``queue(data)`` / ``send(message)``: add one message;
    - ``take_bytes()``: everything queued, for the transport;
    - ``size`` (bytes queued) against ``limit`` (``max_queued_output``):
      ``blocked``.
    """

    # No __slots__, on purpose: send_next reads and writes ``size`` and
    # ``pieces`` once per element, faster on an instance dict (_fast.py,
    # "Output without slots").

    def __init__(self, config: ConnectionConfig) -> None:
        self.pieces: list[bytes | memoryview] = []
        self.size = 0  # bytes in ``pieces``
        self.limit = config.max_queued_output

    @property
    def blocked(self) -> bool:
        return self.size >= self.limit

    def queue(self, data: bytes) -> None:
        """One encoded message."""
        self.pieces.append(data)
        self.size += len(data)

    def send(self, msg: Message, element_size: int = 0) -> None:
        """``msg`` encoded (``element_size``: its subscription's, for onNext)."""
        self.queue(encode_message(msg, element_size))

    def take_bytes(self) -> bytes:
        """Everything queued, joined once (empty when nothing is)."""
        pieces = self.pieces
        if not pieces:
            return b""
        self.pieces = []
        self.size = 0
        first = pieces[0]
        return first if len(pieces) == 1 and type(first) is bytes else b"".join(pieces)
