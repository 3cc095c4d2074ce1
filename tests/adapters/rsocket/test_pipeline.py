"""Pipelined request-responses (``request_response_many``): end to end over
TCP on 127.0.0.1, and the owning-thread half (``ResponsePipeline``) driven
by hand."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.drive.queues import CreditQueue
from sansrs.adapters.rsocket.client import Client, connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.errors import RSocketError
from sansrs.adapters.rsocket.pipeline import Answer, ResponsePipeline
from sansrs.adapters.rsocket.server import Server, serve
from sansrs.adapters.rsocket.types import Payload, Request

from sansrs.rsocket import ErrorCode

WAIT = 10.0


class Held:
    """Answers request-responses only when the test says so: the responder's
    view of how many requests are outstanding at once."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.waiting: list[tuple[Any, bytes]] = []
        self.max_waiting = 0
        self.cancelled = 0

    def request_response(self, request: Request) -> Any:
        held = self
        data = request.data

        class Publisher:
            def subscribe(self, subscriber: Any) -> None:
                class Subscription:
                    def request(self, n: int) -> None:
                        with held.cond:
                            held.waiting.append((subscriber, data))
                            held.max_waiting = max(held.max_waiting, len(held.waiting))
                            held.cond.notify_all()

                    def cancel(self) -> None:
                        with held.cond:
                            held.cancelled += 1
                            held.cond.notify_all()

                subscriber.on_subscribe(Subscription())

        return Publisher()

    def wait_for(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.waiting) >= count, WAIT)

    def release(self, reverse: bool = False) -> int:
        """Answer every waiting request (echo), newest first if ``reverse``."""
        with self.cond:
            batch, self.waiting = self.waiting, []
        for subscriber, data in reversed(batch) if reverse else batch:
            subscriber.on_next(Payload(data))
            subscriber.on_complete()
        return len(batch)


def _numbers(n: int) -> list[bytes]:
    return [b"%d" % i for i in range(n)]


def test_answers_come_in_request_order(client: Client) -> None:
    requests = _numbers(2000)
    answers = list(client.request_response_many(requests, in_flight=16, timeout=WAIT))
    assert answers == [Payload(r) for r in requests]


def test_accepts_str_payloads_and_data_metadata_pairs(client: Client) -> None:
    answers = client.request_response_many(["text", (b"d", b"m"), Payload(b"p", b"q")],
                                           timeout=WAIT)
    assert list(answers) == [Payload(b"text"), Payload(b"d", b"m"), Payload(b"p", b"q")]


def test_keeps_exactly_in_flight_outstanding_and_reorders_answers() -> None:
    held = Held()
    total, window = 100, 8
    with serve("tcp://127.0.0.1:0", held) as server, connect(server.url) as c:
        def responder() -> None:
            answered = 0
            while answered < total:
                held.wait_for(min(window, total - answered))
                answered += held.release(reverse=True)  # newest first

        thread = threading.Thread(target=responder, daemon=True)
        thread.start()
        answers = list(c.request_response_many(_numbers(total), in_flight=window, timeout=WAIT))
        thread.join(WAIT)
    assert answers == [Payload(r) for r in _numbers(total)]
    assert held.max_waiting == window


def test_requests_are_pulled_lazily_at_most_two_windows_ahead(client: Client) -> None:
    pulled = 0

    def endless() -> Iterator[bytes]:
        nonlocal pulled
        for i in itertools.count():
            pulled += 1
            yield b"%d" % i

    answers = client.request_response_many(endless(), in_flight=4, timeout=WAIT)
    for i, answer in enumerate(answers):
        assert answer == Payload(b"%d" % i)
        assert pulled <= i + 1 + 2 * 4
        if i == 99:
            break
    answers.close()
    pulled_at_close = pulled
    # the connection carries on; nothing more is pulled from the closed iterator
    assert client.request_response(b"after", timeout=WAIT) == Payload(b"after")
    assert pulled == pulled_at_close


