"""rsocket-py (PyPI ``rsocket``, asyncio) as an independent peer, for the
interop tests and bench_tcp.py. Runs as its own process:

    python benchmarks/rsocketpy_peer.py serve PORT [--lease] [--ws PATH]
        the demo responder contract (adapters/rsocket/demo_contract.py) served by
        rsocket-py; prints ``READY <port>``
    python benchmarks/rsocketpy_peer.py interop PORT [--fragment BYTES] [--lease] [--ws PATH]
        rsocket-py as a client runs every interop check against a demo
        responder on PORT and prints one JSON object of observations
    python benchmarks/rsocketpy_peer.py bench PORT SCENARIO COUNT [ARG] [--ws PATH]
        one timed client run; prints ``{"count": ..., "seconds": ...}``

``--ws PATH``: RSocket over WebSocket at ``ws://127.0.0.1:PORT/PATH`` with
rsocket-py's aiohttp transport instead of TCP. aiohttp limits messages to
4 MiB by default; the peer lifts that limit (``max_msg_size=0``) so that a
5 MiB frame travels unfragmented, as over TCP.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from reactivestreams.publisher import DefaultPublisher, Publisher
from reactivestreams.subscriber import Subscriber
from reactivestreams.subscription import Subscription
from rsocket.awaitable.awaitable_rsocket import AwaitableRSocket
from rsocket.helpers import create_future, single_transport_provider
from rsocket.lease import SingleLeasePublisher
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.rsocket_client import RSocketClient
from rsocket.rsocket_server import RSocketServer
from rsocket.streams.stream_from_generator import StreamFromGenerator
from rsocket.transports.tcp import TransportTCP
from sansrs.adapters.rsocket.demo_contract import (
    CHANNEL_BATCH,
    DemoRejected,
    DemoState,
    parse_stream_request,
    request_response,
    stream_items,
)

LEASE_TTL = timedelta(seconds=60)
LEASE_REQUESTS = 1_000_000


class ChannelEcho(DefaultPublisher, Subscription, Subscriber):
    """Echoes a channel's inbound (first payload included), pulling it 32 at a time."""

    def __init__(self, first: Payload) -> None:
        self._pending: deque[Payload] = deque([first])
        self._credit = 0
        self._inbound: Subscription | None = None
        self._received = 0
        self._inbound_done = False
        self._finished = False

    # outbound Publisher + its Subscription
    def subscribe(self, subscriber: Subscriber) -> None:
        super().subscribe(subscriber)
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        self._credit += n
        self._drain()

    def cancel(self) -> None:
        self._finished = True
        if self._inbound is not None:
            self._inbound.cancel()

    # inbound Subscriber
    def on_subscribe(self, subscription: Subscription) -> None:
        self._inbound = subscription
        subscription.request(CHANNEL_BATCH)

    def on_next(self, value: Payload, is_complete: bool = False) -> None:
        self._pending.append(value)
        self._received += 1
        if self._received % CHANNEL_BATCH == 0 and not is_complete and self._inbound:
            self._inbound.request(CHANNEL_BATCH)
        if is_complete:
            self._inbound_done = True
        self._drain()

    def on_complete(self) -> None:
        self._inbound_done = True
        self._drain()

    def on_error(self, exception: Exception) -> None:
        if not self._finished:
            self._finished = True
            self._subscriber.on_error(exception)

    def _drain(self) -> None:
        while self._credit > 0 and self._pending and not self._finished:
            self._credit -= 1
            payload = self._pending.popleft()
            last = self._inbound_done and not self._pending
            self._subscriber.on_next(payload, last)
            if last:
                self._finished = True
        if self._inbound_done and not self._pending and not self._finished:
            self._finished = True
            self._subscriber.on_complete()


class DemoHandler(BaseRequestHandler):
    def __init__(self) -> None:
        self.state = DemoState()

    async def request_response(self, payload: Payload) -> Any:
        try:
            data, metadata = request_response(self.state, payload.data or b"", payload.metadata)
        except DemoRejected as exc:
            raise RuntimeError(str(exc)) from None
        return create_future(Payload(data, metadata))

    async def request_fire_and_forget(self, payload: Payload) -> None:
        self.state.record_fire_and_forget()

    async def on_metadata_push(self, payload: Payload) -> None:
        self.state.record_metadata_push(payload.metadata or b"")

    async def request_stream(self, payload: Payload) -> Publisher:
        n, size = parse_stream_request(payload.data or b"")
        self.state.request_stream += 1

        def generate() -> Any:
            for i, item in enumerate(stream_items(n, size)):
                yield Payload(item), i == n - 1

        return StreamFromGenerator(generate)

    async def request_channel(self, payload: Payload) -> tuple[Publisher, Subscriber]:
        self.state.request_channel += 1
        echo = ChannelEcho(payload)
        return echo, echo


