"""Record the committed rsocket-py traces in tests/traces/ (a script, not a test).

    .venv/bin/python tests/tools/record_traces.py [--out DIR] [--only NAME ...]

For each exchange, an rsocket-py (PyPI ``rsocket``, asyncio, TCP transport)
server and client talk on loopback through ``sansrs.adapters.tools.capture`` and
the proxy writes one trace: ``<name>.rstrace``. Keepalives are set far apart
so the traces hold only the exchange. tests/trace/test_traces.py replays
every file and checks the frame types each exchange must contain.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

from reactivestreams.publisher import DefaultPublisher, Publisher
from reactivestreams.subscriber import Subscriber
from reactivestreams.subscription import Subscription
from rsocket.helpers import create_future, single_transport_provider
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.rsocket_client import RSocketClient
from rsocket.rsocket_server import RSocketServer
from rsocket.streams.stream_from_generator import StreamFromGenerator
from rsocket.transports.tcp import TransportTCP
from sansrs.adapters.tools.capture import CaptureProxy

TRACES = Path(__file__).resolve().parent.parent / "traces"
KEEPALIVE = timedelta(seconds=30)
KEEPALIVE_SHORT = timedelta(milliseconds=100)
#: rsocket-py's minimum fragment size; small so a ~600-byte payload fragments.
FRAGMENT = 64
TIMEOUT = 10.0


class Handler(BaseRequestHandler):
    """Server side of every exchange; events tell the script what arrived."""

    def __init__(self, events: dict[str, asyncio.Event]) -> None:
        super().__init__()
        self.events = events

    async def request_response(self, payload: Payload) -> Any:
        if payload.data == b"fail":
            raise RuntimeError("requested failure")
        return create_future(Payload(b"echo:" + (payload.data or b""), payload.metadata))

    async def request_fire_and_forget(self, payload: Payload) -> None:
        self.events["fnf"].set()

    async def on_metadata_push(self, payload: Payload) -> None:
        self.events["metadata_push"].set()

    async def request_stream(self, payload: Payload) -> Publisher:
        count = int(payload.data or b"3")

        def generate() -> Any:
            for i in range(count):
                yield Payload(b"item-%d" % i), i == count - 1

        return StreamFromGenerator(generate)

    async def request_channel(self, payload: Payload) -> tuple[Publisher, Subscriber]:
        echo = _ChannelEcho(payload)
        return echo, echo


class _ChannelEcho(DefaultPublisher, Subscription, Subscriber):  # type: ignore[misc]
    """Echoes the channel's inbound payloads (the first included), 2 at a time."""

    def __init__(self, first: Payload) -> None:
        self._pending = [Payload(b"re:" + (first.data or b""))]
        self._credit = 0
        self._inbound: Subscription | None = None
        self._inbound_done = False
        self._finished = False

    def subscribe(self, subscriber: Subscriber) -> None:
        super().subscribe(subscriber)
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        self._credit += n
        self._drain()

    def cancel(self) -> None:
        self._finished = True

    def on_subscribe(self, subscription: Subscription) -> None:
        self._inbound = subscription
        subscription.request(2)

    def on_next(self, value: Payload, is_complete: bool = False) -> None:
        self._pending.append(Payload(b"re:" + (value.data or b"")))
        if is_complete:
            self._inbound_done = True
        elif self._inbound is not None:
            self._inbound.request(1)
        self._drain()

    def on_complete(self) -> None:
        self._inbound_done = True
        self._drain()

    def on_error(self, exception: Exception) -> None:
        self._finished = True

    def _drain(self) -> None:
        while self._credit > 0 and self._pending and not self._finished:
            self._credit -= 1
            item = self._pending.pop(0)
            last = self._inbound_done and not self._pending
            self._subscriber.on_next(item, last)
            if last:
                self._finished = True


class _ListPublisher(DefaultPublisher, Subscription):  # type: ignore[misc]
    """A channel's outbound: a fixed list, sent within the demand received."""

    def __init__(self, items: list[Payload]) -> None:
        self._items = list(items)

    def subscribe(self, subscriber: Subscriber) -> None:
        super().subscribe(subscriber)
        subscriber.on_subscribe(self)

    def request(self, n: int) -> None:
        while n > 0 and self._items:
            n -= 1
            item = self._items.pop(0)
            self._subscriber.on_next(item, not self._items)

    def cancel(self) -> None:
        self._items.clear()


