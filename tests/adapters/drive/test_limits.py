"""What a server spends on strangers, the same under every driver
(``LoopConfig``, docs/security.md): connections per server, accepting when
the process is out of descriptors, throttled warnings, and what the outbound
streams of a connection may have asked their sources for
(``source_budget``)."""

from __future__ import annotations

import errno
import logging
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters import rsocket
from sansrs.adapters.drive import LoopConfig
from sansrs.adapters.drive.listener import Throttled
from sansrs.adapters.drive.sources import (
    END,
    PENDING,
    PublisherSource,
    SourceBudget,
    ThreadedSource,
    weight,
)
from sansrs.adapters.transport.urls import parse_url

from tests.adapters.drive.servers import DRIVERS, WAIT, acceptor, loop_turned, serving


def echo(client: rsocket.Client, data: bytes = b"ok") -> None:
    assert client.request_response(data, timeout=WAIT) == rsocket.Payload(data)


def refused(url: str) -> bool:
    """Connect; True if the server closed the connection without a word
    (its reset may even beat the end of ``connect``)."""
    try:
        with socket.create_connection(("127.0.0.1", parse_url(url).port), WAIT) as sock:
            return sock.recv(1) == b""
    except ConnectionResetError:
        return True


# -- max_connections ---------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_max_connections_refuses_beyond_the_limit_and_admits_again(driver: str) -> None:
    with serving(driver, "rsocket", LoopConfig(max_connections=2)) as running:
        url = running.url
        with rsocket.connect(url) as a, rsocket.connect(url) as b:
            echo(a)
            echo(b)
            assert refused(url)  # the third: accepted and closed at once
            assert acceptor(running).refused >= 1
            echo(a)
            echo(b)  # the two go on
        # Both closed: their slots come back (the server notices the ends as
        # they happen; a refused attempt meanwhile is answered at once).
        for _ in range(1000):
            try:
                with rsocket.connect(url) as c:
                    echo(c)
                    break
            except OSError:  # ConnectionClosed or a reset: refused again
                continue
        else:
            pytest.fail("no connection admitted after the others closed")


def _start_connect(url: str) -> socket.socket:
    sock = socket.socket()
    sock.setblocking(False)
    assert sock.connect_ex(("127.0.0.1", parse_url(url).port)) in (0, errno.EINPROGRESS)
    return sock


def _finish_connect(sock: socket.socket) -> socket.socket | None:
    """End a connect :func:`_start_connect` began, as ``socket.connect``
    does (wait until writable, read its error): the socket, or None if the
    server refused it with a reset that came first (ECONNRESET)."""
    assert select.select([], [sock], [], WAIT)[1], "connect did not end"
    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err == errno.ECONNRESET:
        sock.close()
        return None
    assert err == 0, errno.errorcode.get(err, err)
    sock.settimeout(WAIT)
    return sock


def _idle(url: str, n: int) -> list[socket.socket]:
    """``n`` connections that never send the protocol's opening, but those
    the server refused before their connect ended (at ``max_connections``
    a refusal is a reset at once: it may come first)."""
    socks = (_finish_connect(_start_connect(url)) for _ in range(n))
    return [s for s in socks if s is not None]


def _server_threads(clients: list[socket.socket]) -> int:
    """Server connection threads serving ``clients`` (named after the peer)."""
    names = {f"sansrs-server 127.0.0.1:{c.getsockname()[1]}" for c in clients}
    return sum(t.name in names for t in threading.enumerate())


def test_max_connections_is_the_thread_drivers_thread_limit() -> None:
    # shed_batch=0: idle connections in their handshake are not shed to make
    # room here (that is tests/adapters/drive/test_listener.py).
    config = LoopConfig(max_connections=3, shed_batch=0)
    with serving("thread", "rsocket", config) as running:
        idle = _idle(running.url, 10)
        try:
            # The refusal is a reset: it can reach the client while its TCP
            # connect is still returning (ConnectionResetError from connect)
            # or after (ConnectionClosed from the request); both are
            # ConnectionError.
            with (
                pytest.raises(ConnectionError),
                rsocket.connect(running.url, connect_timeout=WAIT) as late,
            ):
                echo(late)
            assert _server_threads(idle) == 3  # a thread per admitted connection, no more
        finally:
            for sock in idle:
                sock.close()