def test_an_error_answer_raises_at_its_position(client: Client) -> None:
    answers = client.request_response_many([b"a", b"error-x", b"c"], timeout=WAIT)
    assert next(answers) == Payload(b"a")
    with pytest.raises(RSocketError) as info:
        next(answers)
    assert info.value.error_code == ErrorCode.APPLICATION_ERROR
    assert "rejected: error-x" in str(info.value)
    assert client.request_response(b"still up", timeout=WAIT) == Payload(b"still up")


def test_return_exceptions_yields_errors_in_place(client: Client) -> None:
    answers = list(
        client.request_response_many([b"a", b"error-x", b"c"], timeout=WAIT,
                                     return_exceptions=True)
    )
    assert answers[0] == Payload(b"a") and answers[2] == Payload(b"c")
    assert isinstance(answers[1], RSocketError)
    assert answers[1].error_code == ErrorCode.APPLICATION_ERROR


def test_an_empty_completion_is_none() -> None:
    class Empty:
        def request_response(self, request: Request) -> None:
            return None

    with serve("tcp://127.0.0.1:0", Empty()) as server, connect(server.url) as c:
        assert list(c.request_response_many([b"x", b"y"], timeout=WAIT)) == [None, None]


def test_timeout_then_the_connection_still_works() -> None:
    held = Held()
    with serve("tcp://127.0.0.1:0", held) as server, connect(server.url) as c:
        answers = c.request_response_many([b"never"], timeout=0.05)
        with pytest.raises(TimeoutError):
            next(answers)
        # the timed-out iterator is finished and cancelled its request
        with held.cond:
            assert held.cond.wait_for(lambda: held.cancelled == 1, WAIT)
        with pytest.raises(StopIteration):
            next(answers)


def test_closing_early_cancels_what_is_outstanding() -> None:
    held = Held()
    with serve("tcp://127.0.0.1:0", held) as server, connect(server.url) as c:
        answers = c.request_response_many(_numbers(50), in_flight=6, timeout=WAIT)
        threading.Thread(target=lambda: (held.wait_for(6), held.release()), daemon=True).start()
        assert next(answers) == Payload(b"0")
        held.wait_for(6)  # the window refilled behind the six answers
        answers.close()
        with held.cond:
            assert held.cond.wait_for(lambda: held.cancelled == 6, WAIT)
        assert held.max_waiting == 6


@pytest.mark.parametrize("return_exceptions", [False, True])
def test_a_lost_connection_raises_and_nothing_hangs(return_exceptions: bool) -> None:
    held = Held()
    with serve("tcp://127.0.0.1:0", held) as server:
        c = connect(server.url)
        answers = c.request_response_many(_numbers(100), in_flight=4, timeout=WAIT,
                                          return_exceptions=return_exceptions)

        def abort_when_full() -> None:
            held.wait_for(4)
            c.abort(timeout=WAIT)

        threading.Thread(target=abort_when_full, daemon=True).start()
        with pytest.raises(ConnectionClosed):
            list(answers)


def test_refused_on_the_connection_thread_and_bad_windows(demo: Server) -> None:
    class Nested:
        def request_response(self, request: Request) -> bytes:
            request.peer.request_response_many([b"x"])
            return b"unreachable"

    with serve("tcp://127.0.0.1:0", Nested()) as server, connect(server.url) as c:
        with pytest.raises(RSocketError, match="request_response_many"):
            c.request_response(b"go", timeout=WAIT)
        for bad in (0, -1, 2**31, 1.5):
            with pytest.raises(ValueError):
                c.request_response_many([b"x"], in_flight=bad)  # type: ignore[arg-type]


def test_pipelined_under_leases() -> None:
    with (
        serve("tcp://127.0.0.1:0", handler_factory=DemoHandler, lease=True) as server,
        connect(server.url, lease=True) as c,
    ):
        requests = _numbers(300)
        answers = list(c.request_response_many(requests, in_flight=32, timeout=WAIT))
        assert answers == [Payload(r) for r in requests]


# -- the owning-thread half, driven by hand ------------------------------------


