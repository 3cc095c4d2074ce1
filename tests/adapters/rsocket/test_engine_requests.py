"""The RSocket engine's responder side of requests, driven without a socket
(bytes in with ``receive_data``, bytes out with ``data_to_send``): a request
cancelled in the read that carries it, and early writes within a large read
of request-responses."""

from __future__ import annotations

import pytest
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.engine import WRITE_EVERY, RequestHandle, RSocketEngine
from sansrs.adapters.rsocket.options import EngineOptions
from sansrs.adapters.rsocket.peer import RSocketPeer
from sansrs.adapters.rsocket.types import Payload

from sansrs.rsocket import Connection, ConnectionConfig, PayloadFrame, Role
from tests.adapters.rsocket.test_engine_channel import FakeDriver, _frames, _requester, _server


class Failing:
    """Every handler raises; none for fire-and-forget (REJECTED paths)."""

    def request_response(self, request: object) -> bytes:
        raise ValueError("no")

    def request_stream(self, request: object) -> bytes:
        raise ValueError("no")

    def request_channel(self, request: object, inbound: object) -> bytes:
        raise ValueError("no")


class Missing:
    """No handler methods at all: every request is REJECTED."""


@pytest.mark.parametrize("handler", [DemoHandler, Failing, Missing])
@pytest.mark.parametrize("kind", ["response", "stream", "channel"])
def test_rsocket_cancel_in_the_same_read_as_its_request_is_quietly_honoured(
    kind: str, handler: type
) -> None:
    # The core has seen both frames when the engine calls the handler: the
    # stream is already gone, so neither the answer nor an ERROR (handler
    # failed, or no handler) may be sent, and the connection must not fail
    # (it used to: send_error raised).
    requester = _requester()
    if kind == "response":
        sid = requester.request_response(b"x")
    elif kind == "stream":
        sid = requester.request_stream(b'{"n": 5, "size": 3}', initial_n=5)
    else:
        sid = requester.request_channel(b"x", initial_n=5)
    requester.cancel(sid)
    server, driver = _server(handler())
    server.receive_data(requester.data_to_send(), 0.0)
    driver.run_calls()
    server.pump()
    assert _frames(server.data_to_send()) == []
    assert not server.wants_close()
    # and the connection serves the next request
    sid2 = requester.request_response(b"next")
    server.receive_data(requester.data_to_send(), 0.0)
    server.pump()
    out = _frames(server.data_to_send())
    if handler is DemoHandler:
        answers = [(f.stream_id, f.data) for f in out if isinstance(f, PayloadFrame)]
        assert answers == [(sid2, b"next")]
    else:
        assert [(f.stream_id, type(f).__name__) for f in out] == [(sid2, "ErrorFrame")]


class WritingDriver(FakeDriver):
    """A driver whose ``write_now`` takes the engine's output at that moment."""

    def __init__(self) -> None:
        super().__init__()
        self.engine: RSocketEngine | None = None
        self.writes: list[bytes] = []

    def write_now(self) -> None:
        assert self.engine is not None
        self.writes.append(self.engine.data_to_send())


def _writing_server() -> tuple[RSocketEngine, WritingDriver]:
    server = RSocketEngine.server(EngineOptions())
    driver = WritingDriver()
    driver.engine = server
    server.attach(driver, RSocketPeer(driver, server), DemoHandler())  # type: ignore[arg-type]
    return server, driver


def _answered(data: bytes) -> list[int]:
    return [f.stream_id for f in _frames(data) if isinstance(f, PayloadFrame)]


def test_answers_are_written_every_few_requests_of_one_large_read() -> None:
    # Many request-responses in one read: the peer gets the first answers while
    # the rest are served, instead of all of them at the end of the turn;
    # the last ones leave once the read is served, before the turn unwinds.
    requester = _requester()
    sids = [requester.request_response(b"%d" % i) for i in range(2 * WRITE_EVERY + 8)]
    server, driver = _writing_server()
    server.receive_data(requester.data_to_send(), 0.0)
    assert len(driver.writes) == 3
    assert _answered(driver.writes[0]) == sids[:WRITE_EVERY]
    assert _answered(driver.writes[1]) == sids[WRITE_EVERY : 2 * WRITE_EVERY]
    assert _answered(driver.writes[2]) == sids[2 * WRITE_EVERY :]
    server.pump()
    assert server.data_to_send() == b""


def test_a_lone_answer_is_written_before_the_turn_unwinds() -> None:
    # A sequential request-response: the read's one answer is written as
    # soon as it is served (the peer waits for exactly this write).
    requester = _requester()
    sid = requester.request_response(b"one")
    server, driver = _writing_server()
    server.receive_data(requester.data_to_send(), 0.0)
    assert [_answered(w) for w in driver.writes] == [[sid]]