def test_max_connections_refusal_may_end_the_clients_connect_with_a_reset() -> None:
    """Forced: the server accepts and refuses (resets) a connection before
    its client reads the end of its ``connect``, so the connect itself
    fails with ECONNRESET (as ``socket.create_connection`` raises
    ConnectionResetError). Under load that is what a refused client of the
    test above may see: its helper expects it."""
    config = LoopConfig(max_connections=1, shed_batch=0)
    with serving("thread", "rsocket", config) as running, rsocket.connect(running.url) as a:
        echo(a)
        listener = acceptor(running).listener
        accepted = threading.Event()
        real_accept = listener.accept

        def accept() -> Any:
            transport = real_accept()
            if transport is not None:
                accepted.set()
            return transport

        listener.accept = accept  # type: ignore[method-assign]
        sock = _start_connect(running.url)
        assert accepted.wait(WAIT)
        assert loop_turned(running) and acceptor(running).refused == 1  # refused in that turn
        assert _finish_connect(sock) is None  # ECONNRESET ended the connect
        echo(a)


# -- out of descriptors ----------------------------------------------------------------


class Exhausted:
    """Wraps a listener: ``accept`` fails with EMFILE while ``on`` is set,
    recording when it was called."""

    def __init__(self, listener: Any) -> None:
        self.listener = listener
        self.on = True
        self.calls: list[float] = []
        self.second_call = threading.Event()
        self.real_accept = listener.accept
        listener.accept = self.accept

    def accept(self) -> Any:
        if self.on:
            self.calls.append(time.monotonic())
            if len(self.calls) >= 2:
                self.second_call.set()
            raise OSError(errno.EMFILE, "Too many open files")
        return self.real_accept()


@pytest.mark.parametrize("driver", DRIVERS)
def test_emfile_pauses_accepting_without_spinning_and_serves_established(
    driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = LoopConfig(accept_pause=0.1, log_interval=3600)
    caplog.set_level(logging.WARNING, logger="sansrs.adapters")
    with (
        serving(driver, "rsocket", config) as running,
        rsocket.connect(running.url) as established,
    ):
        echo(established)
        # The batch that accepted it tries once more after it: that try
        # must not be taken for the first of those the pause spaces out.
        assert loop_turned(running)
        exhausted = Exhausted(acceptor(running).listener)
        waiting = socket.create_connection(("127.0.0.1", parse_url(running.url).port))
        try:
            assert exhausted.second_call.wait(WAIT)  # tried again after the pause
            for i in range(20):
                echo(established, b"%d" % i)  # served meanwhile
            first, second = exhausted.calls[:2]
            assert second - first >= config.accept_pause * 0.9  # no busy loop
            exhausted.on = False
            # The waiting client is accepted once descriptors are back.
            with rsocket.connect(running.url) as late:
                echo(late)
        finally:
            waiting.close()
    warnings = [r for r in caplog.records if "accept failed" in r.getMessage()]
    assert len(warnings) == 1  # one per log_interval, however often it failed


def test_throttled_logs_once_per_interval_and_counts_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="test.throttled")
    throttled = Throttled(logging.getLogger("test.throttled"), interval=10.0)
    assert throttled.warning(100.0, "failed %s", "a")
    assert not throttled.warning(101.0, "failed %s", "b")
    assert not throttled.warning(109.9, "failed %s", "c")
    assert throttled.warning(110.0, "failed %s", "d")
    assert [r.getMessage() for r in caplog.records] == [
        "failed a",
        "failed d (2 more like it not logged)",
    ]


# -- sources within the budget ----------------------------------------------------------


class Blobs:
    """A Publisher of ``size``-byte items that signals on its own thread (as
    an application's Publisher may), counting what it was asked for."""

    def __init__(self, size: int, count: int, gate: threading.Event) -> None:
        self.size = size
        self.count = count
        self.gate = gate  # delivers once set
        self.requested = 0
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def subscribe(self, subscriber: Any) -> None:
        blobs = self
        sent = [0]

        class Sub:
            def request(self, n: int) -> None:
                with blobs.lock:
                    blobs.requested += n

                def run() -> None:
                    blobs.gate.wait(WAIT)
                    for _ in range(n):
                        if sent[0] == blobs.count:
                            break
                        sent[0] += 1
                        subscriber.on_next(b"x" * blobs.size)
                    if sent[0] == blobs.count:
                        subscriber.on_complete()

                t = threading.Thread(target=run)
                blobs.threads.append(t)
                t.start()

            def cancel(self) -> None:
                pass

        subscriber.on_subscribe(Sub())

    def join(self) -> None:
        for t in list(self.threads):
            t.join(WAIT)


