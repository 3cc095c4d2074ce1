"""Configuration of an rsio ``Connection``: every limit in one place
(docs/protocols/rsio.md §10)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._codec import MAX_VARINT, DecodeLimits

__all__ = ["ConnectionConfig", "Role"]


class Role(enum.Enum):
    """Which end of the transport this core is: the client opened it."""

    CLIENT = "client"
    SERVER = "server"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionConfig:
    """Limits and options of one connection (sizes in bytes).

    - ``max_message_size``: longest bytes field, packed payload
      (``count * elementSize``) or elementSize accepted; also the largest
      packed message this end sends. Default 16 MiB.
    - ``max_string_size``: longest String (publisher name, error, reason).
      Default 64 KiB.
    - ``max_extensions``: extension Ids accepted in one hello. Default 64.
    - ``max_subscriptions``: the peer's open subscriptions to our publishers;
      beyond it a subscribe is answered onSubscribe + onError. Default 1024.
    - ``max_element_size``: longest joined split element. Default 64 MiB.
    - ``max_element_parts``: parts of one split element. Default 65,536.
    - ``max_split_elements``: split elements in progress on the connection.
      Default 64.
    - ``max_split_buffer``: bytes of partial elements buffered on the
      connection. Default 64 MiB.
    - ``max_cancelled``: tombstones kept for cancelled fixed-size
      subscriptions (docs §5.4); ``cancel`` refuses beyond it. Default 4096.
    - ``split_size``: ``send_next`` sends a variable-size element longer than
      this as parts of this size. Default 1 MiB.
    - ``max_queued_output``: bytes queued above which ``output_blocked`` is
      true and ``send_next`` / ``send_packed`` refuse. Default 4 MiB.
    - ``extensions``: extension Ids announced in our hello. Default none.
    """

    max_message_size: int = 16 * 1024 * 1024
    max_string_size: int = 64 * 1024
    max_extensions: int = 64
    max_subscriptions: int = 1024
    max_element_size: int = 64 * 1024 * 1024
    max_element_parts: int = 65_536
    max_split_elements: int = 64
    max_split_buffer: int = 64 * 1024 * 1024
    max_cancelled: int = 4096
    split_size: int = 1024 * 1024
    max_queued_output: int = 4 * 1024 * 1024
    extensions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in (
            "max_message_size",
            "max_string_size",
            "max_subscriptions",
            "max_element_size",
            "max_element_parts",
            "max_split_elements",
            "max_split_buffer",
            "max_cancelled",
            "split_size",
            "max_queued_output",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if type(self.max_extensions) is not int or self.max_extensions < 0:
            raise ValueError("max_extensions must be an int >= 0")
        if any(type(e) is not int or not 0 <= e <= MAX_VARINT for e in self.extensions):
            raise ValueError("extensions must be ints in 0..2**63-1")

    @property
    def decode_limits(self) -> DecodeLimits:
        return DecodeLimits(
            max_message_size=self.max_message_size,
            max_string_size=self.max_string_size,
            max_extensions=self.max_extensions,
        )
