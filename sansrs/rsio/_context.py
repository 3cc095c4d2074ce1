"""The plumbing every part of one rsio connection shares.

A ``Connection`` is composed of parts (``Output``, ``SubscriptionTable``,
``Reassembly``, ``Receiver``); each gets the ``Context`` of its connection
and the parts it works with. The context holds what belongs to no single
part:

- the role, the config and its decode limits;
- the connection state machine (``state``, changed only by ``transition``
  from ``CONNECTION_TRANSITIONS``; ``check`` / ``received`` look a local
  intent or a received message up) and what parts do when it closes
  (``on_closed``: each forgets what it holds);
- the events produced so far (``events``) and the bytes queued
  (``output``);
- the peer's hello, our goodbye's reason and the protocol error that ended
  the connection, if one did;
- the one ending every part may cause: ``fail`` (the peer broke the
  protocol: goodbye, close, raise).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from .._errors import LocalProtocolError, RemoteProtocolError
from ._codec import ClientHello, ErrorCode, Goodbye, ServerHello
from ._config import ConnectionConfig, Role
from ._output import Output
from ._tables import (
    CONNECTION_IGNORED,
    CONNECTION_TRANSITIONS,
    ConnectionInput,
    ConnectionState,
)
from .events import ConnectionTerminated, Event

__all__ = ["Context", "clip"]

_CLOSED = ConnectionState.CLOSED
_CLOSING = ConnectionState.CLOSING
_UNEXPECTED = ErrorCode.UNEXPECTED_MESSAGE


class Context:
    """See the module docstring."""

    __slots__ = (
        "client",
        "close_reason",
        "config",
        "error",
        "events",
        "limits",
        "on_closed",
        "output",
        "peer_hello",
        "role",
        "state",
    )

    def __init__(self, role: Role, config: ConnectionConfig) -> None:
        self.role = role
        self.config = config
        self.limits = config.decode_limits
        self.client = role is Role.CLIENT
        self.state = ConnectionState.AWAITING_HELLO
        #: Run, in order, when the state becomes CLOSED.
        self.on_closed: list[Callable[[], None]] = []
        self.events: list[Event] = []
        self.output = Output(config)
        self.peer_hello: ClientHello | ServerHello | None = None
        self.close_reason = ""  # of our goodbye
        self.error: RemoteProtocolError | None = None

    # -- the connection table: the state changes here only ---------------------
    def transition(self, inp: ConnectionInput) -> ConnectionState | None:
        """Apply the connection table; None (nothing changed) if not allowed."""
        nxt = CONNECTION_TRANSITIONS.get((self.state, inp))
        if nxt is not None:
            self.state = nxt
            if nxt is _CLOSED:
                for closed in self.on_closed:
                    closed()
        return nxt

    def check(self, what: str, inp: ConnectionInput) -> None:
        """A local intent the connection table must allow."""
        if (self.state, inp) not in CONNECTION_TRANSITIONS:
            raise LocalProtocolError(f"{what}: the connection is {self.state.value}")

    def check_send(self, what: str) -> None:
        self.check(what, ConnectionInput.SEND_STREAM)

    def received(self, inp: ConnectionInput, unexpected: str) -> bool:
        """A received message against the connection table: True to handle
        it, False to drop it (an ignored pair); a pair the table lacks is a
        protocol error (``unexpected`` says why). The state changes when the
        handler applies ``transition``."""
        key = (self.state, inp)
        if key not in CONNECTION_TRANSITIONS:
            self.fail(_UNEXPECTED, unexpected)
        return key not in CONNECTION_IGNORED

    # -- the ending by protocol error ---------------------------------------------
    def fail(self, code: ErrorCode, message: str) -> NoReturn:
        """The peer broke the protocol: goodbye (unless ours is already out),
        close, raise."""
        self.raise_error(RemoteProtocolError(message, int(code)))

    def raise_error(self, error: RemoteProtocolError) -> NoReturn:
        """``fail`` with an error raised by the decoder."""
        reason = f"protocol error: {error.message}"
        if self.state is not _CLOSING:
            self.output.send(Goodbye(clip(reason, self.config.max_string_size)))
        self.transition(ConnectionInput.PROTOCOL_ERROR)
        self.error = error
        self.events.append(
            ConnectionTerminated(reason=reason, by_peer=False, error_code=error.error_code)
        )
        raise error


def clip(text: str, limit: int) -> str:
    """Trim ``text`` so that its UTF-8 fits a string limit of ``limit`` bytes."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore")