def test_publishers_are_asked_only_within_the_connections_budget() -> None:
    """A peer that grants unbounded demand on 100 streams of 1 MiB items and
    reads nothing: the publishers, signalling on their own threads, are
    asked for about a budget's worth, not everything they could send."""
    budget = SourceBudget(4 * 1024 * 1024)
    gate = threading.Event()
    pubs = [Blobs(1024 * 1024, count=1000, gate=gate) for _ in range(100)]
    sources: list[PublisherSource[bytes]] = []
    for pub in pubs:
        source: PublisherSource[bytes] = PublisherSource(pub, lambda: None)
        source.bind(budget)
        source.demand(2**63 - 1)
        sources.append(source)
    for source in sources:  # the engine's first pump: every stream pulled once
        assert source.pull() is PENDING
    gate.set()
    for pub in pubs:
        pub.join()
    asked = sum(p.requested for p in pubs)
    assert asked <= 16 + 1  # unknown sizes: a sixteenth of the budget each
    assert budget.held <= 16 * 1024 * 1024 + 1024 * 1024
    # As items are pulled (sent), bytes come back and other streams may ask;
    # what is asked and not yet pulled stays within the same bound.
    pulled = 0
    for _ in range(3):
        for source in sources:
            if source.pull() is not PENDING:
                pulled += 1
        for pub in pubs:
            pub.join()
        assert sum(p.requested for p in pubs) - pulled <= 17
        assert budget.held <= 16 * 1024 * 1024 + 1024 * 1024
    assert pulled >= 100


def test_synchronous_publisher_delivers_within_the_pull() -> None:
    class Sync:
        def subscribe(self, subscriber: Any) -> None:
            left = [3]

            class Sub:
                def request(self, n: int) -> None:
                    for _ in range(min(n, left[0])):
                        left[0] -= 1
                        subscriber.on_next(b"abc")
                    if not left[0]:
                        subscriber.on_complete()

                def cancel(self) -> None:
                    pass

            subscriber.on_subscribe(Sub())

    budget = SourceBudget(1024)
    source: PublisherSource[bytes] = PublisherSource(Sync(), lambda: None)
    source.bind(budget)
    source.demand(10)
    assert [source.pull() for _ in range(4)] == [b"abc", b"abc", b"abc", END]
    assert budget.held == 0


def test_rs_1_1_publisher_signalling_beyond_the_request_fails_its_stream() -> None:
    class Greedy:
        def subscribe(self, subscriber: Any) -> None:
            class Sub:
                cancelled = False

                def request(self, n: int) -> None:
                    for _ in range(n + 5):
                        subscriber.on_next(b"x")

                def cancel(self) -> None:
                    Sub.cancelled = True

            self.sub = Sub
            subscriber.on_subscribe(Sub())

    greedy = Greedy()
    source: PublisherSource[bytes] = PublisherSource(greedy, lambda: None)
    source.demand(100)
    items: list[Any] = []
    with pytest.raises(RuntimeError, match="more items than requested"):
        while (item := source.pull()) is not END:
            items.append(item)
    assert items == [b"x"] and greedy.sub.cancelled


def test_threaded_source_takes_nothing_beyond_what_was_asked() -> None:
    taken: list[int] = []
    started = threading.Event()

    def items() -> Iterator[bytes]:
        for i in range(10_000):
            taken.append(i)
            started.set()
            yield b"y" * 100_000

    budget = SourceBudget(1024 * 1024)
    ready = threading.Semaphore(0)
    source: ThreadedSource[bytes] = ThreadedSource(items(), ready.release, "budget-test")
    source.bind(budget)
    source.demand(10_000)
    got = []
    while len(got) < 30:
        item = source.pull()
        if item is PENDING:
            assert ready.acquire(timeout=WAIT)
        else:
            got.append(item)
            assert budget.held <= budget.limit + 100_000
    # What the worker took but nobody pulled yet is at most one window.
    assert len(taken) - len(got) <= budget.limit // 8 // 100_000 + 1
    source.cancel()
    assert source.join(WAIT)


def test_weight_counts_bytes_text_and_payload_parts() -> None:
    assert weight(b"abc") == 3 and weight("héllo") == 5 and weight(bytearray(7)) == 7
    assert weight(memoryview(b"1234")) == 4
    assert weight(rsocket.Payload(b"12", b"345")) == 16 + 5
    assert weight(rsocket.Payload(b"12", None)) == 16 + 2
    assert weight({"a": 1}) == 256


def test_budget_refuses_beyond_its_limit_and_wakes_the_refused() -> None:
    budget = SourceBudget(100)
    woken: list[str] = []
    assert budget.reserve(80, lambda: woken.append("a"))
    assert not budget.reserve(50, lambda: woken.append("b"))
    budget.adjust(+10)  # a delivery heavier than reserved: nobody woken
    assert woken == [] and budget.held == 90
    budget.adjust(-90)
    assert woken == ["b"] and budget.held == 0
    assert budget.reserve(500, lambda: None)  # nothing held: one item always flows
