"""Direct calls (the latency path, docs/architecture.md "Threads"): a thread
blocked in ``request_response`` drives its idle connection itself. Each
interleaving is forced with events and hooks, never sleeps: the answer read
on the calling thread, another thread's call run by the waiting thread at
once, a hand-back when the reactor needs the connection, timeouts, a lost
connection and a stopped loop while a thread waits."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed, Loop, LoopConnection
from sansrs.adapters.drive import direct as direct_module
from sansrs.adapters.rsocket import Payload, connect, serve

from .direct import driver_of as _driver
from .direct import reads_by_thread as _reads_by_thread
from .direct import settle as _settle

WAIT = 10.0


class Later:
    """A Publisher of one answer, released by the test."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.subscriber: Any = None
        self.subscribed = threading.Event()
        self.cancelled = threading.Event()

    def subscribe(self, subscriber: Any) -> None:
        self.subscriber = subscriber
        subscriber.on_subscribe(self)
        self.subscribed.set()

    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        self.cancelled.set()

    def release(self) -> None:
        assert self.subscribed.wait(WAIT)
        self.subscriber.on_next(Payload(self.data))
        self.subscriber.on_complete()


class Gate:
    """Answers at once, except ``slow...`` requests: a :class:`Later` each."""

    def __init__(self) -> None:
        self.arrived: queue.Queue[bytes] = queue.Queue()
        self.later: dict[bytes, Later] = {}

    def request_response(self, request: Any) -> object:
        self.arrived.put(request.data)
        if request.data.startswith(b"slow"):
            later = self.later[request.data] = Later(b"answer:" + request.data)
            return later
        return Payload(b"answer:" + request.data)

    def fire_and_forget(self, request: Any) -> None:
        self.arrived.put(request.data)


@pytest.fixture
def gate() -> Iterator[tuple[Gate, str]]:
    handler = Gate()
    with serve("tcp://127.0.0.1:0", handler) as server:
        yield handler, server.url


