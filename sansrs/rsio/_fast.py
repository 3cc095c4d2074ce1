"""Every speed trick of the rsio core, in one place.

Each builds an ordinary value a cheaper way and names the figure that pays
for it: ``benchmarks/bench_core_fast_paths.py`` (ns per operation, the trick
against the plain code it replaces; "Core fast paths" in docs/performance.md)
and ``benchmarks/bench_rsio.py`` (elements/s and CPU time per element
through two connections; ``--before DIR`` against another checkout's core).
Outside this module the core is plain Python; the hot paths that use these
(``Receiver._parse``, ``Connection.send_next``) say so where they do.

- ``ON_NEXT``, ``ON_NEXT_PACKED``, ``VARINT_MORE``: plain ints the receive
  loop compares message codes and varint bytes with (a local, not an enum
  member looked up per message).
- ``next_event``: ``NextReceived`` built through its slot descriptors,
  without the frozen dataclass ``__init__`` (``rsio_next_event`` vs
  ``rsio_next_call``): one per element received.
- ``VARINT1``: the one-byte varints prebuilt, the length of every element
  shorter than 128 bytes (``rsio_varint1`` vs ``rsio_varint_encode``).
- ``identity_hash``: enums hashed by identity for the state-table lookups
  (``enum_identity_hash`` vs ``enum_default_hash``).
- Output without slots (not code here: a choice in ``_output.py``):
  ``Output`` keeps ``pieces`` and ``size`` in an instance dict, which
  ``send_next`` reads and writes once per element; CPython 3.11 does that
  faster than through ``__slots__`` (``bench_rsio.py --runs 7 --before``,
  ``core_on_next``: 1.11x the CPU per element of the core without parts
  with slots; ``send_next`` alone, 10,000 calls, best of 30: 300-320 ns
  with slots, 275-285 ns without; 2026-11-26).
"""

from __future__ import annotations

from typing import Any

from .._enums import identity_hash
from ._codec import MessageType
from .events import NextReceived

__all__ = ["ON_NEXT", "ON_NEXT_PACKED", "VARINT1", "VARINT_MORE", "identity_hash", "next_event"]

ON_NEXT = int(MessageType.ON_NEXT)
ON_NEXT_PACKED = int(MessageType.ON_NEXT_PACKED)
if ON_NEXT_PACKED != ON_NEXT + 1:  # pragma: no cover - the hot loop tests a range
    raise ImportError("onNext and onNextPacked codes are no longer adjacent")
#: A varint byte with this bit set is followed by another (docs §2.1).
VARINT_MORE = 0x80

#: ``encode_varint(n)`` for n < 128.
VARINT1: list[bytes] = [bytes((n,)) for n in range(VARINT_MORE)]

_new = object.__new__
_set_sid: Any = NextReceived.__dict__["subscriber_id"].__set__
_set_element: Any = NextReceived.__dict__["element"].__set__


def next_event(subscriber_id: int, element: bytes) -> NextReceived:
    """``NextReceived(subscriber_id=, element=)``: the same frozen value."""
    event: NextReceived = _new(NextReceived)
    _set_sid(event, subscriber_id)
    _set_element(event, element)
    return event


