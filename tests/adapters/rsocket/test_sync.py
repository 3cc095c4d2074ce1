"""The synchronous RSocket API end to end over TCP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket.client import Client, connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.errors import RSocketError
from sansrs.adapters.rsocket.peer import RSocketPeer
from sansrs.adapters.rsocket.server import Server, serve
from sansrs.adapters.rsocket.types import Payload, Request

WAIT = 10.0


def test_request_response_echoes_data_and_metadata(client: Client) -> None:
    assert client.request_response(b"hello", b"md", timeout=WAIT) == Payload(b"hello", b"md")
    assert client.request_response("text", timeout=WAIT) == Payload(b"text", None)


def test_application_error_carries_code_and_message(client: Client) -> None:
    with pytest.raises(RSocketError) as info:
        client.request_response(b"error: no", timeout=WAIT)
    assert info.value.error_code == 0x201
    assert info.value.message == "rejected: error: no"
    assert client.request_response(b"still fine", timeout=WAIT) == Payload(b"still fine")


def test_fire_and_forget_and_metadata_push_are_counted(client: Client) -> None:
    for _ in range(3):
        client.fire_and_forget(b"ping")
    client.metadata_push(b"first")
    client.metadata_push(b"last one")
    # Same connection, frames in order: the counts are settled by the time we ask.
    assert client.request_response(b"fnf-count", timeout=WAIT) == Payload(b"3")
    assert client.request_response(b"mp-count", timeout=WAIT) == Payload(b"2")
    assert client.request_response(b"mp-last", timeout=WAIT) == Payload(b"last=last one")
    stats = json.loads(client.request_response(b"stats", timeout=WAIT).data)  # type: ignore[union-attr]
    assert stats["fire_and_forget"] == 3 and stats["metadata_push"] == 2


def test_request_stream_yields_every_item_in_order(client: Client) -> None:
    request = json.dumps({"n": 1000, "size": 8})
    with client.request_stream(request, prefetch=32, timeout=WAIT) as items:
        got = [p.data for p in items]
    assert got == [str(i).zfill(8).encode() for i in range(1000)]


def test_stream_error_from_bad_request(client: Client) -> None:
    with pytest.raises(RSocketError) as info, client.request_stream(b"nope", timeout=WAIT) as it:
        list(it)
    assert info.value.error_code == 0x201


def test_request_channel_echoes_with_metadata(client: Client) -> None:
    outbound = [Payload(b"c%d" % i, b"m%d" % i) for i in range(100)]
    with client.request_channel(outbound, prefetch=16, timeout=WAIT) as items:
        got = list(items)
    assert got == outbound


class Recording:
    """Handler that records how far its stream generator was pulled."""

    def __init__(self) -> None:
        self.pulled = 0
        self.closed = threading.Event()
        self.started = threading.Event()

    def request_stream(self, request: Request) -> Iterator[bytes]:
        def gen() -> Iterator[bytes]:
            try:
                for i in range(10_000_000):
                    self.pulled += 1
                    self.started.set()
                    yield b"%d" % i
            finally:
                self.closed.set()

        return gen()

    def request_response(self, request: Request) -> bytes:
        if request.data == b"boom":
            raise ValueError("handler exploded")
        return request.data.upper()


def test_handler_is_pulled_only_as_fast_as_credit_allows_and_cancel_closes_it() -> None:
    handler = Recording()
    with serve("tcp://127.0.0.1:0", handler) as server, connect(server.url) as c:
        items = c.request_stream(b"", prefetch=64, timeout=WAIT)
        assert next(items).data == b"0"
        assert handler.started.wait(WAIT)
        # Nothing more is consumed: the responder stays within the window.
        got_more = c.request_response(b"sync", timeout=WAIT)  # a full round trip later
        assert got_more == Payload(b"SYNC")
        assert handler.pulled <= 64 + 1
        items.close()
        assert handler.closed.wait(WAIT)


def test_handler_exception_becomes_application_error_and_connection_survives() -> None:
    with serve("tcp://127.0.0.1:0", Recording()) as server, connect(server.url) as c:
        with pytest.raises(RSocketError) as info:
            c.request_response(b"boom", timeout=WAIT)
        assert info.value.error_code == 0x201 and "handler exploded" in info.value.message
        assert c.request_response(b"ok", timeout=WAIT) == Payload(b"OK")


def test_missing_handler_method_rejects(client: Client) -> None:
    with serve("tcp://127.0.0.1:0", object()) as server, connect(server.url) as c:
        with pytest.raises(RSocketError) as info:
            c.request_response(b"x", timeout=WAIT)
        assert info.value.error_code == 0x202  # REJECTED


def test_request_response_timeout_then_connection_still_works() -> None:
    release = threading.Event()

    class Slow:
        def request_stream(self, request: Request) -> Any:
            return SlowPublisher(release)

        def request_response(self, request: Request) -> Any:
            if request.data == b"slow":
                return SlowPublisher(release)
            return request.data

    with serve("tcp://127.0.0.1:0", Slow()) as server, connect(server.url) as c:
        with pytest.raises(TimeoutError):
            c.request_response(b"slow", timeout=0.05)
        assert c.request_response(b"fast", timeout=WAIT) == Payload(b"fast")
    release.set()


class SlowPublisher:
    """Never emits until released."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def subscribe(self, subscriber: Any) -> None:
        class Sub:
            def request(self, n: int) -> None:
                pass

            def cancel(self) -> None:
                pass

        subscriber.on_subscribe(Sub())


