"""reactive-streams-io end to end over TCP on 127.0.0.1 (and WebSocket, Unix
sockets): the engine on the shared drivers (thread per connection and the
selector loop), the sync API, the demo publishers and the CLI."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsio import FixedSizePublisher, RsioError, Server, connect, serve
from sansrs.adapters.rsio.demo import BLOB_SIZE, CounterPublisher, blob, demo_publishers

from sansrs.rsio import (
    ClientHello,
    Goodbye,
    GoodbyeAck,
    Incomplete,
    OnComplete,
    OnError,
    OnNext,
    OnNextPacked,
    OnSubscribe,
    ServerHello,
    Subscribe,
    decode_message,
    encode_message,
)
from sansrs.streams import CollectingSubscriber, from_generator, from_iterable

WAIT = 20.0


@pytest.fixture(params=["thread", "selector"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    with serve("tcp://127.0.0.1:0", demo_publishers, loop=request.param) as s:
        yield s


def counters(n: int) -> list[int]:
    return list(range(n))


def test_subscribe_iterates_elements(server: Server) -> None:
    with connect(server.url) as client:
        got = [int.from_bytes(e, "big") for e in client.subscribe("counter/1000", 64, WAIT)]
    assert got == counters(1000)


def test_subscribe_packed_gets_batches_of_fixed_size_elements(server: Server) -> None:
    with connect(server.url) as client, client.subscribe_packed(
        "counter/100000", prefetch=4096, timeout=WAIT
    ) as batches:
        data = b"".join(batches)
        assert batches.element_size == 8
    assert len(data) == 800_000
    assert [int.from_bytes(data[i : i + 8], "big") for i in (0, 8, 799_992)] == [0, 1, 99_999]


def test_large_elements_are_split_and_joined(server: Server) -> None:
    with connect(server.url) as client:
        got = list(client.subscribe("blobs/2", 2, WAIT))
    assert got == [blob(0), blob(1)]
    assert len(got[0]) == BLOB_SIZE


def test_cancel_stops_an_infinite_stream_and_the_connection_goes_on(server: Server) -> None:
    with connect(server.url) as client:
        with client.subscribe("counter", 16, WAIT) as it:
            first = [next(it) for _ in range(40)]
        assert int.from_bytes(first[-1], "big") == 39
        again = list(client.subscribe("counter/3", 16, WAIT))
    assert [int.from_bytes(e, "big") for e in again] == [0, 1, 2]


def test_unknown_publisher_is_an_on_error(server: Server) -> None:
    with connect(server.url) as client, pytest.raises(RsioError, match="no publisher named"):
        list(client.subscribe("nope", 4, WAIT))


def test_packed_on_a_variable_stream_fails(server: Server) -> None:
    with connect(server.url) as client, pytest.raises(ValueError, match="not a fixed-size"):
        list(client.subscribe_packed("blobs/1", timeout=WAIT))


def test_remote_publisher_feeds_a_subscriber(server: Server) -> None:
    done = threading.Event()
    with connect(server.url) as client:
        subscriber: CollectingSubscriber[bytes] = CollectingSubscriber(
            prefetch=8, on_done=lambda s: done.set()
        )
        client.publisher("counter/20").subscribe(subscriber)
        assert done.wait(WAIT)
    assert [int.from_bytes(e, "big") for e in subscriber.items] == counters(20)
    assert subscriber.completed


def test_both_sides_publish_on_one_connection() -> None:
    client_side = {"from-client": from_iterable([b"a", b"b", b"c"])}
    with serve("tcp://127.0.0.1:0", {"counter/2": CounterPublisher(2)}) as server, connect(
        server.url, publishers=client_side
    ) as client:
        assert [int.from_bytes(e, "big") for e in client.subscribe("counter/2", 4, WAIT)] == [0, 1]
        (peer,) = server.peers
        assert list(peer.subscribe("from-client", 4, WAIT)) == [b"a", b"b", b"c"]


def test_many_concurrent_subscriptions(server: Server) -> None:
    with connect(server.url) as client:
        its = [client.subscribe(f"counter/{50 + i}", 8, WAIT) for i in range(20)]
        for i, it in enumerate(its):
            assert len(list(it)) == 50 + i


def test_protocol_error_from_a_raw_peer_gets_goodbye_and_close(server: Server) -> None:
    host, port = server.endpoint.host, server.endpoint.port
    with socket.create_connection((host, port), timeout=WAIT) as sock:
        sock.sendall(encode_message(ClientHello(0)) + b"\x7f")  # unknown type
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    msgs: list[Any] = []
    pos = 0
    while pos < len(data):
        msg, pos = decode_message(data, pos)
        msgs.append(msg)
    assert isinstance(msgs[-1], Goodbye)
    assert "unknown message type 0x7f" in msgs[-1].reason
    # The server is unaffected.
    with connect(server.url) as client:
        assert len(list(client.subscribe("counter/3", 4, WAIT))) == 3


def test_raw_peer_demand_is_respected(server: Server) -> None:
    host, port = server.endpoint.host, server.endpoint.port
    with socket.create_connection((host, port), timeout=WAIT) as sock:
        sock.sendall(encode_message(ClientHello(0)) + encode_message(Subscribe("counter", 1, 3)))
        want = 3 + 3 + 2 + 3 * 8  # serverHello, onSubscribe(1, 8), packed header, 3 elements
        data = b""
        while len(data) < want:
            data += sock.recv(65536)
        sock.settimeout(0.2)
        with pytest.raises(TimeoutError):
            data += sock.recv(65536)  # nothing beyond the demand of 3
    assert data.endswith(b"\x22\x01\x03" + b"".join(i.to_bytes(8, "big") for i in range(3)))


def test_connection_lost_fails_open_subscriptions() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    t = threading.Thread(target=lambda: accepted.append(listener.accept()[0]))
    t.start()
    with connect(f"tcp://127.0.0.1:{port}") as client:
        it = client.subscribe("x", 4, WAIT)
        t.join(WAIT)
        accepted[0].close()
        with pytest.raises(ConnectionClosed):
            next(it)
    listener.close()


def sansrs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sansrs", *args], capture_output=True, text=True, timeout=WAIT
    )


def test_cli_serve_rsio_and_subscribe() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sansrs", "serve", "--protocol", "rsio", "tcp://127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, url = proc.stdout.readline().split()
        assert ready == "READY"
        result = sansrs("subscribe", url, "counter/4")
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == ["0", "1", "2", "3"]
        result = sansrs("subscribe", url, "blobs", "--limit", "1")
        assert result.stdout.splitlines() == ["<3145728 bytes 0000000000000000...>"]
        result = sansrs("subscribe", url, "counter", "--limit", "2")
        assert result.stdout.splitlines() == ["0", "1"]
        result = sansrs("subscribe", url, "missing")
        assert result.returncode == 2
        assert "no publisher named 'missing'" in result.stderr
    finally:
        proc.terminate()
        assert proc.wait(WAIT) == 0


@pytest.mark.parametrize("scheme", ["ws", "unix"])
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_other_transports_carry_rsio_unchanged(
    scheme: str, loop: str, tmp_path: Any
) -> None:
    url = "ws://127.0.0.1:0/rsio" if scheme == "ws" else f"unix://{tmp_path}/rsio.sock"
    with serve(url, demo_publishers, loop=loop) as server, connect(server.url, loop=loop) as c:
        data = b"".join(c.subscribe_packed("counter/50000", prefetch=1024, timeout=WAIT))
        assert len(data) == 400_000
        assert data[-8:] == (49_999).to_bytes(8, "big")
        assert list(c.subscribe("blobs/1", 1, WAIT)) == [blob(0)]


def test_non_bytes_elements_fail_the_subscription_with_on_error() -> None:
    from sansrs.streams import range_publisher

    with serve("tcp://127.0.0.1:0", {"ints": range_publisher(0, 3)}) as server, connect(
        server.url
    ) as client, pytest.raises(RsioError, match="must be bytes or str, not int"):
        list(client.subscribe("ints", 4, WAIT))


def _raw_peer_reading_until_goodbye() -> tuple[socket.socket, int, Any]:
    """A listener whose accepted peer says serverHello, then waits for the
    client's goodbye; returns (listener, port, accept-and-read function)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def accept_and_read_goodbye() -> tuple[socket.socket, Goodbye]:
        sock, _ = listener.accept()
        sock.settimeout(WAIT)
        sock.sendall(encode_message(ServerHello(0)))
        data = b""
        while True:
            chunk = sock.recv(65536)
            assert chunk, "the client closed before saying goodbye"
            data += chunk
            pos = 0
            while pos < len(data):
                try:
                    msg, end = decode_message(data, pos)
                except Exception:
                    break  # incomplete: read more
                pos = end
                if isinstance(msg, Goodbye):
                    return sock, msg

    return listener, listener.getsockname()[1], accept_and_read_goodbye


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_graceful_close_waits_for_the_goodbye_acknowledgement(loop: str) -> None:
    """Orderly close (docs/protocols/rsio.md): after its goodbye the closing
    side keeps the connection open until the peer's goodbyeAck, then closes."""
    listener, port, accept = _raw_peer_reading_until_goodbye()
    result: list[tuple[socket.socket, Goodbye]] = []
    with listener:
        client = connect(f"tcp://127.0.0.1:{port}", loop=loop)
        t = threading.Thread(target=lambda: result.append(accept()))
        t.start()
        closer = threading.Thread(target=client.close, args=(WAIT,))
        closer.start()
        t.join(WAIT)
        sock, goodbye = result[0]
        with sock:
            assert goodbye.reason == "closed by the application"
            # Still open: the client waits for the acknowledgement.
            sock.settimeout(0.3)
            with pytest.raises(TimeoutError):
                sock.recv(1)
            assert closer.is_alive()
            sock.settimeout(WAIT)
            sock.sendall(encode_message(GoodbyeAck("bye")))
            closer.join(WAIT)
            assert not closer.is_alive()
            assert sock.recv(1) == b""  # closed right after the acknowledgement


