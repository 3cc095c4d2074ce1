"""rsocket-py's router (``RequestRouter`` + ``RoutingRequestHandler``) and
its routing client, as an independent peer for the routing interop tests
(tests/adapters/rsocket/interop/test_rsocketpy_routing.py) and benchmarks/bench_extensions.py.
Runs as its own process:

    python benchmarks/rsocketpy_routed_peer.py serve PORT [--auth]
        the demo contract by route (the routes of ``sansrs serve``,
        adapters/rsocket/demo_routes.py) on rsocket-py's router; ``--auth``:
        every request needs simple ann:pw or bearer tok; prints ``READY <port>``
    python benchmarks/rsocketpy_routed_peer.py interop PORT
        rsocket-py's routing client runs every check against a sansrs
        ``serve --auth-simple ann:pw --auth-bearer tok`` and prints one JSON
        object of observations
    python benchmarks/rsocketpy_routed_peer.py bench PORT SCENARIO COUNT [ARG]
        one timed routed client run (``rr`` to route ``echo`` with ARG in
        flight, ``stream`` of COUNT items of ARG bytes from route ``stream``);
        prints ``{"count": ..., "seconds": ...}``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from typing import Any

from reactivestreams.publisher import Publisher
from rsocket.awaitable.awaitable_rsocket import AwaitableRSocket
from rsocket.extensions.authentication import AuthenticationBearer, AuthenticationSimple
from rsocket.extensions.authentication_content import AuthenticationContent
from rsocket.extensions.composite_metadata import CompositeMetadata
from rsocket.extensions.helpers import (
    authenticate_bearer,
    authenticate_simple,
    composite,
    data_mime_type,
    metadata_item,
    route,
)
from rsocket.extensions.mimetypes import WellKnownMimeTypes
from rsocket.helpers import create_future, single_transport_provider
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.routing.request_router import RequestRouter
from rsocket.routing.routing_request_handler import RoutingRequestHandler
from rsocket.rsocket_client import RSocketClient
from rsocket.rsocket_server import RSocketServer
from rsocket.streams.stream_from_generator import StreamFromGenerator
from rsocket.transports.tcp import TransportTCP
from rsocketpy_peer import ChannelEcho, CountingSubscriber, _ListPublisher
from sansrs.adapters.rsocket.demo_contract import (
    DemoRejected,
    DemoState,
    parse_stream_request,
    request_response,
    stream_items,
)

COMPOSITE = WellKnownMimeTypes.MESSAGE_RSOCKET_COMPOSITE_METADATA
ANN = authenticate_simple("ann", "pw")
TOKEN = authenticate_bearer("tok")


def _contract(state: DemoState, data: bytes) -> Any:
    try:
        answer, _ = request_response(state, data, None)
    except DemoRejected as exc:
        raise RuntimeError(str(exc)) from None
    return create_future(Payload(answer))


def make_router(state: DemoState) -> RequestRouter:
    router = RequestRouter()

    @router.response("echo")
    async def echo(payload: Payload) -> Any:
        return create_future(Payload(payload.data))

    @router.response("whoami")
    async def whoami(payload: Payload, composite_metadata: CompositeMetadata) -> Any:
        for item in composite_metadata.items:
            if isinstance(item, AuthenticationContent):
                auth = item.authentication
                if isinstance(auth, AuthenticationSimple):
                    return create_future(Payload(bytes(auth.username)))
                return create_future(Payload(b"bearer"))
        return create_future(Payload(b"anonymous"))

    def counter(name: str) -> Any:
        # rsocket-py passes the payload to every parameter: no default arguments
        async def answer(payload: Payload) -> Any:
            return _contract(state, name.encode())

        return answer

    for name in ("fnf-count", "mp-count", "mp-last", "stats"):
        router.response(name)(counter(name))

    @router.response("error")
    async def error(payload: Payload) -> Any:
        raise RuntimeError("rejected: " + (payload.data or b"").decode())

    @router.stream("stream")
    async def stream(payload: Payload) -> Publisher:
        n, size = parse_stream_request(payload.data or b"")

        def generate() -> Any:
            for i, item in enumerate(stream_items(n, size)):
                yield Payload(item), i == n - 1

        return StreamFromGenerator(generate)

    @router.stream("echo")
    async def echo_stream(payload: Payload) -> Publisher:
        data = payload.data

        def generate() -> Any:
            yield Payload(data), True

        return StreamFromGenerator(generate)

    for name in ("echo", "channel"):

        async def channel(payload: Payload) -> Any:
            echo = ChannelEcho(Payload(payload.data))
            return echo, echo

        router.channel(name)(channel)

    for name in ("echo", "fnf"):

        async def fnf(payload: Payload) -> None:
            state.record_fire_and_forget()

        router.fire_and_forget(name)(fnf)

    @router.metadata_push("push")
    async def push(payload: Payload) -> None:
        state.record_metadata_push(payload.metadata or b"")

    return router


async def verify(route_name: str, authentication: Any) -> None:
    """rsocket-py's authentication hook: ann:pw or the token, else an error."""
    if isinstance(authentication, AuthenticationSimple):
        if authentication.username == b"ann" and authentication.password == b"pw":
            return
    elif isinstance(authentication, AuthenticationBearer) and authentication.token == b"tok":
        return
    raise RuntimeError("unknown credentials")


async def serve(port: int, auth: bool) -> None:
    def handler() -> RoutingRequestHandler:
        return RoutingRequestHandler(make_router(DemoState()), verify if auth else None)

    def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        RSocketServer(TransportTCP(reader, writer), handler_factory=handler)

    server = await asyncio.start_server(session, "127.0.0.1", port)
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


