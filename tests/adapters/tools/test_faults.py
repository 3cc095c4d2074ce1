"""The fault-injecting proxy (``sansrs.adapters.tools.faults``) on loopback: it
forwards, cuts at the byte offsets it draws, delays and blackholes. The
resumption tests over it are in tests/rsocket/test_resume_faults.py."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from sansrs.adapters.tools.faults import FaultProxy


class EchoServer:
    """Echoes every connection on its own thread until the peer ends."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self.listener.getsockname()[:2]
        self.accepted = 0
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            t = threading.Thread(target=self._echo, args=(sock,), daemon=True)
            t.start()
            self._threads.append(t)

    def _echo(self, sock: socket.socket) -> None:
        sock.settimeout(10.0)
        with sock:
            try:
                while data := sock.recv(65536):
                    sock.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        for t in self._threads:
            t.join(10.0)


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


def read_until_end(sock: socket.socket, limit: int) -> bytes:
    """Read until EOF / reset, or ``limit`` bytes."""
    out = bytearray()
    sock.settimeout(10.0)
    while len(out) < limit:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        out += data
    return bytes(out)


def test_faults_proxy_forwards_both_ways(echo: EchoServer) -> None:
    with FaultProxy(echo.address) as proxy, socket.create_connection(proxy.address) as sock:
        payload = bytes(range(256)) * 400
        sock.sendall(payload)
        assert read_until_end(sock, len(payload)) == payload
    assert proxy.stats.links == 1 and proxy.stats.cuts == 0
    assert proxy.stats.forwarded == 2 * len(payload)


def test_faults_cut_after_resets_at_the_offset(echo: EchoServer) -> None:
    with FaultProxy(echo.address) as proxy, socket.create_connection(proxy.address) as sock:
        sock.sendall(b"x" * 100)
        assert read_until_end(sock, 100) == b"x" * 100
        proxy.cut_after(150)  # 100 more up, 50 back, then the reset
        sock.sendall(b"y" * 100)
        got = read_until_end(sock, 1000)
        assert proxy.wait_cuts(1, 10.0)
    assert len(got) <= 50 and set(got) <= {ord("y")}
    assert proxy.stats.forwarded == 350


def test_faults_cut_at_random_offsets_from_injected_rng(echo: EchoServer) -> None:
    """Offsets come from the injected ``random.Random``: the same seed cuts
    at the same offsets."""
    seeded = random.Random(5)
    budgets = [seeded.randint(10, 5000) for _ in range(3)]
    rng = random.Random(5)
    with FaultProxy(echo.address, rng=rng) as proxy:
        proxy.cut_at_random(10, 5000, cuts=3)
        for _ in range(3):
            with socket.create_connection(proxy.address) as sock:
                with contextlib.suppress(OSError):  # the cut may come mid-send
                    sock.sendall(b"z" * 20_000)
                read_until_end(sock, 40_000)
        assert proxy.wait_cuts(3, 10.0)
        with socket.create_connection(proxy.address) as sock:  # no cuts left
            sock.sendall(b"w" * 1000)
            assert read_until_end(sock, 1000) == b"w" * 1000
    assert proxy.stats.cuts == 3
    # Each cut link forwarded exactly its drawn budget; the last one all 2000 bytes.
    assert proxy.stats.forwarded == sum(budgets) + 2000


def test_faults_blackhole_drops_bytes_and_keeps_links(echo: EchoServer) -> None:
    with FaultProxy(echo.address) as proxy, socket.create_connection(proxy.address) as sock:
        proxy.blackhole()
        sock.sendall(b"lost")
        sock.settimeout(0.2)
        with pytest.raises(TimeoutError):
            sock.recv(10)  # bounded wait: nothing may come back
        proxy.blackhole(False)
        sock.sendall(b"kept")
        assert read_until_end(sock, 4) == b"kept"
    assert proxy.stats.dropped == 4 and proxy.stats.cuts == 0


def test_faults_blackhole_lifted_with_a_cut_forwards_nothing_of_the_old_links(
    echo: EchoServer,
) -> None:
    with FaultProxy(echo.address) as proxy, socket.create_connection(proxy.address) as sock:
        proxy.blackhole()
        sock.sendall(b"lost")
        assert proxy.wait_until(lambda stats: stats.dropped == 4, 5.0)
        proxy.blackhole(False, cut=True)
        with contextlib.suppress(OSError):
            sock.sendall(b"after")
        assert read_until_end(sock, 100) == b""  # reset: nothing of the old link comes back
        assert proxy.wait_cuts(1, 5.0)
        with socket.create_connection(proxy.address) as fresh:  # new links work
            fresh.sendall(b"new")
            assert read_until_end(fresh, 3) == b"new"
    assert proxy.stats.forwarded == 6  # "new" there and back; nothing of the old link


