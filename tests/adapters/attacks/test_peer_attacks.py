"""Attacks on rsio and Ditto servers and on any server's connection
handling (idle connections, descriptors running out), under every driver,
each with a well-behaved client busy on a second connection (see
harness.attacked and docs/security.md)."""

from __future__ import annotations

import json
import random
import select
import socket
import time
from pathlib import Path

import pytest

from sansrs.rsio import (
    ClientHello,
    Incomplete,
    OnError,
    OnSubscribe,
    Subscribe,
    decode_message,
    encode_message,
    encode_varint,
)
from sansrs.streams import MAX_DEMAND
from tests.adapters.attacks.conftest import DRIVERS
from tests.adapters.attacks.harness import (
    WAIT,
    GoodClient,
    Target,
    attacked,
    raw,
    read_to_end,
    serves_a_new_client,
)
from tests.adapters.raw_websocket import masked_text, text_messages, upgrade

pytestmark = pytest.mark.timeout(90)


class RsioReader:
    """rsio messages from a byte stream, as they complete (every
    subscription's elements of ``element_size`` bytes; 0: variable)."""

    def __init__(self, element_size: int = 0) -> None:
        self._rest = b""
        self._size = element_size

    def feed(self, data: bytes) -> list[object]:
        buf, pos, out = self._rest + data, 0, []
        while True:
            try:
                message, pos = decode_message(buf, pos, lambda sid: self._size)
            except Incomplete:
                self._rest = buf[pos:]
                return out
            out.append(message)


def test_rsio_large_elements_unbounded_demand_never_read(target: Target) -> None:
    """1,000 subscriptions to 3 MiB elements, unbounded demand, nothing read
    (after the last onSubscribe): the publishers are asked for what the
    connection can send, not for everything."""
    subs = b"".join(
        encode_message(Subscribe("blobs/3", sid, MAX_DEMAND)) for sid in range(1, 1001)
    )
    with attacked(target, "rsio"), raw(target, "rsio") as sock:
        sock.sendall(encode_message(ClientHello(0)) + subs)
        # Read up to the last onSubscribe (the server has taken every
        # subscription), then never again.
        reader, last, read = RsioReader(), False, 0
        while not last:
            chunk = sock.recv(1 << 20)
            assert chunk
            read += len(chunk)
            last = any(
                isinstance(m, OnSubscribe) and m.subscriber_id == 1000 for m in reader.feed(chunk)
            )
        assert read < 64 * 1024 * 1024
        target.check_bounded()


def test_rsio_subscription_flood_beyond_the_limit(target: Target) -> None:
    """2,000 subscriptions: those beyond max_subscriptions (1,024) are
    answered onSubscribe + onError at once, nothing is kept for them."""
    subs = b"".join(encode_message(Subscribe("counter", sid, 1)) for sid in range(1, 2001))
    with attacked(target, "rsio"), raw(target, "rsio") as sock:
        sock.sendall(encode_message(ClientHello(0)) + subs)
        reader, errors = RsioReader(element_size=8), 0
        while errors < 2000 - 1024:
            chunk = sock.recv(1 << 16)
            assert chunk
            errors += sum(isinstance(m, OnError) for m in reader.feed(chunk))


def test_rsio_garbage_truncated_and_oversized(target: Target) -> None:
    rng = random.Random(9)
    huge = bytes([3]) + encode_varint(2**62)  # a Subscribe whose name claims 2**62 bytes
    with attacked(target, "rsio"):
        hello = encode_message(ClientHello(0))
        with raw(target, "rsio") as sock:
            sock.sendall(hello + bytes(rng.getrandbits(8) for _ in range(4096)))
            read_to_end(sock)
        with raw(target, "rsio") as sock:
            sock.sendall(hello + huge)
            read_to_end(sock)  # a goodbye with the reason, then closed
        with raw(target, "rsio") as sock:
            sock.sendall(hello + encode_message(Subscribe("x" * 100, 1))[:20])
            sock.shutdown(socket.SHUT_WR)
            read_to_end(sock)


def _ditto_socket(target: Target) -> socket.socket:
    sock = raw(target, "ditto")
    upgrade(sock, "/ws/2")
    return sock


def test_ditto_header_value_out_of_range_gets_a_400(target: Target) -> None:
    """A header value of 1e999 (infinity to Python) gets Ditto's 400 error
    message, not a 1011 close, and the connection goes on."""
    subscribe = {
        "topic": "org.sansrs.attack/thing/things/twin/streaming/subscribeForPersistedEvents",
        "path": "/",
        "headers": {"x": 1},
    }
    bad = json.dumps(subscribe).replace('"x": 1', '"x": 1e999')
    with attacked(target, "ditto"), _ditto_socket(target) as sock:
        sock.sendall(masked_text(bad) + masked_text(json.dumps(subscribe)))
        error, created = text_messages(sock, 2)
        assert error["topic"].endswith("/errors")  # type: ignore[union-attr]
        assert error["value"]["status"] == 400  # type: ignore[index]
        assert created["topic"].endswith("/streaming/created")  # type: ignore[union-attr]


