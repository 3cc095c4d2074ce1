"""Connection establishment (spec: Connection Establishment): the client's
SETUP, the server's acceptance or refusal of it. One part of
:class:`~._connection.Connection` (docs/rsocket.md, "How the connection is
built").

* The client's SETUP is checked before anything is queued: the intervals
  are 1..2**31-1 ms, a resume token (R flag) comes from
  ``config.resume_token_source`` and is 1..65535 bytes; encoding the frame
  checks the MIME types and sizes. Requests may follow at once.
* The server accepts a SETUP that awaits acceptance (the first LEASE goes
  out with it when the client set L: it is mandatory then), then processes
  the frames the client pipelined behind it; or refuses it with one of the
  SETUP rejection codes, which closes the connection.
"""

from __future__ import annotations

from collections.abc import Callable

from .._errors import LocalProtocolError
from . import _frames as fr
from ._context import Context
from ._frames import MAJOR_VERSION, MAX_U31, MINOR_VERSION, REJECT_SETUP_CODES
from ._keepalive import Keepalive
from ._lease import Leases
from ._receive import Receiver
from ._resume import Resumption
from ._state import ConnectionInput, ConnectionState

__all__ = ["Establishment"]


class Establishment:
    """SETUP sent (client), accepted or refused (server)."""

    __slots__ = ("_ctx", "_keepalive", "_leases", "_receiver", "_resume")

    def __init__(
        self,
        ctx: Context,
        keepalive: Keepalive,
        leases: Leases,
        resume: Resumption,
        receiver: Receiver,
    ) -> None:
        self._ctx = ctx
        self._keepalive = keepalive
        self._leases = leases
        self._resume = resume
        self._receiver = receiver

    def setup(
        self,
        keepalive_interval: int,
        max_lifetime: int,
        metadata_mime_type: str,
        data_mime_type: str,
        data: bytes,
        metadata: bytes | None,
        *,
        lease: bool,
        resume: bool,
    ) -> None:
        ctx = self._ctx
        if not ctx.client:
            raise LocalProtocolError("setup: only a client sends SETUP")
        if ctx.state is not ConnectionState.AWAITING_SETUP:
            raise LocalProtocolError("setup: SETUP was already sent")
        for name, value in (
            ("keepalive_interval", keepalive_interval),
            ("max_lifetime", max_lifetime),
        ):
            if type(value) is not int or not 1 <= value <= MAX_U31:
                raise LocalProtocolError(f"setup: {name} must be in 1..2**31-1 ms, got {value!r}")
        token = None
        if resume:
            token = ctx.config.resume_token_source()
            if type(token) is not bytes or not 1 <= len(token) <= 0xFFFF:
                raise LocalProtocolError("setup: resume_token_source must return 1..65535 bytes")
        frame = fr.SetupFrame(
            keepalive_interval,
            max_lifetime,
            metadata_mime_type,
            data_mime_type,
            metadata,
            data,
            token,
            lease,
            MAJOR_VERSION,
            MINOR_VERSION,
        )
        ctx.output.queue(frame)  # encoding validates the MIME types and sizes
        ctx.setup = frame
        if token is not None:
            self._resume.start(token)
        self._leases.enabled = lease
        self._keepalive.start(keepalive_interval, max_lifetime, sends=True)
        ctx.transition(ConnectionInput.SEND_SETUP)

    def accept(
        self,
        lease_ttl: int | None,
        lease_number: int | None,
        send_lease: Callable[[int, int], None],
    ) -> None:
        ctx = self._ctx
        if ctx.state is not ConnectionState.SETUP_RECEIVED:
            raise LocalProtocolError("accept_setup: no SETUP awaits acceptance")
        setup = ctx.setup
        assert setup is not None
        if setup.lease and (lease_ttl is None or lease_number is None):
            raise LocalProtocolError(
                "accept_setup: the client asked for leases; lease_ttl and lease_number are required"
            )
        ctx.transition(ConnectionInput.ACCEPT)
        self._keepalive.start(setup.keepalive_interval, setup.max_lifetime, sends=False)
        if setup.lease:
            assert lease_ttl is not None and lease_number is not None
            send_lease(lease_ttl, lease_number)
        self._receiver.process(self._receiver.take_early())

    def reject(self, error_code: int, message: str) -> None:
        if self._ctx.state is not ConnectionState.SETUP_RECEIVED:
            raise LocalProtocolError("reject_setup: no SETUP awaits acceptance")
        if error_code not in REJECT_SETUP_CODES:
            raise LocalProtocolError(f"reject_setup: {error_code:#x} is not a SETUP rejection code")
        self._ctx.refuse(error_code, message)
