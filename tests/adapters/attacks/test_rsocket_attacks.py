"""Attacks on RSocket servers (TCP, TLS, WebSocket, resumable) under every
driver, each with a well-behaved client busy on a second connection: the
server stays under MAX_RSS_MIB, the good client never waits MAX_STALL, and
the server serves new clients afterwards (harness.attacked). See
docs/security.md for the limits each attack runs into."""

from __future__ import annotations

import random
import socket
import ssl
from collections.abc import Iterator

import pytest

from sansrs.rsocket import (
    ErrorCode,
    ErrorFrame,
    Frame,
    PayloadFrame,
    RequestFnfFrame,
    RequestResponseFrame,
    SetupFrame,
    decode_frame,
    encode_frame_prefixed,
)
from tests.adapters.attacks.harness import (
    Target,
    attacked,
    client_tls,
    raw,
    read_to_end,
    read_unacknowledged_then_vanish,
    send_until_closed,
)
from tests.adapters.raw_websocket import upgrade

pytestmark = pytest.mark.timeout(90)

SETUP = encode_frame_prefixed(
    SetupFrame(
        keepalive_interval=30_000,
        max_lifetime=120_000,
        metadata_mime_type="application/octet-stream",
        data_mime_type="application/octet-stream",
    )
)


def frames(data: bytes) -> list[Frame]:
    """The whole frames of a length-prefixed byte stream."""
    out, off = [], 0
    while off + 3 <= len(data):
        n = int.from_bytes(data[off : off + 3], "big")
        if off + 3 + n > len(data):
            break
        out.append(decode_frame(data[off + 3 : off + 3 + n]))
        off += 3 + n
    return out


def connection_error(data: bytes) -> str:
    """The message of the ERROR[CONNECTION_ERROR] among ``data``'s frames."""
    for f in frames(data):
        if isinstance(f, ErrorFrame) and f.stream_id == 0:
            assert f.error_code == ErrorCode.CONNECTION_ERROR
            return f.message
    raise AssertionError(f"no connection error in {frames(data)[:5]}")


