"""Lock-free serialization of signals: a mailbox plus a one-element drain token.

Every call that may signal (subscribe, request, cancel, upstream signals of a
processor) appends a message to a ``collections.deque`` and then tries to take
the token with ``list.pop()``. ``pop`` and ``append`` on builtins are single
atomic operations (under the GIL and on free-threaded builds, whose list and
deque methods lock the object), so exactly one caller at a time holds the
token and runs the drain function; a caller that finds the token gone simply
returns, because the holder will see the message it appended. After putting
the token back, the holder re-checks the mailbox and drains again if it is not
empty, which closes the race with a message appended just before the token
returned.

Consequences, by construction:

- rule 1.3: all signals to a Subscriber come from the drainer, one at a time;
- rule 3.3: ``request`` called from inside ``on_next`` only appends and
  returns, the drainer loops (trampolining), so the recursion depth between
  ``on_next`` and ``request`` is 1;
- rule 3.5: ``cancel`` sets a flag (one attribute store) and posts a message;
  it never waits, is idempotent and safe from any thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Mailbox"]

M = TypeVar("M")


class Mailbox(Generic[M]):
    """A multi-producer mailbox drained by at most one caller at a time."""

    __slots__ = ("_drain", "_token", "items")

    def __init__(self, drain: Callable[[], None]) -> None:
        self.items: deque[M] = deque()
        self._token: list[None] = [None]
        self._drain = drain

    def post(self, message: M) -> None:
        """Append ``message`` and drain unless another caller is draining."""
        self.items.append(message)
        self.run()

    def run(self) -> None:
        while True:
            try:
                self._token.pop()
            except IndexError:
                return  # the current holder will see what we appended
            try:
                self._drain()
            finally:
                self._token.append(None)
            if not self.items:
                return

    def draining(self) -> bool:
        """True while some caller holds the token (only meaningful to that caller)."""
        return not self._token
