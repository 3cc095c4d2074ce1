"""The demo responder (``sansrs serve``) as an RSocket handler: a thin shell
over the pure behaviour in :mod:`.demo_responder`, one state per connection."""

from __future__ import annotations

from collections.abc import Iterator

from .demo_contract import (
    CHANNEL_BATCH,
    DemoRejected,
    DemoState,
    parse_stream_request,
    request_response,
    stream_items,
)
from .errors import ApplicationError
from .types import Payload, Request

__all__ = ["DemoHandler"]


class DemoHandler:
    """One per connection: ``serve(url, handler_factory=DemoHandler)``."""

    #: Channel inbound is requested this many at a time (the contract says 32).
    channel_prefetch = CHANNEL_BATCH
    channel_batch = CHANNEL_BATCH

    def __init__(self, peer: object = None) -> None:
        self.state = DemoState()

    def request_response(self, request: Request) -> Payload:
        try:
            data, metadata = request_response(self.state, request.data, request.metadata)
        except DemoRejected as exc:
            raise ApplicationError(str(exc)) from None
        return Payload(data, metadata)

    def fire_and_forget(self, request: Request) -> None:
        self.state.record_fire_and_forget()

    def metadata_push(self, metadata: bytes) -> None:
        self.state.record_metadata_push(metadata)

    def request_stream(self, request: Request) -> Iterator[bytes]:
        try:
            n, size = parse_stream_request(request.data)
        except DemoRejected as exc:
            raise ApplicationError(str(exc)) from None
        self.state.request_stream += 1
        return stream_items(n, size)

    def request_channel(self, request: Request, inbound: Iterator[Payload]) -> Iterator[Payload]:
        """Echo: the first payload, then every inbound one, metadata included."""
        self.state.request_channel += 1
        yield Payload(request.data, request.metadata)
        yield from inbound
