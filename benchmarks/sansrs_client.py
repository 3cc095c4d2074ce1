"""sansrs client side of bench_tcp.py (runs in its own process)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

from sansrs.adapters.rsocket import Client, connect

WAIT = 120.0


def _stream(client: Client, count: int, size: int, batches: bool = False) -> int:
    done = 0
    request = json.dumps({"n": count, "size": size})
    # The window must cover the replenish round trip (REQUEST_N handed to the
    # connection thread, sent, the next burst back) at the rate items are
    # consumed (docs/performance.md, "Choosing prefetch"): 8192 small items,
    # 4096 of 1 KiB.
    prefetch = 8192 if size < 1024 else 4096
    if batches:  # a list per hand-over (stream16b, stream1kb)
        with client.request_stream_batches(request, prefetch=prefetch, timeout=WAIT) as lists:
            for batch in lists:
                for _ in batch:
                    done += 1
        return done
    with client.request_stream(request, prefetch=prefetch, timeout=WAIT) as items:
        for _ in items:
            done += 1
    return done


class _Batches:
    """A Subscriber of ``batch_publisher``: one batch requested at a time
    (the next from ``on_next``, on the connection thread), every item of
    each read, as the batches client reads its lists."""

    def __init__(self) -> None:
        self.done = 0
        self.subscription: Any = None
        self.finished = threading.Event()
        self.error: BaseException | None = None

    def on_subscribe(self, subscription: Any) -> None:
        self.subscription = subscription
        subscription.request(1)

    def on_next(self, batch: Any) -> None:
        done = self.done
        for _ in batch:
            done += 1
        self.done = done
        self.subscription.request(1)

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.finished.set()

    def on_complete(self) -> None:
        self.finished.set()


def _stream_publisher(client: Client, count: int, size: int) -> int:
    """``batch_publisher`` (stream16p, stream1kp): the stream as a Reactive
    Streams Publisher of batches, the prefetch window of :func:`_stream`."""
    subscriber = _Batches()
    request = json.dumps({"n": count, "size": size})
    prefetch = 8192 if size < 1024 else 4096
    client.batch_publisher(request, prefetch=prefetch).subscribe(subscriber)
    if not subscriber.finished.wait(WAIT):
        raise TimeoutError(f"{subscriber.done} of {count} items")
    if subscriber.error is not None:
        raise subscriber.error
    return subscriber.done


class _Chain:
    """Keeps ``in_flight`` request-responses outstanding through Publishers:
    each completion starts the next one on the connection thread."""

    def __init__(self, client: Client, total: int) -> None:
        self.client = client
        self.left = total
        self.done = 0
        self.total = total
        self.finished = threading.Event()
        self.error: BaseException | None = None

    def start_one(self) -> None:
        if self.left <= 0:
            return
        self.left -= 1
        self.client.response_publisher(b"x" * 16).subscribe(_Once(self))


class _Once:
    def __init__(self, chain: _Chain) -> None:
        self.chain = chain

    def on_subscribe(self, subscription: Any) -> None:
        subscription.request(1)

    def on_next(self, item: Any) -> None:
        pass

    def on_error(self, error: BaseException) -> None:
        self.chain.error = error
        self.chain.finished.set()

    def on_complete(self) -> None:
        chain = self.chain
        chain.done += 1
        if chain.done == chain.total:
            chain.finished.set()
        else:
            chain.start_one()


def _request_response(client: Client, count: int, in_flight: int, chain: bool = False) -> int:
    if in_flight <= 1 and not chain:
        for _ in range(count):
            client.request_response(b"x" * 16, timeout=WAIT)
        return count
    if not chain:  # pipelined: the window refills on the connection thread
        done = 0
        for _ in client.request_response_many(
            itertools.repeat(b"x" * 16, count), in_flight=in_flight, timeout=WAIT
        ):
            done += 1
        return done
    requests = _Chain(client, count)
    for _ in range(in_flight):
        requests.start_one()
    if not requests.finished.wait(WAIT):
        raise TimeoutError(f"{requests.done} of {count} responses")
    if requests.error is not None:
        raise requests.error
    return requests.done


def _fire_and_forget(client: Client, count: int, size: int, many: bool = False) -> int:
    payload = b"x" * size
    if many:  # fnf16m: one call for all of them
        client.fire_and_forget_many(itertools.repeat(payload, count), timeout=WAIT)
    else:
        fnf = client.fire_and_forget
        for _ in range(count):
            fnf(payload, timeout=WAIT)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        reply = client.request_response(b"fnf-count", timeout=WAIT)
        if reply is not None and int(reply.data) >= count:
            return int(reply.data)
    raise TimeoutError("fire-and-forgets not all counted")


def run(url: str, kind: str, count: int, arg: int, loop: str = "thread") -> int:
    with connect(url, loop=loop) as client:
        if kind in ("stream", "streamb"):
            return _stream(client, count, arg, batches=kind == "streamb")
        if kind == "streamp":
            return _stream_publisher(client, count, arg)
        if kind == "fnfm":
            return _fire_and_forget(client, count, arg, many=True)
        if kind == "rr":
            return _request_response(client, count, arg)
        if kind == "rrc":
            return _request_response(client, count, arg, chain=True)
        return _fire_and_forget(client, count, arg)


def consume_slowly(
    url: str, items: int, pause_every: int = 10_000, pause: float = 0.005, batches: bool = False
) -> int:
    """Consume a stream of 16-byte items, pausing now and then: the server
    must wait for credit rather than buffer (``batches``: a list at a time)."""
    done = 0
    request = json.dumps({"n": items, "size": 16})
    with connect(url) as client:
        if batches:
            with client.request_stream_batches(request, timeout=WAIT) as lists:
                for batch in lists:
                    before, done = done, done + len(batch)
                    if done // pause_every != before // pause_every:
                        time.sleep(pause)
            return done
        with client.request_stream(request, timeout=WAIT) as stream:
            for _ in stream:
                done += 1
                if done % pause_every == 0:
                    time.sleep(pause)
    return done


def run_asyncio(url: str, kind: str, count: int, arg: int) -> int:
    """The asyncio client: sequential request-responses (``rr`` with one in flight)."""
    import asyncio

    from sansrs.adapters.rsocket.aio import connect as connect_async

    if kind in ("stream", "streamb"):
        return asyncio.run(_stream_asyncio(url, count, arg, batches=kind == "streamb"))
    if kind in ("fnf", "fnfm"):
        return asyncio.run(_fire_and_forget_asyncio(url, count, arg, many=kind == "fnfm"))
    if kind != "rr" or arg != 1:
        raise ValueError("the asyncio client runs rr_seq, streams and fire-and-forgets only")

    async def main() -> int:
        client = await connect_async(url)
        try:
            payload = b"x" * 16
            for _ in range(count):
                await client.request_response(payload, timeout=WAIT)
            return count
        finally:
            await client.close()

    return asyncio.run(main())


async def _fire_and_forget_asyncio(url: str, count: int, size: int, many: bool) -> int:
    """:func:`_fire_and_forget` with the asyncio client."""
    from sansrs.adapters.rsocket.aio import connect as connect_async

    payload = b"x" * size
    client = await connect_async(url)
    try:
        if many:  # fnf16m: one call for all of them
            await client.fire_and_forget_many(itertools.repeat(payload, count))
        else:
            fnf = client.fire_and_forget
            for _ in range(count):
                await fnf(payload)
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            reply = await client.request_response(b"fnf-count", timeout=WAIT)
            if reply is not None and int(reply.data) >= count:
                return int(reply.data)
        raise TimeoutError("fire-and-forgets not all counted")
    finally:
        await client.close()


async def _stream_asyncio(url: str, count: int, size: int, batches: bool) -> int:
    """The asyncio client consuming a stream: ``async for`` item by item,
    or a list at a time (``request_stream_batches``)."""
    from sansrs.adapters.rsocket.aio import connect as connect_async

    request = json.dumps({"n": count, "size": size})
    prefetch = 8192 if size < 1024 else 4096
    done = 0
    client = await connect_async(url)
    try:
        if batches:
            async with client.request_stream_batches(
                request, prefetch=prefetch, timeout=WAIT
            ) as lists:
                async for batch in lists:
                    for _ in batch:
                        done += 1
        else:
            async with client.request_stream(request, prefetch=prefetch, timeout=WAIT) as items:
                async for _ in items:
                    done += 1
        return done
    finally:
        await client.close()


def rr_cpu(url: str, count: int, loop: str = "thread") -> tuple[float, float, float]:
    """Sequential request-responses after a warm-up: (round trips/s, user
    and system CPU µs per round trip of this process, all threads)."""
    import os

    with connect(url, loop=loop) as client:
        payload = b"x" * 16
        for _ in range(300):  # imports, first calls, the connection idle
            client.request_response(payload, timeout=WAIT)
        before, wall = os.times(), time.perf_counter()
        for _ in range(count):
            client.request_response(payload, timeout=WAIT)
        wall, after = time.perf_counter() - wall, os.times()
    return (count / wall, (after.user - before.user) / count * 1e6,
            (after.system - before.system) / count * 1e6)


def rr_cpu_no_driver(port: int, count: int) -> tuple[float, float, float]:
    """:func:`rr_cpu` with the client's RSocket engine on a blocking socket
    of its own, no driver (no loop, no direct call, no lock): what the
    client would cost if its driver cost nothing."""
    import os
    import socket

    from sansrs.adapters.drive.queues import CreditQueue
    from sansrs.adapters.rsocket import Payload
    from sansrs.adapters.rsocket.engine import RequestHandle, RSocketEngine
    from sansrs.adapters.rsocket.options import EngineOptions

    engine = RSocketEngine.client(EngineOptions(), None)
    engine.attach(_Inline(), None)  # type: ignore[arg-type]
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(engine.data_to_send())  # SETUP
        payload = b"x" * 16

        def round_trip() -> None:
            answer: CreditQueue[Payload] = CreditQueue(granted=1)
            engine.start_response(RequestHandle("rr", answer), Payload(payload))
            engine.pump()
            sock.sendall(engine.data_to_send())
            while not answer.answered():
                engine.receive_data(sock.recv(65536), time.monotonic())
            answer.get(0)

        for _ in range(300):
            round_trip()
        before, wall = os.times(), time.perf_counter()
        for _ in range(count):
            round_trip()
        wall, after = time.perf_counter() - wall, os.times()
    return (count / wall, (after.user - before.user) / count * 1e6,
            (after.system - before.system) / count * 1e6)


class _Inline:
    """A driver for an engine run by hand on one thread: calls run at once."""

    is_owner = True

    def call_soon(self, fn: Any, timeout: float | None = None) -> None:
        fn()

    def wake(self) -> None:
        pass


def engines_alone(count: int) -> tuple[float, float]:
    """CPU µs per request-response of the RSocket engines alone, no socket,
    no driver: (the client's engine: start the request, take its bytes, feed
    the answer's frame, take the answer; the server's: feed the request's
    frame, the demo handler answers, take the bytes). A hot loop: the floor
    the protocol stack itself sets, caches warm."""
    import struct

    from sansrs.adapters.drive.queues import CreditQueue
    from sansrs.adapters.rsocket import Payload
    from sansrs.adapters.rsocket import core as rcore
    from sansrs.adapters.rsocket.demo import DemoHandler
    from sansrs.adapters.rsocket.engine import RequestHandle, RSocketEngine
    from sansrs.adapters.rsocket.options import EngineOptions

    def frame(sid: int, type_flags: int) -> bytes:
        body = struct.pack(">IH", sid, type_flags) + b"y" * 16
        return len(body).to_bytes(3, "big") + body

    options, now = EngineOptions(), time.monotonic()
    client = RSocketEngine.client(options, None)
    client.attach(_Inline(), None)  # type: ignore[arg-type]
    client.data_to_send()
    answers = [frame(1 + 2 * i, 0x0A << 10 | 0x60) for i in range(count)]  # PAYLOAD N|C
    started = time.process_time()
    for i in range(count):
        queue: CreditQueue[Payload] = CreditQueue(granted=1)
        client.start_response(RequestHandle("rr", queue), Payload(b"x" * 16))
        client.pump()
        client.data_to_send()
        client.receive_data(answers[i], now)
        queue.get(1.0)
    client_us = (time.process_time() - started) / count * 1e6
    server = RSocketEngine.server(options)
    server.attach(_Inline(), None, DemoHandler())  # type: ignore[arg-type]
    server.receive_data(rcore.client(options).data_to_send(), now)  # SETUP
    server.pump()
    server.data_to_send()
    requests = [frame(1 + 2 * i, 0x04 << 10) for i in range(count)]  # REQUEST_RESPONSE
    started = time.process_time()
    for i in range(count):
        server.receive_data(requests[i], now)
        server.pump()
        server.data_to_send()
    return client_us, (time.process_time() - started) / count * 1e6
