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

__all__ = ["DemoHandler", "contract_response", "contract_stream"]


def contract_response(state: DemoState, data: bytes, metadata: bytes | None) -> Payload:
    """The contract's request-response; a rejection is an APPLICATION_ERROR."""
    try:
        answer, answer_metadata = request_response(state, data, metadata)
    except DemoRejected as exc:
        raise ApplicationError(str(exc)) from None
    return Payload(answer, answer_metadata)


def contract_stream(state: DemoState, data: bytes) -> Iterator[bytes]:
    """The contract's stream (``{"n": N, "size": S}``), counted; a rejection
    is an APPLICATION_ERROR."""
    try:
        n, size = parse_stream_request(data)
    except DemoRejected as exc:
        raise ApplicationError(str(exc)) from None
    state.request_stream += 1
    return stream_items(n, size)


class DemoHandler:
    """One per connection: ``serve(url, handler_factory=DemoHandler)``."""

    #: Channel inbound is requested this many at a time (the contract says 32).
    channel_prefetch = CHANNEL_BATCH
    channel_batch = CHANNEL_BATCH

    def __init__(self, peer: object = None) -> None:
        self.state = DemoState()

    def request_response(self, request: Request) -> Payload:
        return contract_response(self.state, request.data, request.metadata)

    def fire_and_forget(self, request: Request) -> None:
        self.state.record_fire_and_forget()

    def fire_and_forget_many(self, requests: list[Request]) -> None:
        """A run of them, counted at once (``bench_tcp.py`` rows ``fnf16``,
        ``fnf16m``)."""
        self.state.record_fire_and_forget(len(requests))

    def metadata_push(self, metadata: bytes) -> None:
        self.state.record_metadata_push(metadata)

    def request_stream(self, request: Request) -> Iterator[bytes]:
        return contract_stream(self.state, request.data)

    def request_channel(self, request: Request, inbound: Iterator[Payload]) -> Iterator[Payload]:
        """Echo: the first payload, then every inbound one, metadata included."""
        self.state.request_channel += 1
        yield Payload(request.data, request.metadata)
        yield from inbound