def test_stream_publisher_delivers_within_requested_demand(client: Client) -> None:
    got: list[bytes] = []
    done = threading.Event()

    class Subscriber:
        def on_subscribe(self, s: Any) -> None:
            self.s = s
            s.request(5)

        def on_next(self, p: Payload) -> None:
            got.append(p.data)
            if len(got) % 5 == 0:
                self.s.request(5)

        def on_error(self, e: BaseException) -> None:
            done.set()

        def on_complete(self) -> None:
            done.set()

    client.stream_publisher(json.dumps({"n": 23, "size": 2})).subscribe(Subscriber())
    assert done.wait(WAIT)
    assert got == [str(i).zfill(2).encode() for i in range(23)]


def test_server_initiated_request_to_a_client_handler(demo: Server) -> None:
    class ClientHandler:
        def request_response(self, request: Request) -> bytes:
            return b"client says " + request.data

    with connect(demo.url, handler=ClientHandler()) as c:
        assert c.request_response(b"x", timeout=WAIT) is not None  # the server knows us now
        (peer,) = demo.peers
        assert isinstance(peer, RSocketPeer)
        assert peer.request_response(b"hi", timeout=WAIT) == Payload(b"client says hi")


def test_server_close_fails_outstanding_stream(demo: Server) -> None:
    c = connect(demo.url)
    items = c.request_stream(json.dumps({"n": 10_000_000, "size": 4}), prefetch=8, timeout=WAIT)
    assert next(items).data == b"0000"
    demo.close(timeout=WAIT)
    with pytest.raises(ConnectionClosed):
        for _ in items:
            pass
    assert c.wait_closed(WAIT)
    with pytest.raises(ConnectionClosed):
        c.request_response(b"late", timeout=WAIT)


def test_many_clients_at_once(demo: Server) -> None:
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with connect(demo.url) as c:
                for j in range(20):
                    assert c.request_response(b"%d-%d" % (i, j), timeout=WAIT) == Payload(
                        b"%d-%d" % (i, j)
                    )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert not errors


def test_concurrent_requests_from_many_threads_on_one_client(client: Client) -> None:
    results: list[bool] = []

    def worker(i: int) -> None:
        for j in range(30):
            data = b"%d:%d" % (i, j)
            results.append(client.request_response(data, timeout=WAIT) == Payload(data))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert len(results) == 240 and all(results)


