"""A stream of exactly N items, requested exactly N by a raw consumer,
completes right behind its last item (the responder never waits for a
REQUEST_N it does not need), whatever the handler returned."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sansrs.adapters.rsocket import aio
from sansrs.adapters.rsocket.server import serve
from sansrs.adapters.rsocket.types import Request

from sansrs.rsocket import Connection, Role
from sansrs.rsocket.events import PayloadReceived
from sansrs.streams import from_generator, from_iterable

WAIT = 20.0


def _items(n: int) -> Iterator[bytes]:
    for i in range(n):
        yield b"%d" % i


async def _async_items(n: int) -> AsyncIterator[bytes]:
    for i in range(n):
        await asyncio.sleep(0)
        yield b"%d" % i


class _Handler:
    """``request_stream`` answers ``b"<kind>/<n>"`` with n items as that kind."""

    def request_stream(self, request: Request) -> Any:
        kind, _, count = request.data.partition(b"/")
        n = int(count)
        if kind == b"gen":
            return _items(n)
        if kind == b"genpub":
            return from_generator(lambda: _items(n))
        if kind == b"listpub":
            return from_iterable([b"%d" % i for i in range(n)])
        if kind == b"agen":
            return _async_items(n)
        raise ValueError(kind)


def _request_exactly(port: int, data: bytes, n: int) -> list[PayloadReceived]:
    """SETUP, then REQUEST_STREAM with initial n and no REQUEST_N ever; the
    PAYLOAD frames up to the one that completes the stream (TimeoutError if
    it never comes)."""
    core = Connection(Role.CLIENT)
    core.setup()
    sid = core.request_stream(data, initial_n=n)
    got: list[PayloadReceived] = []
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as sock:
        sock.sendall(core.data_to_send())
        while True:
            chunk = sock.recv(65536)  # TimeoutError: the completion never came
            assert chunk, "the server closed"
            core.receive_data(chunk)
            for event in core.events():
                if isinstance(event, PayloadReceived) and event.stream_id == sid:
                    got.append(event)
                    if event.complete:
                        return got
            sock.sendall(core.data_to_send())  # keepalive answers; never a REQUEST_N


@pytest.mark.parametrize("loop", ["thread", "selector"])
@pytest.mark.parametrize("kind", [b"gen", b"genpub", b"listpub"])
@pytest.mark.timeout(30)
def test_rsocket_request_stream_of_n_requested_exactly_n_completes(kind: bytes, loop: str) -> None:
    with serve("tcp://127.0.0.1:0", _Handler(), loop=loop) as server:
        got = _request_exactly(server.endpoint.port, kind + b"/2", 2)
    assert [p.data for p in got if p.next] == [b"0", b"1"]
    assert got[-1].complete


@pytest.mark.parametrize("kind", [b"gen", b"genpub", b"agen"])
@pytest.mark.timeout(30)
def test_rsocket_request_stream_of_n_requested_exactly_n_completes_under_asyncio(
    kind: bytes,
) -> None:
    port: list[int] = []
    ready, stop = threading.Event(), threading.Event()

    async def run() -> None:
        async with await aio.serve("tcp://127.0.0.1:0", _Handler()) as server:
            port.append(int(server.url.rsplit(":", 1)[1]))
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.01)

    thread = threading.Thread(target=lambda: asyncio.run(run()))
    thread.start()
    try:
        assert ready.wait(WAIT)
        got = _request_exactly(port[0], kind + b"/2", 2)
    finally:
        stop.set()
        thread.join(WAIT)
    assert [p.data for p in got if p.next] == [b"0", b"1"]
    assert got[-1].complete
