"""How a connection's turns share the socket with an outbound stream: a
stream with credit but a reader that reads nothing leaves the connection
waiting for room (no turn after turn that writes nothing: a busy loop that
burned a core while the peer was slow), and a turn queues at most about
``LoopConfig.high_water`` bytes of a stream's items before writing them
(the socket gets a turn's first items while the next are made).

The loop runs on the test's thread, one ``_run_once`` at a time, so every
turn is counted and none is left to timing."""

from __future__ import annotations

import dataclasses
import itertools
import socket
import threading
from collections.abc import Iterator

import pytest
from sansrs.adapters.drive.config import LoopConfig
from sansrs.adapters.drive.connection import LoopConnection
from sansrs.adapters.drive.selector import Loop
from sansrs.adapters.rsocket.engine import RSocketEngine
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.rsocket.peer import RSocketPeer
from sansrs.adapters.transport.tcp import SocketTransport

from sansrs.rsocket import Connection, ConnectionConfig, Role

#: More turns than any stall of a well-behaved connection takes to settle.
TURNS = 400


class Endless:
    """A stream of ``size``-byte items that never ends; counts what it made."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.made = 0

    def request_stream(self, request: object) -> Iterator[bytes]:
        item = b"x" * self.size
        for self.made in itertools.count(1):
            yield item


class Driven:
    """A server connection on a :class:`Loop` run by the test's thread, its
    peer a socket the test reads (or not)."""

    def __init__(self, size: int, config: LoopConfig | None = None) -> None:
        self.ours, self.theirs = socket.socketpair()
        for sock in (self.ours, self.theirs):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        self.ours.setblocking(False)
        # (An idle loop turn waits at most 1 ms: the test never waits on it.)
        self.loop = Loop(dataclasses.replace(config or LoopConfig(), max_idle_wait=0.001))
        self.loop._ident = threading.get_ident()  # the test's thread runs it
        self.handler = Endless(size)
        self.engine = RSocketEngine.server(EngineOptions())
        self.conn = LoopConnection(self.loop, SocketTransport(self.ours), self.engine)
        self.engine.attach(self.conn, RSocketPeer(self.conn, self.engine), self.handler)
        self.turns = 0
        service = self.conn.service

        def counted(now: float, read: bool = False) -> None:
            self.turns += 1
            service(now, read)

        self.conn.service = counted  # type: ignore[method-assign]
        self.loop.add(self.conn)
        self.conn.start()
        requester = Connection(Role.CLIENT, ConnectionConfig())
        requester.setup()
        requester.request_stream(b"all", initial_n=2**31 - 1)
        self.theirs.sendall(requester.data_to_send())

    def settle(self) -> int:
        """Run the loop while it has a turn to run at once (no waiting):
        the turns it took, at most :data:`TURNS`."""
        for n in range(TURNS):
            loop = self.loop
            if n and not (loop._next or loop._woken or loop._calls):
                return n
            loop._run_once()
        return TURNS

    def read_some(self) -> int:
        self.theirs.setblocking(False)
        got = 0
        try:
            while got < 256 * 1024:
                got += len(self.theirs.recv(65536))
        except BlockingIOError:
            pass
        return got

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("size", [16, 1024])
def test_a_stream_whose_reader_reads_nothing_waits_for_room_without_turning(size: int) -> None:
    d = Driven(size)
    try:
        turns = d.settle()
        assert turns < TURNS, "the connection turned again and again while the socket was full"
        made = d.handler.made
        assert made > 0
        # Bounded: what the socket pair, the loop's buffer and the core hold
        # (max_queued_output, 4 MiB), and a pump's batch beyond.
        held = 4 * 16 * 1024 + d.loop.config.high_water + 4 * 1024 * 1024
        assert made * (size + 9) <= held + 128 * 1024 + 1024 * (size + 9)
        # Nothing happens until the reader reads: the loop would wait.
        assert not (d.loop._next or d.loop._woken or d.loop._calls)
        # The reader reads: what was held goes out, the stream goes on, and
        # it settles again after each read.
        for _ in range(200):
            assert d.read_some() > 0
            assert d.settle() < TURNS
            if d.handler.made > made:
                break
        assert d.handler.made > made
    finally:
        d.close()


@pytest.mark.timeout(30)
def test_a_turn_queues_about_high_water_bytes_of_a_stream_before_writing() -> None:
    """1 KiB items, credit for everything, a reader keeping up: each turn
    writes at most ``high_water`` (and a batch) of items, not the 4 MiB the
    core would hold."""
    config = LoopConfig(high_water=128 * 1024)
    d = Driven(1024, config)
    try:
        for _ in range(40):
            d.read_some()
            d.loop._run_once()
        assert d.handler.made > 0
        made_per_turn = d.handler.made / d.turns
        # (1,033 bytes a frame; one batch of 128 KiB may be pulled beyond.)
        assert made_per_turn * 1033 <= config.high_water + 128 * 1024
    finally:
        d.close()
