"""The least an RSocket request-response ping-pong can run in Python: a floor.

A client that sends SETUP, then REQUEST_RESPONSE frames one at a time and
reads each answer; a server that answers every REQUEST_RESPONSE with a
PAYLOAD (NEXT, COMPLETE) echoing its data. Real RSocket frames, and nothing
else: no stream table, no keepalive, no checks, no driver. The bytes are
what sansrs and any RSocket 1.0 peer exchange, so each side runs against
sansrs as well, and ``bench_tcp.py --latency-costs`` uses the pairs to say
how much of a round trip each sansrs side costs (docs/performance.md,
"Request-response, one at a time").

    .venv/bin/python benchmarks/floor_peer.py serve 0        # prints READY <port>
    .venv/bin/python benchmarks/floor_peer.py serve 0 --before 5 --after 0

``--before US`` / ``--after US``: the server also runs a busy loop of about
US microseconds (calibrated hot, at start) before / after writing each
answer: ``bench_tcp.py --stretch-costs`` uses it to say what a side's work
costs a round trip on either side of its write (docs/performance.md,
"the critical stretch").

``--epoll``: the server waits in ``epoll_wait`` before each (non-blocking)
read, as a sansrs server's selector loop does; and the client's ``shape``
(``poll``, ``reactor``) makes the system calls of sansrs's client: the
floor with sansrs's system calls and none of its Python, what
``bench_tcp.py --syscall-costs`` measures (docs/performance.md, "the
system calls alone").

    .venv/bin/python benchmarks/floor_peer.py serve 0 --epoll
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
from struct import Struct
from typing import Any

import raw_peer
from raw_peer import settle_allocator

#: 24-bit length (its high byte 0), stream ID, type and flags.
HEADER = Struct(">xHIH")
REQUEST_RESPONSE = 0x04 << 10
ANSWER = (0x0A << 10) | 0x40 | 0x20  # PAYLOAD with NEXT and COMPLETE
READ_SIZE = 65536
#: Round trips a client runs before the ones it measures.
WARM_UP = 300


#: Busy-loop iterations before / after each answer is written (``--before``, ``--after``).
WORK_BEFORE = 0
WORK_AFTER = 0


def _iterations_per_us() -> float:
    """Iterations of the busy loop per microsecond, hot (best of five)."""
    n = 200_000
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            pass
        best = min(best, time.perf_counter() - start)
    return n / (best * 1e6)


#: Wait in epoll_wait before each read (``--epoll``).
EPOLL = False


def _serve_connection(sock: Any) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if WORK_BEFORE or WORK_AFTER:
        sock = _BusyWriter(sock, WORK_BEFORE, WORK_AFTER)
    elif EPOLL:
        sock = _EpollReader(sock)
    unpack = HEADER.unpack_from
    pack = HEADER.pack
    buf = b""
    with sock:
        while True:
            data = sock.recv(READ_SIZE)
            if not data:
                return
            buf += data
            off = 0
            while len(buf) - off >= 9:
                low, sid, type_flags = unpack(buf, off)
                length = buf[off] << 16 | low
                if len(buf) - off - 3 < length:
                    break
                if type_flags >> 10 == REQUEST_RESPONSE >> 10:  # SETUP, KEEPALIVE...: ignored
                    body = buf[off + 9 : off + 3 + length]
                    sock.sendall(pack(6 + len(body), sid, ANSWER) + body)
                off += 3 + length
            buf = buf[off:]


class _BusyWriter:
    """``sock`` whose ``sendall`` runs busy loops of ``before`` and
    ``after`` iterations around the write (``--before``, ``--after``); its
    ``recv`` is the socket's own, so the plain server stays as it is."""

    def __init__(self, sock: socket.socket, before: int, after: int) -> None:
        self.recv = sock.recv
        self._sock, self._before, self._after = sock, before, after

    def sendall(self, data: bytes) -> None:
        for _ in range(self._before):
            pass
        self._sock.sendall(data)
        for _ in range(self._after):
            pass

    def __enter__(self) -> _BusyWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()