def test_answers_received_are_handed_over_before_an_early_write() -> None:
    # Requester side: answers arriving in one read reach after_events
    # callbacks (a pipeline hands them to the application and refills its
    # window there) before each early write, so the next requests go with it.
    client = RSocketEngine.client(EngineOptions(), None)
    driver = WritingDriver()
    driver.engine = client
    client.attach(driver, RSocketPeer(driver, client))  # type: ignore[arg-type]
    client.data_to_send()  # SETUP
    seen: list[int] = []
    handed_over_at: list[int] = []
    scheduled: list[bool] = []

    def hand_over() -> None:
        scheduled.clear()
        handed_over_at.append(len(seen))

    class Sink:
        def __init__(self, i: int) -> None:
            self.i = i

        def put(self, item: object) -> None:
            seen.append(self.i)

        def finish(self, error: BaseException | None = None) -> None:
            if not scheduled:
                scheduled.append(True)
                client.after_events(hand_over)

    total = WRITE_EVERY + 4
    handles = [RequestHandle("rr", Sink(i)) for i in range(total)]  # type: ignore[arg-type]
    for handle in handles:
        client.start_response(handle, Payload(b"q"))
    client.data_to_send()
    client.receive_data(b"".join(_answer(h.sid) for h in handles if h.sid is not None), 0.0)
    assert handed_over_at == [WRITE_EVERY]  # before the early write
    assert len(driver.writes) == 1
    client.pump()  # the end of the turn hands over the rest
    assert handed_over_at == [WRITE_EVERY, total]
    assert seen == list(range(total))


def _answer(sid: int) -> bytes:
    """PAYLOAD (NEXT, COMPLETE) on ``sid`` with data ``a``, length-prefixed."""
    body = sid.to_bytes(4, "big") + bytes([0x28, 0x60]) + b"a"
    return len(body).to_bytes(3, "big") + body


def test_trickled_setup_reaches_the_core_piece_by_piece() -> None:
    """A 4 MiB SETUP arriving 4 KiB at a time goes to the core as it comes
    (which keeps a partial frame in linear time), never re-joined by the
    engine: no quadratic buffering before SETUP. The requests behind it
    wait for its acceptance and are answered."""
    requester = Connection(Role.CLIENT, ConnectionConfig())
    requester.setup(data=b"s" * (4 * 1024 * 1024))
    requester.request_response(b"after")
    wire = requester.data_to_send()
    server, _ = _server(DemoHandler())
    fed: list[int] = []
    receive = server.conn.receive_data

    def spy(data: bytes, now: float | None = None) -> None:
        fed.append(len(data))
        receive(data, now)

    take = server.conn.take_request

    def take_spy(data: bytes, now: float | None = None) -> object:
        taken = take(data, now)  # a request read alone, taken whole
        if taken is not None:
            fed.append(len(data))
        return taken

    server.conn.receive_data = spy  # type: ignore[method-assign]
    server.conn.take_request = take_spy  # type: ignore[method-assign,assignment]
    for off in range(0, len(wire), 4096):
        server.receive_data(wire[off : off + 4096], 0.0)
    assert sum(fed) == len(wire) and max(fed) <= 4096
    requester.receive_data(server.data_to_send())
    assert [e for e in requester.events() if getattr(e, "data", None) == b"after"]


class LargeAnswers:
    def request_response(self, request: object) -> Payload:
        return Payload(b"z" * 32 * 1024)


def test_rsocket_answers_past_max_queued_output_wait_for_room_not_errors() -> None:
    # One read of request-responses whose answers pass the core's
    # max_queued_output (4 MiB) before any is written (a driver that holds
    # the engine's output while older bytes wait): the core refuses the
    # answer; it must wait for room and go out, not become an
    # APPLICATION_ERROR the handler never raised.
    requester = _requester()
    sids = [requester.request_response(b"%d" % i) for i in range(200)]  # 6.4 MiB
    server, driver = _server(LargeAnswers())
    server.receive_data(requester.data_to_send(), 0.0)
    driver.run_calls()
    frames: list[object] = []
    for _ in range(len(sids)):  # (each round frees room: bounded, not a wait)
        server.pump()
        out = server.data_to_send()
        if not out:
            break
        frames += _frames(out)
    assert [type(f).__name__ for f in frames if not isinstance(f, PayloadFrame)] == []
    assert sorted(f.stream_id for f in frames) == sids  # type: ignore[attr-defined]
    assert all(f.data == b"z" * 32 * 1024 and f.complete for f in frames)  # type: ignore[attr-defined]