def test_fragment_flood_fails_the_connection_below_the_mean_fragment_size(target: Target) -> None:
    """Millions of 2-byte FOLLOWS fragments of one request: once more than
    FRAGMENT_GRACE (1024) fragments average below min_mean_fragment_size
    (256 bytes) the connection fails, long before max_fragments (65,536)
    would reject the request; the server spends next to no CPU on the rest
    (before: 75 ms a MiB, about 10 s for the ten million)."""
    fragment = encode_frame_prefixed(PayloadFrame(1, b"ab", follows=True, next=True))
    chunk = fragment * 8192
    cpu = target.cpu_seconds()
    with attacked(target, "rsocket"), raw(target, "rsocket") as sock:
        sock.sendall(SETUP + encode_frame_prefixed(RequestResponseFrame(1, b"ab", follows=True)))
        assert send_until_closed(sock, (chunk for _ in range(10_000_000 // 8192)))
        message = connection_error(read_to_end(sock))
        assert "averaging 8 bytes, below min_mean_fragment_size (256)" in message
    spent = target.cpu_seconds() - cpu
    assert spent < 2.0, f"{spent:.2f} s of CPU"  # the good client's exchanges included


def test_fire_and_forget_reassemblies_without_end_fail_the_connection(target: Target) -> None:
    """Fire-and-forgets with F set, each a new reassembly: at
    max_reassemblies (256) the connection fails."""
    fnfs = (
        b"".join(
            encode_frame_prefixed(RequestFnfFrame(sid, b"x", follows=True))
            for sid in range(start, start + 2000, 2)
        )
        for start in range(1, 2_000_000, 2000)
    )
    with attacked(target, "rsocket"), raw(target, "rsocket") as sock:
        sock.sendall(SETUP)
        send_until_closed(sock, fnfs)  # the server closes it long before the end
        assert "more than 256 fragmented payloads" in connection_error(read_to_end(sock))


def test_unfinished_large_requests_are_bounded_per_connection(target: Target) -> None:
    """20 requests of 16 MiB, none finished, each within the 64 MiB payload
    limit: the connection's reassemblies hold at most 80 MiB, then it fails."""
    mib = b"r" * (1024 * 1024 - 64)

    def requests() -> Iterator[bytes]:
        for i in range(20):
            sid = 2 * i + 1
            yield encode_frame_prefixed(RequestResponseFrame(sid, mib, follows=True))
            for _ in range(15):
                yield encode_frame_prefixed(PayloadFrame(sid, mib, follows=True, next=True))

    with attacked(target, "rsocket"), raw(target, "rsocket") as sock:
        sock.sendall(SETUP)
        send_until_closed(sock, requests())
        message = connection_error(read_to_end(sock))
        assert "hold more than 83886080 bytes" in message


def test_setup_trickled_in_small_pieces_costs_linear_time(target: Target) -> None:
    """A 16 MiB SETUP sent 4 KiB at a time is accepted at the cost of its
    bytes (no quadratic buffering before SETUP)."""
    body = b"s" * (16 * 1024 * 1024 - 100)
    setup = encode_frame_prefixed(
        SetupFrame(
            keepalive_interval=30_000,
            max_lifetime=120_000,
            metadata_mime_type="a",
            data_mime_type="b",
            data=body,
        )
    )
    request = encode_frame_prefixed(RequestResponseFrame(1, b"after"))
    with attacked(target, "rsocket"), raw(target, "rsocket") as sock:
        before = target.cpu_seconds()
        view = memoryview(setup)
        for off in range(0, len(setup), 4096):
            sock.sendall(view[off : off + 4096])
        sock.sendall(request)
        answer = b""
        while not frames(answer):
            chunk = sock.recv(65536)
            assert chunk, "the trickled SETUP was not accepted"
            answer += chunk
        assert isinstance(frames(answer)[0], PayloadFrame)  # the request was answered
        spent = target.cpu_seconds() - before
        assert spent < 5.0, f"{spent:.1f} s of CPU for a 16 MiB SETUP"


def test_request_flood_never_read(target: Target) -> None:
    """20,000 pipelined requests whose answers are never read: the server
    answers them in turns that leave room for other connections, and stops
    reading from that peer once its output backs up."""
    flood = b"".join(
        encode_frame_prefixed(RequestResponseFrame(sid, b"q")) for sid in range(1, 40_000, 2)
    )
    with attacked(target, "rsocket"), raw(target, "rsocket") as sock:
        sock.sendall(SETUP + flood)


def test_garbage_truncated_and_oversized_frames_are_refused(target: Target) -> None:
    rng = random.Random(20)
    # A whole frame of random bytes first (so it is judged at once), then more.
    garbage = (100).to_bytes(3, "big") + bytes(rng.getrandbits(8) for _ in range(65536))
    truncated = SETUP + encode_frame_prefixed(RequestResponseFrame(1, b"x" * 1000))[:500]
    oversized = (0xFFFFFF).to_bytes(3, "big") + b"\x00" * 6  # above the 1 MiB limit
    with attacked(target, "rsocket"):
        with raw(target, "rsocket") as sock:
            send_until_closed(sock, iter([garbage]))
            read_to_end(sock)  # closed, after an ERROR if the garbage parsed as a frame
        with raw(target, "rsocket") as sock:
            sock.sendall(truncated)
            sock.shutdown(socket.SHUT_WR)
            assert frames(read_to_end(sock)) == []  # the peer ended mid-frame: closed
        with raw(target, "rsocket-small") as sock:
            sock.sendall(SETUP + oversized)
            message = connection_error(read_to_end(sock))
            assert "exceeds the maximum frame size 1048576" in message


def test_slow_handshakes_are_dropped(target: Target) -> None:
    """Connections that never finish their TCP, TLS, WebSocket or RSocket
    opening are dropped after handshake_timeout (2 s here), all at once."""
    with attacked(target, "rsocket"):
        stuck = [
            raw(target, "rsocket"),  # silent
            raw(target, "rsocket"),  # half a SETUP
            raw(target, "rsocket-tls"),  # no ClientHello
            raw(target, "rsocket-ws"),  # no upgrade request
            raw(target, "rsocket-ws"),  # half an upgrade request
        ]
        stuck[1].sendall(SETUP[:7])
        stuck[4].sendall(b"GET /rsocket HTTP/1.1\r\nHost: x\r\n")
        for sock in stuck:
            with sock:
                read_to_end(sock)  # returns once the server dropped it


def test_tls_garbage_and_untrusted_clients(target: Target) -> None:
    with attacked(target, "rsocket-tls"):
        with raw(target, "rsocket-tls") as sock:
            sock.sendall(b"\x16\x03\x01\xff\xff" + b"\x00" * 4096)  # a ClientHello too long
            read_to_end(sock)
        with raw(target, "rsocket-tls") as sock:
            sock.sendall(bytes(random.Random(4).getrandbits(8) for _ in range(8192)))
            read_to_end(sock)
        stranger = ssl.create_default_context()  # trusts no test CA
        with raw(target, "rsocket-tls") as sock, pytest.raises(ssl.SSLError):
            stranger.wrap_socket(sock, server_hostname="localhost")
        ok = client_tls()
        with raw(target, "rsocket-tls") as sock, ok.wrap_socket(sock, server_hostname="localhost"):
            pass


def _mask(payload: bytes, key: bytes) -> bytes:
    return bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def test_websocket_pings_never_read(target: Target) -> None:
    """Pings whose Pongs are never read: the server keeps one Pong pending,
    not one per Ping."""
    key = b"\x01\x02\x03\x04"
    ping = bytes([0x89, 0x80 | 125]) + key + _mask(b"p" * 125, key)
    with attacked(target, "rsocket-ws"), raw(target, "rsocket-ws") as sock:
        upgrade(sock, "/rsocket")
        sock.sendall(ping * 30_000)


def test_websocket_garbage_and_oversized_frames(target: Target) -> None:
    key = b"\x05\x06\x07\x08"
    huge = bytes([0x82, 0x80 | 127]) + (1 << 62).to_bytes(8, "big") + key + b"x" * 64
    with attacked(target, "rsocket-ws"):
        with raw(target, "rsocket-ws") as sock:
            rng = random.Random(6)
            sock.sendall(bytes(rng.getrandbits(8) for _ in range(8192)) + b"\r\n\r\n")
            assert read_to_end(sock).startswith(b"HTTP/1.1 400")  # the upgrade is refused
        with raw(target, "rsocket-ws") as sock:  # a head over 64 KiB, whole in one send
            filler = "".join(f"X-Fill-{i}: {'a' * 1000}\r\n" for i in range(98))
            sock.sendall(
                f"GET /rsocket HTTP/1.1\r\nHost: 127.0.0.1\r\n{filler}\r\n".encode()
            )
            assert read_to_end(sock).startswith(b"HTTP/1.1 431")
        with raw(target, "rsocket-ws") as sock:  # a key that is not 16 bytes in base64
            sock.sendall(
                b"GET /rsocket HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Key: short\r\n"
                b"Sec-WebSocket-Version: 13\r\n\r\n"
            )
            assert read_to_end(sock).startswith(b"HTTP/1.1 400")
        with raw(target, "rsocket-ws") as sock:
            upgrade(sock, "/rsocket")
            sock.sendall(huge)
            closing = read_to_end(sock)
            assert closing[:2] == b"\x88\x02" or closing[:1] == b"\x88"  # a Close
            assert int.from_bytes(closing[2:4], "big") == 1009  # message too big


@pytest.mark.parametrize("target", ["thread", "selector"], indirect=True)
def test_resumable_sessions_that_read_without_acknowledging_then_vanish(
    target: Target,
) -> None:
    """Sessions read their streams but never acknowledge a position, then
    vanish: what they retain is bounded by the server's shared budget
    (SessionStore max_retained), not by sessions x resume_buffer_size.
    (Resumable RSocket has no asyncio server.)"""
    with attacked(target, "rsocket-resume"):
        for _ in range(12):
            read_unacknowledged_then_vanish(target, "rsocket-resume", 8 * 1024 * 1024)