@pytest.mark.parametrize("lease", [False, True], ids=["plain", "waiting-for-lease"])
def test_dead_peer_fails_outstanding_requests_via_keepalive(lease: bool) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []

    def accept() -> None:
        sock, _ = listener.accept()
        accepted.append(sock)  # read nothing, answer nothing: a hung peer

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        c = connect(
            f"tcp://127.0.0.1:{port}", keepalive_interval=0.05, max_lifetime=0.3, lease=lease
        )
        with pytest.raises(ConnectionClosed, match=r"keepalive|lifetime|silent"):
            c.request_response(b"anyone?", timeout=WAIT)
        assert c.wait_closed(WAIT)
    finally:
        t.join(WAIT)
        for s in accepted:
            s.close()
        listener.close()


def test_lease_on_both_ends() -> None:
    with (
        serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, lease=True) as server,
        connect(server.url, lease=True) as c,
    ):
        assert c.request_response(b"leased", timeout=WAIT) == Payload(b"leased")


def test_abort_resets_and_fails_requests(demo: Server) -> None:
    c = connect(demo.url)
    items = c.request_stream(json.dumps({"n": 10_000_000, "size": 4}), prefetch=8, timeout=WAIT)
    next(items)
    c.abort(timeout=WAIT)
    with pytest.raises(ConnectionClosed, match="abort"):
        for _ in items:
            pass


def test_thousands_of_requests_pipelined_behind_setup(demo: Server) -> None:
    """The client sends SETUP and 20k fire-and-forgets in one burst; the server
    must accept SETUP before the core's early-frame limit is reached."""
    with connect(demo.url) as c:
        for _ in range(20_000):
            c.fire_and_forget(b"f")
        assert c.request_response(b"fnf-count", timeout=WAIT) == Payload(b"20000")


def test_channel_outbound_is_pulled_only_as_the_responder_grants_credit(demo: Server) -> None:
    pulled = [0]

    def outbound() -> Iterator[bytes]:
        for i in range(10_000_000):
            pulled[0] += 1
            yield b"%d" % i

    with connect(demo.url) as c, c.request_channel(outbound(), prefetch=4, timeout=WAIT) as items:
        assert next(items).data == b"0"
        # A full round trip later the responder has granted what it will grant
        # while we do not consume: its 32-item window plus one echo batch.
        assert c.request_response(b"sync", timeout=WAIT) == Payload(b"sync")
        assert pulled[0] <= 4 + 2 * 32 + 2, pulled[0]


class ThreadedCountPublisher:
    """Emits 0..n-1 from its own thread, only within requested demand."""

    def __init__(self, n: int) -> None:
        self.n = n

    def subscribe(self, subscriber: Any) -> None:
        n = self.n
        demand = threading.Semaphore(0)
        cancelled = threading.Event()

        class Sub:
            def request(self, k: int) -> None:
                for _ in range(min(k, n + 1)):
                    demand.release()

            def cancel(self) -> None:
                cancelled.set()
                demand.release()

        def run() -> None:
            for i in range(n):
                if not demand.acquire(timeout=WAIT) or cancelled.is_set():
                    return
                subscriber.on_next(b"p%d" % i)
            subscriber.on_complete()

        subscriber.on_subscribe(Sub())
        threading.Thread(target=run, daemon=True).start()


def test_stream_handler_returning_a_publisher_that_signals_from_another_thread() -> None:
    class Handler:
        def request_stream(self, request: Request) -> ThreadedCountPublisher:
            return ThreadedCountPublisher(int(request.data))

    with (
        serve("tcp://127.0.0.1:0", Handler()) as server,
        connect(server.url) as c,
        c.request_stream(b"500", prefetch=16, timeout=WAIT) as items,
    ):
        assert [p.data for p in items] == [b"p%d" % i for i in range(500)]