def test_the_answer_is_read_on_the_calling_thread(
    gate: tuple[Gate, str], loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = gate
    with connect(url, loop=loop_kind) as client:
        assert client.request_response(b"warm", timeout=WAIT) == Payload(b"answer:warm")
        readers = _reads_by_thread(monkeypatch, client)
        for i in range(50):
            data = b"%d" % i
            assert client.request_response(data, timeout=WAIT) == Payload(b"answer:" + data)
    me = threading.get_ident()
    # Every answer read here, but a rare hand-back (a keepalive due).
    assert len([r for r in readers if r == me]) >= 45


def test_another_threads_call_goes_out_while_a_thread_waits(
    gate: tuple[Gate, str], loop_kind: str | Loop
) -> None:
    handler, url = gate
    with connect(url, loop=loop_kind) as client:
        answers: queue.Queue[object] = queue.Queue()
        waiter = threading.Thread(
            target=lambda: answers.put(client.request_response(b"slow-a", timeout=WAIT))
        )
        waiter.start()
        assert handler.arrived.get(timeout=WAIT) == b"slow-a"
        # The waiting thread holds the connection (its answer is pending):
        # this thread's call must not wait for that answer.
        client.fire_and_forget(b"fnf-b")
        assert handler.arrived.get(timeout=WAIT) == b"fnf-b"
        assert answers.empty()
        handler.later[b"slow-a"].release()
        waiter.join(WAIT)
        assert answers.get(timeout=WAIT) == Payload(b"answer:slow-a")


def test_a_second_blocking_caller_is_served_through_the_waiting_one(
    gate: tuple[Gate, str], loop_kind: str | Loop
) -> None:
    handler, url = gate
    with connect(url, loop=loop_kind) as client:
        answers: queue.Queue[object] = queue.Queue()
        first = threading.Thread(
            target=lambda: answers.put(client.request_response(b"slow-1", timeout=WAIT))
        )
        first.start()
        assert handler.arrived.get(timeout=WAIT) == b"slow-1"
        # The connection is taken: this request is handed over (call_soon),
        # and the waiting thread sends it and reads its answer too.
        assert client.request_response(b"quick", timeout=WAIT) == Payload(b"answer:quick")
        handler.later[b"slow-1"].release()
        first.join(WAIT)
        assert answers.get(timeout=WAIT) == Payload(b"answer:slow-1")


def test_the_reactor_takes_the_connection_back_when_it_needs_it(
    gate: tuple[Gate, str], loop_kind: str | Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, url = gate
    waiting = threading.Event()
    missed = threading.Event()
    thread_poller, miss = direct_module._thread_poller, LoopConnection._miss

    def hooked_poller(fd: int) -> Any:
        waiting.set()  # a direct call is about to wait for its answer
        return thread_poller(fd)

    def hooked_miss(self: LoopConnection) -> None:
        miss(self)
        missed.set()

    monkeypatch.setattr(direct_module, "_thread_poller", hooked_poller)
    monkeypatch.setattr(LoopConnection, "_miss", hooked_miss)
    with connect(url, loop=loop_kind) as client:
        driver = _driver(client)
        assert client.request_response(b"warm", timeout=WAIT) == Payload(b"answer:warm")
        _settle(driver)  # the reactor idle: the next call drives the connection itself
        # What the warm-up set (its own direct call; a turn the reactor
        # missed meanwhile) must not stand for what follows.
        waiting.clear()
        missed.clear()
        answers: queue.Queue[object] = queue.Queue()
        waiter = threading.Thread(
            target=lambda: answers.put(client.request_response(b"slow-k", timeout=WAIT))
        )
        waiter.start()
        assert handler.arrived.get(timeout=WAIT) == b"warm"
        assert handler.arrived.get(timeout=WAIT) == b"slow-k"
        assert waiting.wait(WAIT)
        # The reactor wants a turn for it now (as a timer would have it).
        driver.loop.call_soon(lambda: driver.service(time.monotonic()))
        assert missed.wait(WAIT)  # it found the connection taken: handed back
        readers = _reads_by_thread(monkeypatch, client)
        handler.later[b"slow-k"].release()
        waiter.join(WAIT)
        assert answers.get(timeout=WAIT) == Payload(b"answer:slow-k")
        assert readers and waiter.ident not in readers  # the reactor read the answer
        assert client.request_response(b"after", timeout=WAIT) == Payload(b"answer:after")


def test_a_direct_wait_times_out_and_cancels(
    gate: tuple[Gate, str], loop_kind: str | Loop
) -> None:
    handler, url = gate
    with connect(url, loop=loop_kind) as client:
        with pytest.raises(TimeoutError):
            client.request_response(b"slow-t", timeout=0.2)
        # On a loaded machine the server may read the request only now.
        assert handler.arrived.get(timeout=WAIT) == b"slow-t"
        assert handler.later[b"slow-t"].cancelled.wait(WAIT)  # CANCEL reached the server
        assert client.request_response(b"next", timeout=WAIT) == Payload(b"answer:next")


def _waiting(client: Any, data: bytes) -> tuple[threading.Thread, queue.Queue[BaseException]]:
    """A thread blocked in ``request_response(data)``, and where its error goes."""
    errors: queue.Queue[BaseException] = queue.Queue()

    def wait() -> None:
        try:
            client.request_response(data, timeout=WAIT)
        except BaseException as exc:
            errors.put(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    return waiter, errors


def test_a_lost_connection_ends_a_direct_wait(
    gate: tuple[Gate, str], loop_kind: str | Loop
) -> None:
    handler, url = gate
    client = connect(url, loop=loop_kind)
    waiter, errors = _waiting(client, b"slow-l")
    assert handler.arrived.get(timeout=WAIT) == b"slow-l"
    client.abort()  # from another thread, while the waiter holds the connection
    waiter.join(WAIT)
    assert isinstance(errors.get(timeout=WAIT), ConnectionClosed)


def test_stopping_the_loop_ends_a_direct_wait_at_once(gate: tuple[Gate, str]) -> None:
    handler, url = gate
    loop = Loop(name="direct-stop").start()
    client = connect(url, loop=loop)
    waiter, errors = _waiting(client, b"slow-s")
    assert handler.arrived.get(timeout=WAIT) == b"slow-s"
    assert loop.stop(WAIT, abort=True)
    waiter.join(WAIT)
    assert isinstance(errors.get(timeout=WAIT), ConnectionClosed)


def test_many_threads_calling_at_once_all_get_their_answers(
    gate: tuple[Gate, str], loop_kind: str | Loop
) -> None:
    _, url = gate
    failures: list[BaseException] = []
    with connect(url, loop=loop_kind) as client:

        def calls(k: int) -> None:
            try:
                for i in range(200):
                    data = b"%d-%d" % (k, i)
                    answer = client.request_response(data, timeout=WAIT)
                    assert answer == Payload(b"answer:" + data)
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=calls, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 3)
    assert not failures
