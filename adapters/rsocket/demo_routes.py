"""The demo responder's routes (``sansrs serve``): the demo contract
(:mod:`.demo_contract`) behind a :class:`~.routing.Router`, for requests
that carry routing metadata; requests without it get the plain demo
responder, as before (docs/adapters.md, docs/extensions.md).

| route | interaction | answer |
| --- | --- | --- |
| ``echo`` | request-response, stream | the data unchanged (a stream of one) |
| ``echo`` | channel | every payload, data and metadata |
| ``echo``, ``fnf`` | fire-and-forget | counted |
| ``push`` | metadata push | counted, recorded for ``mp-last`` |
| ``fnf-count``, ``mp-count``, ``mp-last``, ``stats`` | request-response | as the contract |
| ``error`` | request-response | APPLICATION_ERROR ``rejected: <data>`` |
| ``stream`` | stream | ``{"n": N, "size": S}``: as the contract |
| ``channel`` | channel | as ``echo`` |
| ``whoami`` | request-response | the principal's name, or ``anonymous`` |

Any other route is an APPLICATION_ERROR naming it. With ``credentials``
(``sansrs serve --auth-simple`` / ``--auth-bearer``) every route but
``whoami`` needs them, in SETUP or in the request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sansrs.rsocket.extensions import Authentication

from .demo import DemoHandler, contract_response, contract_stream
from .demo_contract import CHANNEL_BATCH
from .errors import ApplicationError
from .routing import Router
from .types import Payload, RoutedRequest

__all__ = ["demo_router_factory"]


def demo_router_factory(
    credentials: Iterable[Authentication] = (),
) -> Callable[[Any], Router]:
    """``handler_factory`` for ``serve``: a demo router per connection (the
    contract's counters are per connection), accepting ``credentials``."""
    accepted = list(credentials)

    def authenticate(auth: Authentication) -> str:
        if auth in accepted:
            return getattr(auth, "username", None) or auth.auth_type
        raise ApplicationError("unknown credentials")

    def make(peer: Any) -> Router:
        fallback = DemoHandler(peer)
        return _routes(fallback, authenticate if accepted else None)

    return make


def _routes(fallback: DemoHandler, authenticate: Callable[[Authentication], Any] | None) -> Router:
    state = fallback.state
    router = Router(
        authenticate=authenticate,
        fallback=fallback,
        channel_prefetch=CHANNEL_BATCH,
        channel_batch=CHANNEL_BATCH,
    )

    def echo(request: RoutedRequest) -> Payload:
        state.request_response += 1
        return Payload(request.data)

    def echo_stream(request: RoutedRequest) -> Iterator[bytes]:
        state.request_stream += 1
        yield request.data

    def echo_channel(request: RoutedRequest, inbound: Iterator[Payload]) -> Iterator[Payload]:
        state.request_channel += 1
        yield Payload(request.data)
        yield from inbound

    def count_fnf(request: RoutedRequest) -> None:
        state.record_fire_and_forget()

    router.response("echo")(echo)
    router.stream("echo")(echo_stream)
    router.channel("echo")(echo_channel)
    router.channel("channel")(echo_channel)
    router.fnf("echo")(count_fnf)
    router.fnf("fnf")(count_fnf)
    router.push("push")(lambda request: state.record_metadata_push(request.metadata or b""))
    for name in ("fnf-count", "mp-count", "mp-last", "stats"):
        router.response(name)(
            lambda request, name=name: contract_response(state, name.encode(), None).data
        )
    def error(request: RoutedRequest) -> bytes:
        state.request_response += 1
        raise ApplicationError("rejected: " + request.data.decode("utf-8", "replace"))

    router.response("error")(error)
    router.stream("stream")(lambda request: contract_stream(state, request.data))
    router.response("whoami", authenticated=False)(
        lambda request: str(request.principal or "anonymous").encode()
    )
    return router