class _Collect(Subscriber):  # type: ignore[misc]
    """Collects a stream, asking for ``batch`` items at a time (REQUEST_N frames)."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.items: list[bytes] = []
        self.done = asyncio.Event()
        self.error: Exception | None = None
        self._since = 0
        self._subscription: Subscription | None = None

    def on_subscribe(self, subscription: Subscription) -> None:
        self._subscription = subscription

    def on_next(self, value: Payload, is_complete: bool = False) -> None:
        self.items.append(value.data)
        self._since += 1
        if is_complete:
            self.done.set()
        elif self._since == self.batch and self._subscription is not None:
            self._since = 0
            self._subscription.request(self.batch)

    def on_error(self, exception: Exception) -> None:
        self.error = exception
        self.done.set()

    def on_complete(self) -> None:
        self.done.set()


class _CancelAfterOne(_Collect):
    """Takes one item of an endless stream, then cancels (a CANCEL frame)."""

    def on_next(self, value: Payload, is_complete: bool = False) -> None:
        self.items.append(value.data)
        if self._subscription is not None and len(self.items) == 1:
            self._subscription.cancel()
            self.done.set()


Exchange = Callable[[RSocketClient, dict[str, asyncio.Event]], Awaitable[dict[str, Any]]]


async def request_response(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    reply = await client.request_response(Payload(b"hello", b"meta"))
    assert reply.data == b"echo:hello", reply
    return {"description": "one REQUEST_RESPONSE with metadata, answered by PAYLOAD(N|C)"}


async def fire_and_forget(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    await client.fire_and_forget(Payload(b"fire"))
    await asyncio.wait_for(ev["fnf"].wait(), TIMEOUT)
    return {"description": "one REQUEST_FNF, no answer"}


async def request_stream(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    sub = _Collect(batch=2)
    client.request_stream(Payload(b"5")).initial_request_n(2).subscribe(sub)
    await asyncio.wait_for(sub.done.wait(), TIMEOUT)
    assert sub.error is None and len(sub.items) == 5, (sub.error, sub.items)
    return {"description": "REQUEST_STREAM n=2 for 5 items; REQUEST_N 2 after every 2 items"}


async def request_channel(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    outbound = _ListPublisher([Payload(b"c1"), Payload(b"c2")])
    sub = _Collect(batch=2)
    client.request_channel(Payload(b"c0"), outbound).initial_request_n(2).subscribe(sub)
    await asyncio.wait_for(sub.done.wait(), TIMEOUT)
    assert sub.error is None and len(sub.items) == 3, (sub.error, sub.items)
    return {"description": "REQUEST_CHANNEL c0 then c1, c2 (C on the last); server echoes 3"}


async def metadata_push(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    await client.metadata_push(b"pushed-metadata")
    await asyncio.wait_for(ev["metadata_push"].wait(), TIMEOUT)
    return {"description": "one METADATA_PUSH on stream 0"}


async def application_error(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    try:
        await client.request_response(Payload(b"fail"))
    except Exception as exc:  # rsocket-py raises its RSocketApplicationError
        return {
            "description": "REQUEST_RESPONSE answered by ERROR[APPLICATION_ERROR]",
            "client_saw": type(exc).__name__,
        }
    raise AssertionError("the request did not fail")


async def cancel(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    sub = _CancelAfterOne(batch=1)
    client.request_stream(Payload(b"1000")).initial_request_n(1).subscribe(sub)
    await asyncio.wait_for(sub.done.wait(), TIMEOUT)
    # A request-response after the cancel proves the server processed it in order.
    await client.request_response(Payload(b"after-cancel"))
    return {"description": "REQUEST_STREAM n=1, one PAYLOAD, then CANCEL; then a REQUEST_RESPONSE"}


async def keepalive(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    await asyncio.sleep(KEEPALIVE_SHORT.total_seconds() * 2.5)
    return {"description": "idle connection with a 100 ms keepalive: KEEPALIVE(R) and replies"}


async def fragmented(client: RSocketClient, ev: dict[str, asyncio.Event]) -> dict[str, Any]:
    data = bytes(range(256)) * 2 + b"tail"
    metadata = b"m" * 100
    reply = await client.request_response(Payload(data, metadata))
    assert reply.data == b"echo:" + data and reply.metadata == metadata
    return {
        "description": (
            f"REQUEST_RESPONSE of {len(data)}+{len(metadata)} bytes, fragment size {FRAGMENT}"
            " on both sides: REQUEST_RESPONSE(F) + PAYLOAD(F)... and a fragmented reply"
        ),
        "fragment_size": FRAGMENT,
    }


EXCHANGES: dict[str, tuple[Exchange, int | None]] = {
    "request_response": (request_response, None),
    "fire_and_forget": (fire_and_forget, None),
    "request_stream": (request_stream, None),
    "request_channel": (request_channel, None),
    "metadata_push": (metadata_push, None),
    "application_error": (application_error, None),
    "fragmented": (fragmented, FRAGMENT),
    "cancel": (cancel, None),
    "keepalive": (keepalive, None),
}


async def record(name: str, out: Path) -> Path:
    exchange, fragment = EXCHANGES[name]
    events = {"fnf": asyncio.Event(), "metadata_push": asyncio.Event()}
    servers: list[RSocketServer] = []

    def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        servers.append(
            RSocketServer(
                TransportTCP(reader, writer),
                handler_factory=lambda: Handler(events),
                fragment_size_bytes=fragment,
            )
        )

    server = await asyncio.start_server(session, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    path = out / f"{name}.rstrace"
    metadata: dict[str, Any] = {
        "exchange": name,
        "client": f"rsocket-py {version('rsocket')} (asyncio, TransportTCP)",
        "server": f"rsocket-py {version('rsocket')} (asyncio, TransportTCP)",
        "recorded_by": "tests/tools/record_traces.py",
    }
    proxy = CaptureProxy(("127.0.0.1", port), path, metadata=metadata, timeout=TIMEOUT)
    notes: dict[str, Any] = {}
    try:
        conn = await asyncio.open_connection("127.0.0.1", proxy.port)
        async with RSocketClient(
            single_transport_provider(TransportTCP(*conn)),
            keep_alive_period=KEEPALIVE_SHORT if name == "keepalive" else KEEPALIVE,
            fragment_size_bytes=fragment,
        ) as client:
            notes = await asyncio.wait_for(exchange(client, events), TIMEOUT)
        # The client closed its side; the server answers with its own close.
        loop = asyncio.get_running_loop()
        finished = await loop.run_in_executor(None, proxy.wait_finished, TIMEOUT)
        if not finished:
            raise RuntimeError(f"{name}: the connection did not finish in {TIMEOUT} s")
    finally:
        for s in servers:
            await s.close()
        server.close()
        await server.wait_closed()
        proxy.close()
    # The trace header is written first, so the exchange's own notes go into
    # a sidecar-free second pass: rewrite the file with the merged metadata.
    _merge_metadata(path, notes)
    return path


def _merge_metadata(path: Path, extra: dict[str, Any]) -> None:
    from sansrs.trace import DataRecord, TraceReader, TraceWriter

    reader = TraceReader(path)
    metadata = {**reader.metadata, **extra}
    records = list(reader)
    with TraceWriter(path, metadata) as writer:
        for r in records:
            if isinstance(r, DataRecord):
                writer.write_data(r.direction, r.timestamp, r.data)
            else:
                writer.write_end(r.direction, r.timestamp, r.reason)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=TRACES)
    parser.add_argument("--only", nargs="*", choices=sorted(EXCHANGES), default=None)
    args = parser.parse_args(argv)
    # rsocket-py logs expected teardown noise (cancelled tasks) as errors.
    logging.getLogger("pyrsocket").setLevel(logging.CRITICAL)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or EXCHANGES:
        path = asyncio.run(record(name, args.out))
        print(f"{path} {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