def test_ditto_garbage_and_floods(target: Target) -> None:
    with attacked(target, "ditto"):
        with _ditto_socket(target) as sock:
            sock.sendall(masked_text("{" * 5000))  # invalid JSON: an error message
            assert text_messages(sock, 1)[0]["value"]["status"] == 400  # type: ignore[index]
        with _ditto_socket(target) as sock:
            sub = json.dumps(
                {
                    "topic": "org.sansrs.attack/thing/things/twin/streaming/"
                    "subscribeForPersistedEvents",
                    "path": "/",
                    "headers": {},
                }
            )
            sock.sendall(masked_text(sub) * 3000)  # a flood of subscriptions, never read
        with raw(target, "ditto") as sock:
            sock.sendall(bytes(random.Random(3).getrandbits(8) for _ in range(2048)) + b"\r\n\r\n")
            assert read_to_end(sock).startswith(b"HTTP/1.1 400")


def test_idle_connections_are_capped_per_server(target: Target) -> None:
    """250 connections that never say hello: at most max_connections (100)
    are kept at a time (under the thread driver: at most that many
    threads); beyond it the oldest still in their handshake are shed to
    make room (``shed_batch``; a new one would be refused were all the
    others past their handshake); served clients are not kept waiting."""
    threads, descriptors = target.threads(), target.descriptors()
    with attacked(target, "rsocket"):
        idle: list[socket.socket] = []
        refused = 0
        try:
            for _ in range(250):
                try:
                    idle.append(raw(target, "rsio"))
                except ConnectionResetError:  # refused before connect returned
                    refused += 1
            # A connection's own thread has a selector and a wake-up pair too.
            per_connection = 4 if target.driver == "thread" else 1
            assert target.descriptors() - descriptors <= per_connection * 100 + 10
            if target.driver == "thread":
                assert target.threads() - threads <= 100 + 10
            # Each hears at once: the rsio server's hello, or its refusal.
            waiting = list(idle)
            while waiting:
                ready, _, _ = select.select(waiting, [], [], WAIT)
                assert ready, "a connection neither refused nor greeted"
                for sock in ready:
                    waiting.remove(sock)
                    try:
                        refused += not sock.recv(64)
                    except ConnectionResetError:
                        refused += 1
            serves_a_new_client(target, "rsocket")  # another server: its own limit
        finally:
            for sock in idle:
                sock.close()


@pytest.mark.parametrize("driver", DRIVERS)
def test_out_of_descriptors_the_server_pauses_accepting_and_serves_the_established(
    driver: str, cert_dir: Path
) -> None:
    """With its descriptors exhausted, the server stops accepting for a
    moment instead of spinning on the listener, logs once, and keeps
    serving its connections; it accepts again once descriptors are back."""
    target = Target(driver, cert_dir, "--nofile", "64", "--only", "rsocket")
    try:
        good = GoodClient(target, "rsocket")
        hogs = []
        try:
            for _ in range(120):  # more than the server has descriptors for
                hogs.append(raw(target, "rsocket"))
            cpu, started = target.cpu_seconds(), time.monotonic()
            exchanges = good.exchanges
            while good.exchanges < exchanges + 20:  # the established client goes on
                assert time.monotonic() - started < 30
                good._stop.wait(0.05)  # pacing: the good client works meanwhile
            spent = target.cpu_seconds() - cpu
            elapsed = time.monotonic() - started
            assert spent < 0.5 * elapsed + 0.2, f"{spent:.2f} s CPU in {elapsed:.2f} s: spinning"
        finally:
            for sock in hogs:
                sock.close()
            good.check()
        for _ in range(100):  # accepted again once descriptors are free
            try:
                serves_a_new_client(target, "rsocket")
                break
            except OSError:
                continue
        else:
            pytest.fail("no client served after the descriptors came back")
        target.check_bounded()
    finally:
        log = target.stop_and_read_log()
    assert log.count("accept failed") <= 2, log[-2000:]


@pytest.mark.parametrize("driver", DRIVERS)
def test_out_of_descriptors_connections_in_their_handshake_are_shed_for_a_good_client(
    driver: str, cert_dir: Path
) -> None:
    """Connections that never send SETUP used to hold every descriptor until
    the handshake timeout, and a new client could not get in meanwhile.
    Out of descriptors, the server sheds the oldest connections still in
    their handshake: with a process limit of 64 and 120 such connections
    open (and a handshake timeout of 30 s), a new client is served at once,
    and the log says so once."""
    target = Target(
        driver, cert_dir, "--nofile", "64", "--only", "rsocket", "--handshake-timeout", "30"
    )
    try:
        hogs = []
        try:
            for _ in range(120):  # more than the server has descriptors for
                hogs.append(raw(target, "rsocket"))
            started = time.monotonic()
            serves_a_new_client(target, "rsocket")  # the hogs all still open
            assert time.monotonic() - started < WAIT
        finally:
            for sock in hogs:
                sock.close()
        target.check_bounded()
    finally:
        log = target.stop_and_read_log()
    assert 1 <= log.count("shedding") <= 2, log[-2000:]
