"""The socket transport's reads: sized to what arrives (below glibc's mmap
threshold for request/response traffic, growing for streams)."""

from __future__ import annotations

import socket

from sansrs.adapters.transport.tcp import (
    RECV_BUFFER,
    RECV_SIZE,
    SMALL_RECV,
    SOCKET_BUFFER,
    SocketTransport,
)


def _pair() -> tuple[SocketTransport, socket.socket]:
    a, b = socket.socketpair()
    b.setblocking(True)
    return SocketTransport(a), b


def _fill(sock: socket.socket, n: int) -> None:
    sock.sendall(b"x" * n)


def _read_exactly(transport: SocketTransport, n: int) -> list[int]:
    sizes = []
    got = 0
    while got < n:
        try:
            chunk = transport.recv()
        except BlockingIOError:
            continue
        sizes.append(len(chunk))
        got += len(chunk)
    return sizes


def test_small_reads_stay_small() -> None:
    transport, peer = _pair()
    with peer:
        for _ in range(3):
            _fill(peer, 100)
            assert _read_exactly(transport, 100) == [100]
            assert transport._recv_size == SMALL_RECV
    transport.close()


class _Socket:
    """Hands out ``available`` bytes per read, as much as asked for when None."""

    def __init__(self) -> None:
        self.available: int | None = None
        self.asked: list[int] = []

    def recv(self, n: int) -> bytes:
        self.asked.append(n)
        return b"x" * (n if self.available is None else min(n, self.available))


def test_full_reads_grow_up_to_the_limit_and_a_short_one_shrinks_back() -> None:
    transport, peer = _pair()
    peer.close()
    transport.close()
    fake = _Socket()
    transport.sock = fake  # type: ignore[assignment]
    for _ in range(6):
        transport.recv()
    assert fake.asked == [SMALL_RECV, 2 * SMALL_RECV] + [RECV_SIZE] * 4  # doubling
    assert SMALL_RECV + 64 < 128 * 1024  # short reads below glibc's mmap threshold
    assert transport.recv(1000) == b"x" * 1000  # the caller's limit still wins
    fake.available = 10
    transport.recv()
    assert transport._recv_size == SMALL_RECV
    transport.recv()
    assert fake.asked[-1] == SMALL_RECV


class _OptionsSocket:
    """Records the options set on it (a transport's constructor)."""

    def __init__(self) -> None:
        self.options: dict[tuple[int, int], int] = {}

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options[level, option] = value

    def setblocking(self, flag: bool) -> None:
        pass

    def getpeername(self) -> tuple[str, int]:
        return ("127.0.0.1", 1)


def test_tcp_transport_asks_for_a_receive_buffer_four_times_its_send_buffer() -> None:
    # A 1 KiB item stream's prefetch (4 MiB) fits the receive buffer: with
    # 1 MiB, both sides spent 10-30 % more CPU per item (RECV_BUFFER's note).
    sock = _OptionsSocket()
    SocketTransport(sock)  # type: ignore[arg-type]
    assert sock.options[socket.SOL_SOCKET, socket.SO_SNDBUF] == SOCKET_BUFFER
    assert sock.options[socket.SOL_SOCKET, socket.SO_RCVBUF] == RECV_BUFFER == 4 * SOCKET_BUFFER
