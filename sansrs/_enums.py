"""What the three protocols' state enums share (each protocol's ``_fast``
applies it to its tables' enums)."""

from __future__ import annotations

import enum
from typing import TypeVar

__all__ = ["identity_hash"]

E = TypeVar("E", bound=enum.Enum)


def identity_hash(cls: type[E]) -> type[E]:
    """Hash ``cls``'s members by identity: Enum's own ``__hash__`` is Python
    code, run on every state-table lookup; members are singletons compared
    by identity, so ``object.__hash__`` gives the same dict behaviour."""
    type.__setattr__(cls, "__hash__", object.__hash__)
    return cls