def test_stream_handler_returning_a_stream_model_publisher() -> None:
    from sansrs.streams import from_iterable

    class Handler:
        def request_stream(self, request: Request) -> object:
            return from_iterable([b"a", b"b", Payload(b"c", b"m")])

    with (
        serve("tcp://127.0.0.1:0", Handler()) as server,
        connect(server.url) as c,
        c.request_stream(b"", prefetch=2, timeout=WAIT) as items,
    ):
        assert list(items) == [Payload(b"a"), Payload(b"b"), Payload(b"c", b"m")]


def test_cancelling_a_channel_releases_the_handler_thread() -> None:
    finished = threading.Event()

    class Handler:
        def request_channel(self, request: Request, inbound: Iterator[Payload]) -> object:
            def echo() -> Iterator[Payload]:
                try:
                    yield from inbound
                finally:
                    finished.set()

            return echo()

    def forever() -> Iterator[bytes]:
        i = 0
        while True:
            i += 1
            yield b"%d" % i

    with serve("tcp://127.0.0.1:0", Handler()) as server, connect(server.url) as c:
        items = c.request_channel(forever(), prefetch=4, timeout=WAIT)
        assert next(items).data == b"2"  # the handler echoes the inbound after the first
        items.close()
        assert finished.wait(WAIT)


def test_lease_requiring_server_refuses_a_client_without_leases() -> None:
    with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, lease=True) as server:
        c = connect(server.url)
        with pytest.raises(ConnectionClosed, match="requires leases"):
            c.request_response(b"x", timeout=WAIT)
        assert c.wait_closed(WAIT)


def test_blocking_request_inside_a_handler_is_refused_not_deadlocked(demo: Server) -> None:
    seen: list[BaseException] = []

    class ClientHandler:
        def request_response(self, request: Request) -> bytes:
            try:
                request.peer.request_response(b"nested", timeout=1)
            except RuntimeError as exc:
                seen.append(exc)
            return b"answered"

    with connect(demo.url, handler=ClientHandler()) as c:
        c.request_response(b"hello", timeout=WAIT)
        (peer,) = demo.peers
        assert peer.request_response(b"ask", timeout=WAIT) == Payload(b"answered")
    assert len(seen) == 1 and "deadlock" in str(seen[0])


def test_request_response_publisher_completing_after_its_item_keeps_the_connection() -> None:
    """The reply already completed the stream; the publisher's late
    on_complete must not make the connection thread send on a closed stream."""
    later = threading.Event()
    completed = threading.Event()

    class LateComplete:
        def subscribe(self, subscriber: Any) -> None:
            class Sub:
                def request(self, n: int) -> None:
                    subscriber.on_next(b"first")

                    def finish() -> None:
                        later.wait(WAIT)
                        subscriber.on_complete()
                        completed.set()

                    threading.Thread(target=finish, daemon=True).start()

                def cancel(self) -> None:
                    pass

            subscriber.on_subscribe(Sub())

    class Handler:
        def request_response(self, request: Request) -> object:
            return LateComplete() if request.data == b"pub" else request.data

    with serve("tcp://127.0.0.1:0", Handler()) as server, connect(server.url) as c:
        assert c.request_response(b"pub", timeout=WAIT) == Payload(b"first")
        later.set()
        assert completed.wait(WAIT)
        assert c.request_response(b"after", timeout=WAIT) == Payload(b"after")


def test_subscriber_raising_in_on_next_cancels_its_stream_only(demo: Server) -> None:
    subscribed = threading.Event()

    class Broken:
        def on_subscribe(self, s: Any) -> None:
            s.request(10)
            subscribed.set()

        def on_next(self, p: Payload) -> None:
            raise ValueError("subscriber bug")

        def on_error(self, e: BaseException) -> None:
            pass

        def on_complete(self) -> None:
            pass

    with connect(demo.url) as c:
        c.stream_publisher(json.dumps({"n": 10_000_000, "size": 4})).subscribe(Broken())
        assert subscribed.wait(WAIT)
        assert c.request_response(b"alive", timeout=WAIT) == Payload(b"alive")
        assert not c.closed
