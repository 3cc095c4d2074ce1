"""The plumbing every part of one RSocket connection shares.

A ``Connection`` is composed of parts (``StreamTable``, ``Receiver``,
``StreamFrames``, ``Fragmenter``, ``Keepalive``, ``Leases``,
``Resumption``); each gets the ``Context`` of its connection and the
parts it works with. The context holds what belongs to no single part:

- the connection state machine (``state``, run by ``transition`` from
  ``CONNECTION_TRANSITIONS``) and what parts do when it closes
  (``on_closed``);
- the clock (``now``, anchored at the first reading: ``on_clock``);
- the events produced so far (``events``);
- the bytes each way: ``output`` (``Output``) and the input not yet parsed
  (``inbuf``, ``need``, ``received_position``);
- the SETUP (``setup``, ``setup_confirmed``) and how the connection ended
  (``error``, ``close_message``, ``close_by_peer``);
- the endings every part may cause: ``end`` (an ERROR on stream 0, either
  way), ``lose`` (no closing ERROR), ``fail`` (the peer broke the
  protocol), ``refuse`` (a SETUP or RESUME rejected), ``begin_close`` /
  ``finish_close`` (a graceful close).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from .._errors import LocalProtocolError, RemoteProtocolError
from ._config import ConnectionConfig, Role
from ._frames import ErrorCode, KeepaliveFrame, SetupFrame
from ._output import Output
from ._state import CONNECTION_TRANSITIONS, ConnectionInput, ConnectionState
from .events import ConnectionClosing, ConnectionLost, ConnectionTerminated, Event

__all__ = ["Context"]

_CLOSED = ConnectionState.CLOSED
_CLOSING = ConnectionState.CLOSING
_ESTABLISHED = ConnectionState.ESTABLISHED


class Context:
    """See the module docstring."""

    __slots__ = (
        "client",
        "clock_known",
        "close_by_peer",
        "close_message",
        "config",
        "error",
        "events",
        "inbuf",
        "need",
        "now",
        "on_clock",
        "on_closed",
        "output",
        "received_position",
        "role",
        "setup",
        "setup_confirmed",
        "state",
    )

    def __init__(self, role: Role, config: ConnectionConfig) -> None:
        self.role = role
        self.config = config
        self.client = role is Role.CLIENT
        self.state = ConnectionState.AWAITING_SETUP
        #: Run, in order, when the state becomes CLOSED.
        self.on_closed: list[Callable[[], None]] = []
        #: Run once, with the first ``now`` seen.
        self.on_clock: list[Callable[[float], None]] = []
        self.now = 0.0
        self.clock_known = False
        self.events: list[Event] = []
        self.output = Output(config)
        # Partial frame received so far, and the bytes it needs to complete.
        self.inbuf = bytearray()
        self.need = 3
        #: Bytes of the positioned frames (``_frames.POSITIONED``) received.
        self.received_position = 0
        self.setup: SetupFrame | None = None  # sent (client) or received (server)
        self.setup_confirmed = False  # client: the server showed it accepted SETUP
        self.error: RemoteProtocolError | None = None
        self.close_message = ""
        self.close_by_peer = False

    # ------------------------------------------------------------------
    # state

    def transition(self, inp: ConnectionInput) -> None:
        nxt = CONNECTION_TRANSITIONS.get((self.state, inp))
        if nxt is None:  # pragma: no cover - guarded by every caller
            raise LocalProtocolError(f"{inp.value} not allowed in state {self.state.value}")
        self.state = nxt
        if nxt is _CLOSED:
            for closed in self.on_closed:
                closed()

    def check_open(self, what: str) -> None:
        if self.state is _CLOSED:
            raise LocalProtocolError(f"{what}: the connection is closed")

    def check_can_request(self, what: str) -> None:
        state = self.state
        if state is not _ESTABLISHED:
            if state is _CLOSING:
                raise LocalProtocolError(f"{what}: the connection is closing")
            if state is _CLOSED:
                raise LocalProtocolError(f"{what}: the connection is closed")
            raise LocalProtocolError(f"{what}: the connection is not established yet")

    # ------------------------------------------------------------------
    # clock

    def observe(self, now: float) -> None:
        if not self.clock_known:
            self.clock_known = True
            for anchor in self.on_clock:
                anchor(now)
        if now > self.now:
            self.now = now

    # ------------------------------------------------------------------
    # input and output

    def drop_input(self) -> None:
        """Forget a partial frame (it was not received: spec: Implied Position)."""
        self.inbuf.clear()
        self.need = 3

    def queue_keepalive_request(self, data: bytes = b"") -> None:
        """KEEPALIVE with R, carrying our received position."""
        self.output.queue(KeepaliveFrame(True, self.received_position, data))

    # ------------------------------------------------------------------
    # endings

    def end(self, inp: ConnectionInput, code: int, message: str, *, by_peer: bool) -> None:
        """The connection ends by an ERROR on stream 0 (sent or received):
        ``inp`` closes it, ``ConnectionTerminated`` says how."""
        self.transition(inp)
        self.events.append(ConnectionTerminated(error_code=code, message=message, by_peer=by_peer))

    def lose(self, inp: ConnectionInput, reason: str, *, timed_out: bool) -> None:
        """The connection ends without a closing ERROR: ``ConnectionLost``."""
        self.transition(inp)
        self.events.append(ConnectionLost(reason=reason, timed_out=timed_out))

    def fail(self, code: int, message: str) -> NoReturn:
        """The peer broke the protocol: queue ERROR, close, raise."""
        self.output.queue_error(0, code, message)
        self.end(ConnectionInput.FATAL, code, message, by_peer=False)
        self.error = RemoteProtocolError(message, code)
        raise RemoteProtocolError(message, code)

    def raise_after_failure(self) -> None:
        """Input after the connection closed: the same error again, if any."""
        if self.error is not None:
            raise RemoteProtocolError(self.error.message, self.error.error_code)

    def refuse(self, code: int, message: str) -> None:
        """Refuse a SETUP or a RESUME with ERROR[code]: the connection closes."""
        self.output.queue_error(0, code, message)
        self.end(ConnectionInput.REJECT, code, message, by_peer=False)

    def begin_close(self, message: str, by_peer: bool, *, drained: bool) -> None:
        """CONNECTION_CLOSE sent or received: no new streams; ``drained``:
        no stream is open, so the close completes at once."""
        self.close_message = message
        self.close_by_peer = by_peer
        self.transition(ConnectionInput.CLOSE)
        if by_peer:
            self.events.append(ConnectionClosing(message=message))
        if drained:
            self.finish_close()

    def finish_close(self) -> None:
        """The last stream of a closing connection ended."""
        self.end(
            ConnectionInput.DRAINED,
            ErrorCode.CONNECTION_CLOSE,
            self.close_message,
            by_peer=self.close_by_peer,
        )
