"""What rsio applications hand the adapters: the publishers a side serves,
and bulk readers for fixed-size elements."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["ElementReader", "Publishers"]


class ElementReader(Protocol):
    """Bulk source of fixed-size elements for one subscription.

    A reader may also have ``exhausted() -> bool``: True once ``read`` would
    return ``b""``. The engine then sends onComplete right behind the last
    elements, even when they used up the peer's demand; without it the
    completion waits until the peer asks for more (the protocol allows
    that, but a consumer that asks for exactly what it expects would wait).
    """

    def read(self, max_count: int) -> bytes:
        """Up to ``max_count`` elements back to back; ``b""`` once finished."""

    def close(self) -> None: ...


#: What a side publishes: a mapping of names to Publishers, or a lookup
#: function returning a Publisher or None (unknown name).
Publishers = Mapping[str, Any] | Callable[[str], Any]
