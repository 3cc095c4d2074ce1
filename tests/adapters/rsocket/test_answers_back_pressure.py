"""A responder's request-response answers to a peer that sends requests and
reads nothing, on the thread and selector drivers: once the answers it has
not written pass ``pause_reading_at`` the server stops reading that peer
(what it would read only makes more output), so its buffer stays within
``pause_reading_at``, the answers to one read and one batch; the
connection ends when the peer goes. A burst of requests whose answers are
many times ``max_queued_output`` is answered once each, never with an
error the handler did not raise (every driver, asyncio included; the
engine's own test, test_engine_requests.py, forces the answers of one
read past ``max_queued_output``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Iterator

import pytest
from sansrs.adapters.drive import Loop, LoopConfig
from sansrs.adapters.drive.connection import LoopConnection
from sansrs.adapters.drive.reactor import WRITE
from sansrs.adapters.rsocket import Payload, aio, serve
from sansrs.adapters.rsocket.peer import RSocketPeer
from sansrs.adapters.rsocket.types import Request

from sansrs.rsocket import Connection, Role
from sansrs.rsocket.events import ErrorReceived, PayloadReceived

WAIT = 10.0
ANSWER = b"a" * 1024
CONFIG = LoopConfig(high_water=64 * 1024, pause_reading_at=256 * 1024, recv_size=64 * 1024)


class Answers:
    def request_response(self, request: Request) -> Payload:
        return Payload(ANSWER)


@pytest.fixture(params=["thread", "selector"])
def driver(request: pytest.FixtureRequest) -> Iterator[Loop | str]:
    if request.param == "thread":
        yield "thread"
        return
    loop = Loop(CONFIG)
    loop.start()
    yield loop
    loop.stop(abort=True)


@pytest.mark.timeout(60)
def test_rsocket_server_stops_reading_a_peer_that_reads_none_of_its_answers(
    driver: Loop | str,
) -> None:
    config = CONFIG if driver == "thread" else None
    peers: list[RSocketPeer] = []
    connected = threading.Event()

    def answers(peer: RSocketPeer) -> Answers:
        peers.append(peer)
        connected.set()
        return Answers()

    with serve(
        "tcp://127.0.0.1:0", handler_factory=answers, loop=driver, loop_config=config
    ) as server:
        port = int(server.url.rsplit(":", 1)[1])
        sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        core = Connection(Role.CLIENT)
        core.setup()
        for _ in range(64):
            core.request_response(b"r" * 16)
        burst = core.data_to_send()  # SETUP and 64 requests, then 64 more each time
        sent = [0]

        def flood() -> None:
            # Blocks once the server stops reading; ends when the socket is closed.
            with contextlib.suppress(OSError):
                chunk = burst
                while sent[0] < 256 * 1024 * 1024:
                    sock.sendall(chunk)
                    sent[0] += len(chunk)
                    for _ in range(64):
                        core.request_response(b"r" * 16)
                    chunk = core.data_to_send()

        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        try:
            # The server's connection: told after each of its turns.
            assert connected.wait(WAIT)
            conn = peers[0]._thread
            conn = getattr(conn, "_conn", conn)  # the thread driver's connection
            assert isinstance(conn, LoopConnection)
            pause = CONFIG.pause_reading_at
            assert pause is not None
            # Not reading, output waiting (not the 0 of a connection still
            # registering: the factory runs before its first read).
            conn.wait_until(lambda: conn._interest == WRITE, WAIT)
            buffered = conn.buffered + conn.engine.conn.queued_output  # type: ignore[attr-defined]
            # (The answers to one read of 64 KiB of 25-byte requests: 1,033 bytes each.)
            per_read = CONFIG.recv_size // 25 * (len(ANSWER) + 9)
            assert pause <= buffered <= pause + per_read + CONFIG.high_water
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            flooder.join(WAIT)


BIG_ANSWER = b"b" * 32 * 1024
#: 25-byte requests sent at once, answered with 32 MiB in all (the core's
#: max_queued_output: 4 MiB).
BIG_REQUESTS = 1000


class BigAnswers:
    def request_response(self, request: Request) -> Payload:
        return Payload(BIG_ANSWER)


def _requests_then_read_every_answer(port: int) -> tuple[int, list[object]]:
    """A raw requester: SETUP and every request in one send, nothing read
    until then; then it reads until each request has its answer. Returns
    the answers and the ERRORs it got."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    try:
        core = Connection(Role.CLIENT)
        core.setup()
        for _ in range(BIG_REQUESTS):
            core.request_response(b"r" * 16)
        sock.sendall(core.data_to_send())
        answered: set[int] = set()
        errors: list[object] = []
        while len(answered) + len(errors) < BIG_REQUESTS:
            data = sock.recv(1 << 20)  # (bounded by the socket's timeout)
            assert data, "the server closed the connection"
            core.receive_data(data)
            for event in core.events():
                if type(event) is PayloadReceived:
                    assert event.stream_id not in answered, "answered twice"
                    assert event.data == BIG_ANSWER and event.complete
                    answered.add(event.stream_id)
                elif type(event) is ErrorReceived:
                    errors.append(event)
            sock.sendall(core.data_to_send())
        return len(answered), errors
    finally:
        sock.close()


@pytest.mark.timeout(60)
def test_rsocket_server_answers_a_burst_past_max_queued_output_once_without_errors(
    driver: Loop | str, caplog: pytest.LogCaptureFixture
) -> None:
    config = CONFIG if driver == "thread" else None
    with (
        caplog.at_level(logging.DEBUG, "sansrs.adapters.rsocket"),
        serve("tcp://127.0.0.1:0", BigAnswers(), loop=driver, loop_config=config) as server,
    ):
        port = int(server.url.rsplit(":", 1)[1])
        answered, errors = _requests_then_read_every_answer(port)
    assert (answered, errors) == (BIG_REQUESTS, [])
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.timeout(60)
def test_rsocket_asyncio_server_answers_a_burst_past_max_queued_output_once_without_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> tuple[int, list[object]]:
        async with await aio.serve(
            "tcp://127.0.0.1:0", BigAnswers(), loop_config=CONFIG
        ) as server:
            port = int(server.url.rsplit(":", 1)[1])
            return await asyncio.to_thread(_requests_then_read_every_answer, port)

    with caplog.at_level(logging.DEBUG, "sansrs.adapters.rsocket"):
        answered, errors = asyncio.run(asyncio.wait_for(main(), 50))
    assert (answered, errors) == (BIG_REQUESTS, [])
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
