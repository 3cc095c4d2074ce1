"""``LoopConnection.write_now`` writing the engine's output as pieces
(``Engine.pieces_to_send`` + ``Transport.send_pieces``, one ``sendmsg``)
must put on the wire exactly the bytes ``data_to_send`` would, in order,
whatever the socket takes per call: whole pieces, a piece cut anywhere,
nothing, more pieces than one ``sendmsg`` carries; what it does not take
waits, in order: the tail of the piece it cut copied into the connection's
buffer, the pieces after it kept as they are (not copied)."""

from __future__ import annotations

import operator
import socket
import ssl
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sansrs.adapters.drive.connection import GATHER_AT, LoopConnection
from sansrs.adapters.rsocket.engine import EngineOptions, RSocketEngine
from sansrs.adapters.transport.tcp import MAX_PIECES, SocketTransport
from sansrs.adapters.transport.tls import WRITE_CHUNK, TlsTransport


class _Engine:
    """The output of a protocol engine, as pieces or joined."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.asked: list[int] = []

    def pieces_to_send(self, at_least: int) -> list[bytes] | None:
        self.asked.append(at_least)
        pieces, self.pieces = self.pieces, []
        return pieces

    def data_to_send(self) -> bytes:
        pieces, self.pieces = self.pieces, []
        return b"".join(pieces)

    def wants_close(self) -> bool:
        return False


class _Socket:
    """Takes a scripted number of bytes per call (then everything)."""

    def __init__(self, takes: list[int]) -> None:
        self.takes = takes
        self.wire = bytearray()
        self.offered: list[int] = []

    def fileno(self) -> int:
        return -1

    def send_pieces(self, pieces: list[bytes]) -> int:
        pieces = pieces[:MAX_PIECES]  # one sendmsg's worth (IOV_MAX)
        data = b"".join(pieces)
        self.offered.append(len(pieces))
        n = min(self.takes.pop(0), len(data)) if self.takes else len(data)
        self.wire += data[:n]
        return n

    def send(self, data: Any) -> int:
        n = min(self.takes.pop(0), len(data)) if self.takes else len(data)
        self.wire += bytes(data[:n])
        return n


def _connection(pieces: list[bytes], takes: list[int]) -> tuple[LoopConnection, _Socket]:
    sock = _Socket(takes)
    conn = LoopConnection(object(), sock, _Engine(pieces))  # type: ignore[arg-type]
    return conn, sock


def _unsent(conn: LoopConnection) -> bytes:
    """What waits to be written, in order: the buffer, then the pieces
    after it; never pieces without the buffer (the tests of "anything
    unsent?" read the buffer alone)."""
    assert conn._out or not conn._rest
    assert conn._rest_size == sum(map(len, conn._rest))
    assert conn.buffered == len(conn._out) + conn._rest_size
    return bytes(conn._out) + b"".join(conn._rest)


pieces_st = st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=2500)


@settings(max_examples=120, deadline=None)
@given(pieces=pieces_st, takes=st.lists(st.integers(0, 3000), max_size=6))
def test_write_pieces_put_the_joined_bytes_on_the_wire_in_order(
    pieces: list[bytes], takes: list[int]
) -> None:
    conn, sock = _connection(list(pieces), list(takes))
    conn.write_now(pieces=True)
    joined = b"".join(pieces)
    # Written, then waiting in the buffer: the output, once, in order.
    assert bytes(sock.wire) + _unsent(conn) == joined
    sock.takes = []
    conn._write(b"")  # the reactor's later turn flushes the buffer
    assert bytes(sock.wire) == joined
    assert not _unsent(conn)


@pytest.mark.parametrize("take", [0, 1, 9, 10, 11, 19, 20])
def test_write_pieces_cut_at_and_around_piece_boundaries(take: int) -> None:
    pieces = [b"a" * 10, b"", b"b" * 10, b"c" * 10]
    conn, sock = _connection(list(pieces), [take])
    conn.write_now(pieces=True)
    assert bytes(sock.wire) == b"".join(pieces)[:take]
    assert _unsent(conn) == b"".join(pieces)[take:]
    assert sock.offered == [4]  # one call: it stopped taking


def test_write_pieces_more_than_one_sendmsg_carries_go_in_batches() -> None:
    pieces = [b"%d," % i for i in range(2 * MAX_PIECES + 5)]
    conn, sock = _connection(list(pieces), [])
    conn.write_now(pieces=True)
    assert sock.offered == [MAX_PIECES, MAX_PIECES, 5]
    assert bytes(sock.wire) == b"".join(pieces) and not _unsent(conn)


def test_write_pieces_after_older_bytes_the_socket_takes_whole() -> None:
    """Bytes left from an earlier write go first; once the socket has taken
    them all, the engine's output follows as pieces (not joined and copied
    in behind them: bench_tcp.py stream1k while the reader is behind)."""
    conn, sock = _connection([b"new"], [3])
    conn._out += b"old"
    engine: _Engine = conn.engine  # type: ignore[assignment]
    conn.write_now(pieces=True)
    assert engine.asked == [GATHER_AT]
    assert bytes(sock.wire) == b"oldnew" and not conn._out