class ConnectionErrors(BaseRequestHandler):
    """A client handler that records ERROR frames on stream 0 (a rejected SETUP)."""

    seen: list[list[Any]] = []
    arrived: asyncio.Event | None = None

    async def on_error(self, error_code: Any, payload: Payload) -> None:
        self.seen.append([int(error_code), (payload.data or b"").decode()])
        if ConnectionErrors.arrived is not None:
            ConnectionErrors.arrived.set()


async def _connect(port: int, setup_metadata: bytes | None = None) -> Any:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    setup = Payload(metadata=setup_metadata) if setup_metadata is not None else None
    return RSocketClient(
        single_transport_provider(TransportTCP(reader, writer)),
        handler_factory=ConnectionErrors,
        metadata_encoding=COMPOSITE,
        data_encoding=WellKnownMimeTypes.APPLICATION_OCTET_STREAM,
        setup_payload=setup,
    )


def _error(exc: BaseException) -> list[Any]:
    code = getattr(exc, "error_code", 0x201)
    message = getattr(exc, "data", None) or str(exc)
    return [int(code), message]


async def interop(port: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with await _connect(port) as client:
        rs = AwaitableRSocket(client)
        echo = composite(route("echo"), ANN)
        out["rr"] = (await rs.request_response(Payload(b"hello", echo))).data.decode()
        out["whoami"] = (
            await rs.request_response(Payload(b"", composite(route("whoami"), TOKEN)))
        ).data.decode()
        typed = composite(route("echo"), ANN, data_mime_type(WellKnownMimeTypes.APPLICATION_JSON))
        out["typed"] = (await rs.request_response(Payload(b"{}", typed))).data.decode()
        for _ in range(3):
            await rs.fire_and_forget(Payload(b"f", composite(route("fnf"), ANN)))
        count = composite(route("fnf-count"), ANN)
        out["fnf_count"] = (await rs.request_response(Payload(b"", count))).data.decode()
        await rs.metadata_push(composite(route("push"), ANN, metadata_item(b"p1", b"text/plain")))
        mp = composite(route("mp-count"), ANN)
        out["mp_count"] = (await rs.request_response(Payload(b"", mp))).data.decode()
        request = json.dumps({"n": 100, "size": 4}).encode()
        items = await rs.request_stream(Payload(request, composite(route("stream"), TOKEN)))
        out["stream"] = [len(items), items[0].data.decode(), items[-1].data.decode()]
        payloads = [Payload(b"c0", composite(route("channel"), ANN))] + [
            Payload(b"c%d" % i) for i in range(1, 50)
        ]
        replies = await rs.request_channel(payloads[0], _ListPublisher(payloads[1:]))
        out["channel"] = [p.data.decode() for p in replies]
        errors: dict[str, Any] = {}
        for name, metadata in (
            ("unknown_route", composite(route("no.such"), ANN)),
            ("wrong_password", composite(route("echo"), authenticate_simple("ann", "bad"))),
            ("no_credentials", composite(route("echo"))),
            ("malformed", composite(route("echo"), ANN) + b"\xab\x00\x00\x00"),
            ("wrong_model", composite(route("stream"), ANN)),
        ):
            try:
                await rs.request_response(Payload(b"x", metadata))
                errors[name] = None
            except Exception as exc:
                errors[name] = _error(exc)
        out["errors"] = errors
        # the connection is still usable after every error
        out["after_errors"] = (await rs.request_response(Payload(b"still", echo))).data.decode()
    ConnectionErrors.arrived = arrived = asyncio.Event()
    # Wrong credentials in SETUP: the server answers ERROR[REJECTED_SETUP] on
    # stream 0 and closes. No request is sent meanwhile: one failing as the
    # connection closes could make rsocket-py stop reading before the ERROR
    # frame reaches the handler (a race under load).
    with contextlib.suppress(Exception):
        async with await _connect(port, composite(authenticate_simple("ann", "bad"))):
            await asyncio.wait_for(arrived.wait(), 30)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(arrived.wait(), 1)
    out["setup_rejected"] = ConnectionErrors.seen
    return out


async def bench(port: int, scenario: str, count: int, arg: int) -> dict[str, float]:
    async with await _connect(port) as client:
        rs = AwaitableRSocket(client)
        start = time.perf_counter()
        if scenario == "stream":
            sub = CountingSubscriber(128)
            request = json.dumps({"n": count, "size": arg}).encode()
            payload = Payload(request, composite(route("stream")))
            client.request_stream(payload).initial_request_n(256).subscribe(sub)
            await sub.done.wait()
            done = sub.count
        elif scenario == "rr":
            in_flight = max(1, arg)
            done = 0
            echo = composite(route("echo"))

            async def worker(n: int) -> None:
                nonlocal done
                for _ in range(n):
                    await rs.request_response(Payload(b"x" * 16, echo))
                    done += 1

            per = count // in_flight
            await asyncio.gather(*(worker(per) for _ in range(in_flight)))
        else:
            raise SystemExit(f"unknown scenario {scenario}")
        seconds = time.perf_counter() - start
    return {"count": done, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("port", type=int)
    s.add_argument("--auth", action="store_true")
    i = sub.add_parser("interop")
    i.add_argument("port", type=int)
    b = sub.add_parser("bench")
    b.add_argument("port", type=int)
    b.add_argument("scenario", choices=["stream", "rr"])
    b.add_argument("count", type=int)
    b.add_argument("arg", type=int, nargs="?", default=16)
    args = parser.parse_args()
    if args.command == "serve":
        asyncio.run(serve(args.port, args.auth))
    elif args.command == "interop":
        print(json.dumps(asyncio.run(interop(args.port))), flush=True)
    else:
        print(json.dumps(asyncio.run(bench(args.port, args.scenario, args.count, args.arg))))


if __name__ == "__main__":
    main()