class FakeEngine:
    """Records what a ResponsePipeline asks of the engine."""

    def __init__(self) -> None:
        self.started: list[tuple[Any, Payload]] = []
        self.cancelled: list[Any] = []
        self.after: list[Any] = []

    def start_response(self, handle: Any, payload: Payload) -> None:
        self.started.append((handle, payload))

    def cancel(self, handle: Any) -> None:
        self.cancelled.append(handle)
        handle.sink.close()

    def after_events(self, fn: Any) -> None:
        self.after.append(fn)

    def end_of_turn(self) -> None:
        calls, self.after = self.after, []
        for fn in calls:
            fn()


Fixture = tuple[FakeEngine, ResponsePipeline, CreditQueue[Answer]]


def _pipeline(window: int, granted: int) -> Fixture:
    engine = FakeEngine()
    answers: CreditQueue[Answer] = CreditQueue(granted=granted)
    return engine, ResponsePipeline(engine, window, answers), answers  # type: ignore[arg-type]


def test_pipeline_starts_a_window_and_refills_once_per_turn() -> None:
    engine, pipeline, answers = _pipeline(3, 10)
    pipeline.feed([Payload(b"%d" % i) for i in range(10)])
    assert [p.data for _, p in engine.started] == [b"0", b"1", b"2"]
    assert pipeline.active == 3
    for handle, payload in engine.started[:2]:  # two answers in one turn
        handle.sink.put(payload)
        handle.sink.finish()
    assert len(answers) == 0 and len(engine.started) == 3  # handed over at the end of the turn
    engine.end_of_turn()
    assert answers.get_batch(0) == [(0, Payload(b"0")), (1, Payload(b"1"))]
    assert [p.data for _, p in engine.started] == [b"0", b"1", b"2", b"3", b"4"]
    assert pipeline.active == 3


def test_pipeline_errors_go_at_once_and_a_lost_connection_answers_the_rest() -> None:
    engine, pipeline, answers = _pipeline(2, 6)
    pipeline.feed([Payload(b"%d" % i) for i in range(5)])
    first, second = engine.started[0][0], engine.started[1][0]
    first.sink.finish(RSocketError(ErrorCode.APPLICATION_ERROR, "no"))
    assert [i for i, _ in answers.get_batch(0)] == [0]  # no turn needed for an error
    lost = ConnectionClosed("gone")
    second.sink.finish(lost)
    got = answers.get_batch(0)
    # 3 and 4 never started: answered with the loss (2, on the wire, is the
    # engine's to end: connection_lost finishes every handle)
    assert sorted(i for i, _ in got) == [1, 3, 4]
    assert all(a is lost for _, a in got)
    pipeline.feed([Payload(b"late")])  # handed over after the loss: answered at once
    assert answers.get_batch(0) == [(5, lost)]


def test_pipeline_cancel_cancels_active_and_drops_pending() -> None:
    engine, pipeline, answers = _pipeline(2, 5)
    pipeline.feed([Payload(b"%d" % i) for i in range(5)])
    pipeline.cancel()
    assert len(engine.cancelled) == 2 and pipeline.active == 0
    pipeline.feed([Payload(b"more")])
    assert len(engine.started) == 2 and len(answers) == 0


def test_pipeline_on_a_real_engine_answers_everything_when_the_connection_is_lost() -> None:
    # connection_lost fails the requests on the wire; the pipeline refills
    # from inside that (the error is not a ConnectionClosed here), and every
    # request it starts then fails at once with the same reason.
    from sansrs.adapters.rsocket.engine import RSocketEngine
    from sansrs.adapters.rsocket.options import EngineOptions

    engine = RSocketEngine.client(EngineOptions(), None)
    engine.data_to_send()  # SETUP
    answers: CreditQueue[Answer] = CreditQueue(granted=10)
    pipeline = ResponsePipeline(engine, 2, answers)
    pipeline.feed([Payload(b"%d" % i) for i in range(10)])
    assert pipeline.active == 2
    boom = OSError("boom")
    engine.connection_lost(boom)
    got = answers.get_batch(0)
    assert sorted(i for i, _ in got) == list(range(10))
    assert all(a is boom for _, a in got)
