"""Split elements received: onNextPart / onNextLastPart joined into one
element, within the limits of docs/protocols/rsio.md §6.2 and §10.

``Reassembly`` is a part of ``Connection``: ``Receiver`` hands it the parts
of active subscriptions; it keeps each element's parts on its ``Sub``
(``partials``) and the connection-wide counts (``splits``: elements in
progress, ``split_bytes``: their bytes), checks ``max_split_elements``,
``max_element_parts``, ``max_element_size`` and ``max_split_buffer``, and
delivers a joined element as ``NextReceived``. ``drop`` discards a
subscription's elements in progress (its end, our cancel).
"""

from __future__ import annotations

from ._codec import ErrorCode
from ._context import Context
from ._subscriptions import Partial, Sub, SubscriptionTable
from .events import NextReceived

__all__ = ["Reassembly"]

_LIMIT = ErrorCode.LIMIT_EXCEEDED


class Reassembly:
    """See the module docstring."""

    __slots__ = ("_ctx", "_table", "split_bytes", "splits")

    def __init__(self, ctx: Context, table: SubscriptionTable) -> None:
        self._ctx = ctx
        self._table = table
        self.splits = 0  # split elements in progress on the connection
        self.split_bytes = 0  # their bytes so far
        ctx.on_closed.append(self.forget)

    def add(self, s: Sub, element_id: int, data: bytes, last: bool, what: str) -> None:
        """One part of element ``element_id`` on active subscription ``s``
        (``what``: its message's name); its first part takes the demand."""
        ctx = self._ctx
        cfg = ctx.config
        partials = s.partials
        part = partials.get(element_id) if partials is not None else None
        if part is None:
            self._table.take_demand(s, 1, f"a split element ({what})")
            if last:
                self._deliver(s, data)
                return
            if self.splits >= cfg.max_split_elements:
                ctx.fail(_LIMIT, f"more than {cfg.max_split_elements} split elements in progress")
            part = Partial()
            if partials is None:
                partials = s.partials = {}
            partials[element_id] = part
            self.splits += 1
        part.parts += 1
        if part.parts > cfg.max_element_parts:
            ctx.fail(_LIMIT, f"a split element of more than {cfg.max_element_parts} parts")
        if len(part.data) + len(data) > cfg.max_element_size:
            ctx.fail(_LIMIT, f"a split element larger than {cfg.max_element_size} bytes")
        if self.split_bytes + len(data) > cfg.max_split_buffer:
            ctx.fail(
                _LIMIT, f"more than {cfg.max_split_buffer} bytes of split elements in progress"
            )
        part.data += data
        self.split_bytes += len(data)
        if last:
            assert partials is not None
            del partials[element_id]
            self.splits -= 1
            self.split_bytes -= len(part.data)
            self._deliver(s, bytes(part.data))

    def _deliver(self, s: Sub, element: bytes) -> None:
        ctx = self._ctx
        if s.size and len(element) != s.size:
            ctx.fail(
                ErrorCode.UNEXPECTED_MESSAGE,
                f"a split element of {len(element)} bytes on subscriber {s.id}, whose "
                f"elementSize is {s.size}",
            )
        limit = ctx.config.max_element_size
        if len(element) > limit:
            ctx.fail(_LIMIT, f"a split element larger than {limit} bytes")
        ctx.events.append(NextReceived(subscriber_id=s.id, element=element))

    def drop(self, s: Sub) -> None:
        """Discard ``s``'s elements in progress."""
        if s.partials:
            for part in s.partials.values():
                self.splits -= 1
                self.split_bytes -= len(part.data)
        s.partials = None

    def forget(self) -> None:
        """The connection closed (its subscriptions with their parts are gone)."""
        self.splits = 0
        self.split_bytes = 0