def test_graceful_close_gives_up_waiting_after_close_timeout() -> None:
    """A peer that never acknowledges: the close completes after
    ``LoopConfig.close_timeout`` instead of hanging."""
    from sansrs.adapters.drive import Loop, LoopConfig

    loop = Loop(LoopConfig(close_timeout=0.2), name="rsio-close-timeout").start()
    listener, port, accept = _raw_peer_reading_until_goodbye()
    result: list[tuple[socket.socket, Goodbye]] = []
    try:
        with listener:
            client = connect(f"tcp://127.0.0.1:{port}", loop=loop)
            t = threading.Thread(target=lambda: result.append(accept()))
            t.start()
            client.close(WAIT)
            t.join(WAIT)
            sock, _ = result[0]
            with sock:
                sock.settimeout(WAIT)
                assert sock.recv(1) == b""
    finally:
        loop.stop(WAIT)


def _gen_publisher(n: int) -> Any:
    """A Publisher over a generator: its length is unknown ahead."""
    return from_generator(lambda: (bytes([i]) for i in range(n)))


def _raw_subscribe_exactly(port: int, name: str, demand: int) -> list[Any]:
    """A raw consumer: subscribes to ``name`` with exactly ``demand`` and
    never asks for more; returns what arrived up to onComplete / onError
    (a TimeoutError if neither came)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as sock:
        sock.sendall(encode_message(ClientHello(0)) + encode_message(Subscribe(name, 1, demand)))
        data, pos, msgs, sizes = b"", 0, [], {}
        while True:
            chunk = sock.recv(65536)  # TimeoutError if the completion never comes
            assert chunk, "the server closed"
            data += chunk
            while True:
                try:
                    msg, end = decode_message(data, pos, sizes.get)
                except Incomplete:
                    break
                pos = end
                msgs.append(msg)
                if isinstance(msg, OnSubscribe):
                    sizes[msg.subscriber_id] = msg.element_size
                if isinstance(msg, OnComplete | OnError):
                    return msgs


@pytest.mark.parametrize("loop", ["thread", "selector"])
@pytest.mark.parametrize(
    "name",
    ["counter/2", "counter/0", "gen/2", "gen/0", "list/2", "counterpub/2", "fixedbuf/2",
     "fixedgen/2"],
)
@pytest.mark.timeout(30)
def test_rsio_stream_of_n_requested_exactly_n_completes(name: str, loop: str) -> None:
    """A consumer that asks for exactly the N items a stream has gets its
    onComplete right behind the last one, without asking for more (as
    Reactor's range and fromIterable do): a packed counter knows its N, a
    generator is looked one item ahead."""
    publishers = {
        "counter/2": CounterPublisher(2),  # read in bulk (packed_reader)
        "counter/0": CounterPublisher(0),
        "gen/2": _gen_publisher(2),
        "gen/0": _gen_publisher(0),
        "list/2": from_iterable([b"a", b"b"]),
        "counterpub/2": _SubscribeOnly(CounterPublisher(2)),  # its Publisher face
        "fixedbuf/2": FixedSizePublisher(8, bytes(16)),  # a buffer: read in bulk
        "fixedgen/2": FixedSizePublisher(8, lambda: (bytes(8) for _ in range(2))),
    }
    with serve("tcp://127.0.0.1:0", publishers, loop=loop) as server:
        msgs = _raw_subscribe_exactly(server.endpoint.port, name, 2)
    assert isinstance(msgs[-1], OnComplete), msgs
    elements = sum(
        len(m.elements) // 8 if isinstance(m, OnNextPacked) else 1
        for m in msgs
        if isinstance(m, OnNext | OnNextPacked)
    )
    assert elements == (0 if name.endswith("/0") else 2)


class _SubscribeOnly:
    """Only the Publisher face of ``publisher`` (no packed reader, no size)."""

    def __init__(self, publisher: Any) -> None:
        self._publisher = publisher

    def subscribe(self, subscriber: Any) -> None:
        self._publisher.subscribe(subscriber)