def _server_options(lease: bool) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"handler_factory": DemoHandler}
    if lease:
        kwargs["lease_publisher"] = SingleLeasePublisher(
            maximum_lease_time=LEASE_TTL, maximum_request_count=LEASE_REQUESTS
        )
    return kwargs


async def serve_ws(port: int, lease: bool, path: str) -> None:
    """rsocket-py's aiohttp WebSocket server (``websocket_handler_factory``,
    with aiohttp's message size limit lifted)."""
    from aiohttp import web
    from rsocket.transports.aiohttp_websocket import TransportAioHttpWebsocket

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        transport = TransportAioHttpWebsocket(ws)
        RSocketServer(transport, **_server_options(lease))
        await transport.handle_incoming_ws_messages()
        return ws

    app = web.Application()
    app.add_routes([web.get(path, handler)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    server = site._server
    assert server is not None and server.sockets
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


async def serve(port: int, lease: bool, ws_path: str | None = None) -> None:
    if ws_path is not None:
        await serve_ws(port, lease, ws_path)
        return

    def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        RSocketServer(TransportTCP(reader, writer), **_server_options(lease))

    server = await asyncio.start_server(session, "127.0.0.1", port)
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


@asynccontextmanager
async def _client(
    port: int, fragment: int | None = None, lease: bool = False, ws_path: str | None = None
) -> AsyncIterator[RSocketClient]:
    """An rsocket-py client over TCP, or over WebSocket with its aiohttp
    transport (on a socket we open, to lift aiohttp's 4 MiB message limit)."""
    options: dict[str, Any] = {"fragment_size_bytes": fragment, "honor_lease": lease}
    if ws_path is None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        transport: Any = TransportTCP(reader, writer)
        async with RSocketClient(single_transport_provider(transport), **options) as client:
            yield client
        return
    import aiohttp
    from rsocket.transports.aiohttp_websocket import TransportAioHttpClient

    async with aiohttp.ClientSession() as session, session.ws_connect(
        f"ws://127.0.0.1:{port}{ws_path}", max_msg_size=0
    ) as ws:
        transport = TransportAioHttpClient(websocket=ws)
        async with RSocketClient(single_transport_provider(transport), **options) as client:
            yield client


class CountingSubscriber(Subscriber):
    """Counts a stream's items, asking for ``batch`` more after every ``batch``."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.count = 0
        self.since = 0
        self.done = asyncio.Event()
        self.error: Exception | None = None
        self.items: list[bytes] = []
        self.keep = False
        self.subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def on_next(self, value: Payload, is_complete: bool = False) -> None:
        self.count += 1
        if self.keep:
            self.items.append(value.data)
        self.since += 1
        if is_complete:
            self.done.set()
        elif self.since == self.batch and self.subscription is not None:
            self.since = 0
            self.subscription.request(self.batch)

    def on_error(self, exception: Exception) -> None:
        self.error = exception
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


async def bench(
    port: int, scenario: str, count: int, arg: int, ws_path: str | None = None
) -> dict[str, float]:
    async with _client(port, ws_path=ws_path) as client:
        rs = AwaitableRSocket(client)
        start = time.perf_counter()
        if scenario == "stream":
            sub = CountingSubscriber(128)
            request = json.dumps({"n": count, "size": arg}).encode()
            client.request_stream(Payload(request)).initial_request_n(256).subscribe(sub)
            await sub.done.wait()
            done = sub.count
        elif scenario == "rr":
            in_flight = max(1, arg)
            done = 0

            async def worker(n: int) -> None:
                nonlocal done
                for _ in range(n):
                    await rs.request_response(Payload(b"x" * 16))
                    done += 1

            per = count // in_flight
            await asyncio.gather(*(worker(per) for _ in range(in_flight)))
        elif scenario == "fnf":
            for i in range(count):
                client.fire_and_forget(Payload(b"x" * 16))
                if i % 1024 == 0:
                    await asyncio.sleep(0)
            while int((await rs.request_response(Payload(b"fnf-count"))).data) < count:
                await asyncio.sleep(0.001)
            done = count
        else:
            raise SystemExit(f"unknown scenario {scenario}")
        seconds = time.perf_counter() - start
    return {"count": done, "seconds": seconds}


async def interop(
    port: int, fragment: int | None, lease: bool, ws_path: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with _client(port, fragment, lease, ws_path) as client:
        rs = AwaitableRSocket(client)
        reply = await rs.request_response(Payload(b"hello", b"meta"))
        out["rr"] = [reply.data.decode(), (reply.metadata or b"").decode()]
        for _ in range(3):
            await rs.fire_and_forget(Payload(b"fnf"))
        out["fnf_count"] = (await rs.request_response(Payload(b"fnf-count"))).data.decode()
        await rs.metadata_push(b"pushed-1")
        await rs.metadata_push(b"pushed-2")
        out["mp_count"] = (await rs.request_response(Payload(b"mp-count"))).data.decode()
        out["mp_last"] = (await rs.request_response(Payload(b"mp-last"))).data.decode()
        try:
            await rs.request_response(Payload(b"error please"))
            out["error"] = None
        except Exception as exc:
            out["error"] = [type(exc).__name__, str(exc)]
        sub = CountingSubscriber(32)
        sub.keep = True
        request = json.dumps({"n": 1000, "size": 8}).encode()
        client.request_stream(Payload(request)).initial_request_n(32).subscribe(sub)
        await asyncio.wait_for(sub.done.wait(), 30)
        out["stream"] = [sub.count, sub.items[0].decode(), sub.items[-1].decode()]
        payloads = [Payload(b"c%d" % i, b"m%d" % i) for i in range(100)]
        reply_items = await rs.request_channel(payloads[0], _ListPublisher(payloads[1:]))
        out["channel"] = [[p.data.decode(), (p.metadata or b"").decode()] for p in reply_items]
        big = bytes(range(256)) * (5 * 1024 * 1024 // 256)
        reply = await rs.request_response(Payload(big, b"big"))
        out["big_ok"] = reply.data == big and reply.metadata == b"big"
        out["stats"] = json.loads((await rs.request_response(Payload(b"stats"))).data)
    return out


class _ListPublisher(DefaultPublisher, Subscription):
    """Sends a list as a channel's outbound, within the demand it receives."""

    def __init__(self, items: list[Payload]) -> None:
        self._items = deque(items)

    def subscribe(self, subscriber: Subscriber) -> None:
        super().subscribe(subscriber)
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        while n > 0 and self._items:
            n -= 1
            item = self._items.popleft()
            self._subscriber.on_next(item, not self._items)
        if not self._items:
            pass  # completion travelled with the last item

    def cancel(self) -> None:
        self._items.clear()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("port", type=int)
    s.add_argument("--lease", action="store_true")
    s.add_argument("--ws", metavar="PATH", default=None, help="serve over WebSocket at PATH")
    i = sub.add_parser("interop")
    i.add_argument("port", type=int)
    i.add_argument("--fragment", type=int, default=None)
    i.add_argument("--lease", action="store_true")
    i.add_argument("--ws", metavar="PATH", default=None, help="connect over WebSocket to PATH")
    b = sub.add_parser("bench")
    b.add_argument("port", type=int)
    b.add_argument("scenario", choices=["stream", "rr", "fnf"])
    b.add_argument("count", type=int)
    b.add_argument("arg", type=int, nargs="?", default=16)
    b.add_argument("--ws", metavar="PATH", default=None, help="connect over WebSocket to PATH")
    args = parser.parse_args()
    from raw_peer import settle_allocator  # this script's folder is on sys.path

    settle_allocator()  # as every benchmark process (see raw_peer.py)
    if args.command == "serve":
        asyncio.run(serve(args.port, args.lease, args.ws))
    elif args.command == "interop":
        result = asyncio.run(interop(args.port, args.fragment, args.lease, args.ws))
        print(json.dumps(result), flush=True)
    else:
        result = asyncio.run(bench(args.port, args.scenario, args.count, args.arg, args.ws))
        print(json.dumps(result))


if __name__ == "__main__":
    main()