class _EpollReader:
    """``sock``, non-blocking, whose ``recv`` first waits in ``epoll_wait``
    (``--epoll``): the system calls of a selector loop's read, one
    connection, none of its Python."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._epoll = select.epoll()
        self._epoll.register(sock.fileno(), select.EPOLLIN)
        self._sock = sock
        self.sendall = sock.send  # (a 25-byte answer: the socket takes it whole)

    def recv(self, size: int) -> bytes:
        while True:
            self._epoll.poll()
            try:
                return self._sock.recv(size)
            except BlockingIOError:
                continue

    def __enter__(self) -> _EpollReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._epoll.close()
        self._sock.close()


def _setup_frame() -> bytes:
    """SETUP as sansrs's client sends it (keepalive 20 s, lifetime 90 s)."""
    from sansrs.adapters.rsocket import core
    from sansrs.adapters.rsocket.options import EngineOptions

    return core.client(EngineOptions()).data_to_send()


#: The client's system calls per round trip, by ``shape``: ``plain``, a
#: blocking send and recv (the raw ping-pong's); ``poll``, a non-blocking
#: socket and a ``poll`` before each read (how a sansrs client's calling
#: thread waits); ``reactor``, that and the socket registered with an epoll
#: that a second thread sleeps on (the connection's reactor), the calling
#: thread stopping its interest before each request and restoring it after
#: the answer (two ``epoll_ctl``), as sansrs's express path does.
SHAPES = ("plain", "poll", "reactor")


def _exchange_calls(sock: socket.socket, shape: str) -> tuple[Any, Any]:
    """(``send``, ``recv``) for ``shape``: the plain socket's, or a poll
    before each non-blocking read; for ``reactor`` also the reactor's
    interest stopped before the request is written and restored once the
    answer is read, where sansrs's express path does both."""
    if shape == "plain":
        return sock.sendall, sock.recv
    sock.setblocking(False)
    fd = sock.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    raw_send, raw_recv = sock.send, sock.recv  # (a 25-byte request: taken whole)

    def recv(size: int) -> bytes:
        poller.poll()
        return raw_recv(size)

    if shape == "poll":
        return raw_send, recv
    reactor = select.epoll()
    reactor.register(fd, select.EPOLLIN)
    def idle_reactor() -> None:  # asleep, as an idle reactor (woken: it would show)
        while True:
            reactor.poll()

    threading.Thread(target=idle_reactor, daemon=True).start()
    modify = reactor.modify

    def paused_send(data: bytes) -> int:
        modify(fd, 0)
        return raw_send(data)

    def resuming_recv(size: int) -> bytes:
        poller.poll()
        data = raw_recv(size)
        modify(fd, select.EPOLLIN)
        return data

    return paused_send, resuming_recv


def request_response(
    port: int, count: int, size: int = 16, shape: str = "plain"
) -> tuple[float, float, float]:
    """``count`` sequential round trips after a warm-up: (round trips/s,
    user and system CPU µs per round trip of this process). ``shape``: the
    system calls it makes (``SHAPES``)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(_setup_frame())
        pack = HEADER.pack
        unpack = HEADER.unpack_from
        send, recv = _exchange_calls(sock, shape)
        body = b"x" * size
        sid = 1

        def round_trips(n: int) -> None:
            nonlocal sid
            for _ in range(n):
                send(pack(6 + size, sid, REQUEST_RESPONSE) + body)
                data = recv(READ_SIZE)
                while len(data) < 9 or len(data) < 3 + (data[0] << 16 | unpack(data, 0)[0]):
                    more = recv(READ_SIZE)
                    if not more:
                        raise ConnectionError("server went away")
                    data += more
                sid += 2

        round_trips(WARM_UP)
        before, wall = os.times(), time.perf_counter()
        round_trips(count)
        wall, after = time.perf_counter() - wall, os.times()
    return (count / wall, (after.user - before.user) / count * 1e6,
            (after.system - before.system) / count * 1e6)


if __name__ == "__main__":
    settle_allocator()
    args = sys.argv[1:]
    if args[2:] == ["--epoll"]:
        EPOLL = True
        del args[2:]
    if len(args) in (2, 4, 6) and args[0] == "serve":
        work = dict(zip(args[2::2], map(float, args[3::2]), strict=True))
        if set(work) - {"--before", "--after"}:
            sys.exit(__doc__)
        if work:
            per_us = _iterations_per_us()
            WORK_BEFORE = round(work.get("--before", 0.0) * per_us)
            WORK_AFTER = round(work.get("--after", 0.0) * per_us)
        raw_peer.serve(int(args[1]), _serve_connection)
    else:
        sys.exit(__doc__)