def test_write_pieces_leave_the_output_in_the_engine_while_older_bytes_wait() -> None:
    """A socket that does not take the older bytes whole takes nothing more
    this turn: the engine keeps its output (nothing copied into the
    buffer), and a later turn with room writes it after them, in order."""
    conn, sock = _connection([b"new"], [2])
    conn._out += b"old"
    engine: _Engine = conn.engine  # type: ignore[assignment]
    conn.write_now(pieces=True)
    assert engine.asked == [] and engine.pieces == [b"new"]
    assert bytes(sock.wire) == b"ol" and bytes(conn._out) == b"d"
    conn.write_now(pieces=True)  # the socket has room again
    assert bytes(sock.wire) == b"oldnew" and not conn._out and not engine.pieces


def test_rsocket_engine_gives_pieces_only_for_a_large_output() -> None:
    """Below ``GATHER_AT`` queued bytes the engine's output is joined
    (``data_to_send``: cheaper for small frames, bench_tcp.py rr64); from
    it on it comes as pieces whose concatenation is that output."""
    engine = RSocketEngine.client(EngineOptions(), None)
    engine.conn.data_to_send()  # the SETUP
    sid = engine.conn.request_stream(b"q", initial_n=1)
    assert engine.pieces_to_send(GATHER_AT) is None
    assert engine.conn.queued_output  # left for data_to_send
    engine.conn.data_to_send()
    for _ in range(80):
        engine.conn.request_n(sid, 1)  # small frames, 1 KiB of them and more
    big = engine.conn.queued_output
    engine.conn.metadata_push(b"m" * GATHER_AT)
    pieces = engine.pieces_to_send(GATHER_AT)
    assert pieces is not None and len(pieces) > 2
    assert sum(map(len, pieces)) == big + GATHER_AT + 9
    assert engine.conn.queued_output == 0


def test_socket_transport_send_pieces_writes_them_in_order() -> None:
    a, b = socket.socketpair()
    try:
        transport = SocketTransport(a)
        pieces = [b"%d;" % i for i in range(MAX_PIECES + 10)]
        sent = transport.send_pieces(pieces)
        expected = b"".join(pieces[:MAX_PIECES])  # one sendmsg: the first MAX_PIECES
        assert sent == len(expected)
        got = b""
        while len(got) < sent:
            got += b.recv(65536)
        assert got == expected
    finally:
        a.close()
        b.close()


def test_write_now_mid_turn_joins_the_output() -> None:
    """An engine's own mid-turn write (answers: ``write_now()``) takes the
    joined output without asking for pieces; the turn's write asks."""
    conn, sock = _connection([b"a" * 10, b"b" * 10], [])
    engine: _Engine = conn.engine  # type: ignore[assignment]
    conn.write_now()
    assert engine.asked == [] and bytes(sock.wire) == b"a" * 10 + b"b" * 10
    engine.pieces = [b"c"]
    conn.write_now(pieces=True)
    assert engine.asked == [GATHER_AT] and bytes(sock.wire).endswith(b"c")


def test_write_pieces_keep_the_pieces_after_the_cut_uncopied() -> None:
    """A socket that stops taking mid-output leaves the tail of the piece
    it cut in the buffer (one piece copied at most) and the pieces after
    it as they are, the same objects (bench_tcp.py stream1k, stream1kb:
    copying them cost the server a copy of most of its output while the
    reader was behind)."""
    pieces = [b"h" * 9, b"a" * 1000, b"h" * 9, b"b" * 1000, b"h" * 9, b"c" * 1000]
    conn, sock = _connection(list(pieces), [500])
    conn.write_now(pieces=True)
    assert bytes(conn._out) == b"a" * 509
    assert all(map(operator.is_, conn._rest, pieces[2:]))
    assert conn.buffered == 509 + 9 + 1000 + 9 + 1000
    # The next write: the buffer, then the pieces, in one call; cut again
    # in a piece.
    sock.takes = [509 + 600]
    conn._write(b"")
    assert sock.offered == [6, 5]
    assert bytes(conn._out) == b"b" * 409 and all(map(operator.is_, conn._rest, pieces[4:]))
    # Cut right after the buffer: the next piece becomes the buffer.
    sock.takes = [409]
    conn._write(b"")
    assert bytes(conn._out) == b"h" * 9 and conn._rest == [pieces[5]]
    sock.takes = []
    conn._write(b"")
    assert bytes(sock.wire) == b"".join(pieces) and not _unsent(conn) and not conn._rest


def test_write_bytes_while_pieces_wait_go_after_them() -> None:
    """Output written while cut pieces wait (an engine's joined output,
    ``write_bytes``) goes after them, not into the buffer ahead of them."""
    conn, sock = _connection([b"x" * 10, b"y" * 10, b"z" * 10], [5, 0, 0])
    engine: _Engine = conn.engine  # type: ignore[assignment]
    conn.write_now(pieces=True)
    assert bytes(conn._out) == b"x" * 5 and conn._rest
    engine.pieces = [b"later"]
    conn.write_now()  # joined: data_to_send
    conn.write_bytes(b"!")
    assert _unsent(conn) == b"x" * 5 + b"y" * 10 + b"z" * 10 + b"later!"
    conn._write(b"")
    assert bytes(sock.wire) == b"x" * 10 + b"y" * 10 + b"z" * 10 + b"later!"
    assert not _unsent(conn)