def test_faults_delay_holds_each_chunk(echo: EchoServer) -> None:
    with FaultProxy(echo.address) as proxy, socket.create_connection(proxy.address) as sock:
        proxy.delay(0.1)
        start = time.monotonic()
        sock.sendall(b"late")
        assert read_until_end(sock, 4) == b"late"
        assert time.monotonic() - start >= 0.2  # delayed both ways
        proxy.delay(0)


def test_faults_cut_now_and_validation(echo: EchoServer) -> None:
    with FaultProxy(echo.address) as proxy, socket.create_connection(proxy.address) as sock:
        sock.sendall(b"a")
        assert read_until_end(sock, 1) == b"a"
        proxy.cut_now()
        assert proxy.wait_cuts(1, 10.0)
        assert read_until_end(sock, 10) == b""
        with pytest.raises(ValueError):
            proxy.cut_at_random(10, 5, cuts=1)
        with pytest.raises(ValueError):
            proxy.delay(-1)


# -- WebSocket-aware cuts ---------------------------------------------------------

_HEAD = b"GET /rsocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n"


def _client_frame(opcode: int, payload: bytes) -> bytes:
    """A masked client frame (RFC 6455, 5.2), the mask all zeros."""
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, 0x80 | n))
    else:
        head = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
    return head + b"\0\0\0\0" + payload


def _recorded(where: str, chunk: int) -> tuple[bytes, bytes, int]:
    """A client writes an upgrade head and four frames (a binary message, a
    ping, a 200-byte binary message, another one) through the proxy, in
    ``chunk``-byte writes; the proxy cuts ``where`` the second data frame.
    Returns what the target received, the stream sent, and the cuts."""
    first = _client_frame(0x2, b"a" * 10)
    ping = _client_frame(0x9, b"p")
    second = _client_frame(0x2, bytes(range(200)))
    stream = _HEAD + first + ping + second + _client_frame(0x2, b"z" * 5)
    with (
        socket.create_server(("127.0.0.1", 0)) as target,
        FaultProxy(target.getsockname()[:2], websocket=True) as proxy,
    ):
        proxy.cut_message(where, skip=1, direction="to-server")
        with socket.create_connection(proxy.address) as sock:
            upstream, _ = target.accept()
            with upstream:
                for i in range(0, len(stream), chunk):
                    with contextlib.suppress(OSError):  # the cut may come first
                        sock.sendall(stream[i : i + chunk])
                got = read_until_end(upstream, len(stream))
        assert proxy.wait_cuts(1, 10.0)
        return got, stream, proxy.stats.cuts


@pytest.mark.parametrize("chunk", [1 << 16, 7], ids=["one-write", "7-byte-writes"])
def test_faults_websocket_cut_inside_a_message_forwards_its_header_and_half(chunk: int) -> None:
    got, stream, cuts = _recorded("inside", chunk)
    second_starts = len(_HEAD) + 16 + 7  # the head, a 10-byte and a 1-byte masked frame
    assert got == stream[: second_starts + 8 + 100]  # its 8-byte header and 100 of 200 bytes
    assert cuts == 1


@pytest.mark.parametrize("chunk", [1 << 16, 7], ids=["one-write", "7-byte-writes"])
def test_faults_websocket_cut_after_a_message_forwards_it_whole_and_nothing_more(
    chunk: int,
) -> None:
    got, stream, cuts = _recorded("after", chunk)
    second_ends = len(_HEAD) + 16 + 7 + 8 + 200  # control frames are not counted
    assert got == stream[:second_ends]
    assert cuts == 1


def test_faults_websocket_cuts_need_websocket_links(echo: EchoServer) -> None:
    with FaultProxy(echo.address) as proxy:
        with pytest.raises(ValueError, match="websocket=True"):
            proxy.cut_message("inside")
        with pytest.raises(ValueError, match="websocket=True"):
            proxy.cut_messages_at_random(1, 2, cuts=1)
    with FaultProxy(echo.address, websocket=True) as proxy:
        with pytest.raises(ValueError, match="where"):
            proxy.cut_message("between")
        with pytest.raises(ValueError, match="direction"):
            proxy.cut_message("after", direction="sideways")