_op_st = st.one_of(
    st.tuples(st.just("pieces"), st.lists(st.binary(max_size=30), min_size=1, max_size=60)),
    st.tuples(st.just("joined"), st.lists(st.binary(max_size=30), max_size=5)),
    st.tuples(st.just("flush"), st.just([])),
)


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(_op_st, max_size=12), takes=st.lists(st.integers(0, 400), max_size=20))
def test_writes_of_pieces_and_bytes_in_any_order_reach_the_wire_in_order(
    ops: list[tuple[str, list[bytes]]], takes: list[int]
) -> None:
    """Every mix of the turn's writes of pieces, joined writes and flushes,
    whatever the socket takes per call: the wire, then what waits (the
    connection's, then what the engine kept), is everything written, once,
    in order."""
    conn, sock = _connection([], list(takes))
    engine: _Engine = conn.engine  # type: ignore[assignment]
    expected = b""
    for kind, pieces in ops:
        engine.pieces += pieces  # after what the engine kept (a full socket)
        expected += b"".join(pieces)
        if kind == "pieces":
            conn.write_now(pieces=True)
        elif kind == "joined":
            conn.write_now()
        else:
            conn._write(b"")
        assert bytes(sock.wire) + _unsent(conn) + b"".join(engine.pieces) == expected
    sock.takes = []
    conn.write_now(pieces=True)
    assert bytes(sock.wire) == expected and not _unsent(conn) and not engine.pieces


class _TlsLike(TlsTransport):
    """``TlsTransport``'s own ``send_pieces`` over a ``send`` that takes
    what an SSL socket with room takes: up to ``WRITE_CHUNK`` per call."""

    def __init__(self) -> None:  # no socket: send is the fake below
        self.wire = bytearray()

    def fileno(self) -> int:
        return -1

    def send(self, data: Any) -> int:
        n = min(len(data), WRITE_CHUNK)
        self.wire += bytes(data[:n])
        return n


def test_tls_write_pieces_of_many_small_frames_put_each_byte_once() -> None:
    """Over TLS (``send_pieces`` joins the pieces: no ``sendmsg``), a large
    output of more pieces than one ``sendmsg`` carries (small frames sent one
    at a time) reaches the wire once, in order. It joined every piece while
    the connection counted the first ``MAX_PIECES``: the bytes past them went
    out twice (a broken frame stream)."""
    pieces = [b"%08d" % i for i in range(3 * MAX_PIECES)]
    transport = _TlsLike()
    conn = LoopConnection(object(), transport, _Engine(list(pieces)))  # type: ignore[arg-type]
    conn.write_now(pieces=True)
    assert bytes(transport.wire) + _unsent(conn) == b"".join(pieces)
    conn._write(b"")
    assert bytes(transport.wire) == b"".join(pieces) and not _unsent(conn)


class _SslSocket:
    """An SSL socket whose writes are scripted: ``want`` raises
    SSLWantWriteError, a number takes that many bytes. Records what each
    write was offered."""

    def __init__(self, script: list[int | str]) -> None:
        self.script = script
        self.offered: list[bytes] = []
        self.wire = bytearray()

    def fileno(self) -> int:
        return -1

    def send(self, data: memoryview) -> int:
        self.offered.append(bytes(data))
        step = self.script.pop(0) if self.script else len(data)
        if step == "want":
            raise ssl.SSLWantWriteError
        n = min(int(step), len(data))
        self.wire += data[:n]
        return n


def test_tls_write_retried_after_want_write_is_offered_the_same_bytes() -> None:
    """OpenSSL wants a write that failed with WANT_WRITE repeated with the
    same bytes: the buffer and the pieces waiting behind it are offered in
    one call, as the failed write offered them, whatever was written in
    between (it goes after them)."""
    pieces = [b"%05d" % i for i in range(300)]
    transport = TlsTransport.__new__(TlsTransport)
    transport._handshaken, transport._retry = True, 0
    ssl_sock = transport.sock = _SslSocket([7, "want", "want"])  # type: ignore[assignment]
    conn = LoopConnection(object(), transport, _Engine(list(pieces)))  # type: ignore[arg-type]
    conn.write_now(pieces=True)  # 7 bytes taken: a piece cut, the rest waits
    assert conn._rest
    conn.write_bytes(b"later")  # queued behind them; the write: WANT_WRITE
    conn._write(b"")  # WANT_WRITE again
    conn._write(b"")  # room
    failed = ssl_sock.offered[1]
    assert ssl_sock.offered[2] == failed and ssl_sock.offered[3] == failed
    conn._write(b"")  # what followed
    assert bytes(ssl_sock.wire) == b"".join(pieces) + b"later" and not _unsent(conn)
