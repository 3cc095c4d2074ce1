"""``fire_and_forget`` one call at a time (``bench_tcp.py`` row ``fnf16``):
plain ``bytes`` data is queued as is and made a Payload in its batch on the
connection's thread, anything else is checked at the call; the queue keeps
the Batcher's rules (order, the owner thread consumes at once, waits only
while full, raises once closed); the peer's method is the queue's own."""

from __future__ import annotations

import threading

import pytest
from sansrs.adapters.drive.queues import QueueClosed
from sansrs.adapters.rsocket import Payload, connect, serve
from sansrs.adapters.rsocket.fast import FireAndForgets, payload_batches
from sansrs.adapters.rsocket.peer import RSocketPeer
from sansrs.adapters.rsocket.routed import checked_payload
from sansrs.adapters.rsocket.types import Request

WAIT = 10.0
RAW = "application/octet-stream"


class _Loop:
    """A stand-in connection thread: submitted calls wait until ``run()``."""

    def __init__(self) -> None:
        self.calls: list[object] = []
        self.owner = False

    def submit(self, fn: object) -> None:
        self.calls.append(fn)

    def run(self) -> None:
        calls, self.calls = self.calls, []
        for fn in calls:
            fn()  # type: ignore[operator]


def _queue(loop: _Loop, capacity: int = 4096) -> tuple[FireAndForgets, list[list[Payload]]]:
    batches: list[list[Payload]] = []
    fnf = FireAndForgets(
        loop.submit,
        payload_batches(batches.append),
        lambda: loop.owner,
        lambda data, md: checked_payload(None, data, md),
        capacity,
    )
    return fnf, batches


def test_rsocket_fnf_one_at_a_time_hands_payloads_over_in_order() -> None:
    loop = _Loop()
    fnf, batches = _queue(loop)
    fnf.send(b"a")
    fnf.send("b")  # str: checked and made a Payload at the call
    fnf.send(b"c", b"m")
    fnf.send(b"d")
    assert len(loop.calls) == 1  # one hand-off for the burst
    assert list(fnf.items) == [b"a", Payload(b"b"), Payload(b"c", b"m"), b"d"]
    loop.run()
    assert batches == [[Payload(b"a"), Payload(b"b"), Payload(b"c", b"m"), Payload(b"d")]]
    assert {type(p) for p in batches[0]} == {Payload}


def test_rsocket_fnf_one_at_a_time_all_bytes_batch_is_payloads() -> None:
    loop = _Loop()
    fnf, batches = _queue(loop)
    for i in range(100):
        fnf.send(b"%d" % i)
    loop.run()
    assert batches == [[Payload(b"%d" % i) for i in range(100)]]
    assert {type(p) for p in batches[0]} == {Payload}


def test_rsocket_fnf_one_at_a_time_bad_data_raises_at_the_call_and_queues_nothing() -> None:
    loop = _Loop()
    fnf, _ = _queue(loop)
    with pytest.raises(TypeError, match="data must be bytes or str"):
        fnf.send(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="metadata must be bytes or str"):
        fnf.send(b"x", 4)  # type: ignore[arg-type]
    assert len(fnf) == 0 and loop.calls == []


def _send_on_another_thread(fnf: FireAndForgets, data: bytes) -> None:
    thread = threading.Thread(target=fnf.send, args=(data,))
    thread.start()
    thread.join(WAIT)


def test_rsocket_fnf_one_at_a_time_on_the_owner_thread_consumes_at_once() -> None:
    loop = _Loop()
    fnf, batches = _queue(loop)
    # Another thread starts the batch (the one that starts a batch is not
    # the owner until it is drained: Batcher._producer).
    _send_on_another_thread(fnf, b"1")
    assert batches == [] and len(loop.calls) == 1  # pending
    loop.owner = True
    fnf.send(b"2")  # the owner drains everything pending, in order
    assert batches == [[Payload(b"1"), Payload(b"2")]]
    loop.owner = False
    loop.run()  # the scheduled drain finds nothing left
    assert len(batches) == 1


def test_rsocket_fnf_one_at_a_time_the_thread_that_started_the_batch_skips_is_owner() -> None:
    loop = _Loop()
    asked: list[bool] = []
    fnf = FireAndForgets(
        loop.submit,
        payload_batches(lambda batch: None),
        lambda: asked.append(loop.owner) or loop.owner,
        lambda data, md: checked_payload(None, data, md),
    )
    for data in (b"1", b"2", b"3"):
        fnf.send(data)
    assert asked == [False]  # the put that started the batch alone
    _send_on_another_thread(fnf, b"4")  # any other thread asks
    assert asked == [False, False]
    loop.run()
    fnf.send(b"5")  # a new batch: asked again
    assert asked == [False, False, False]
    assert list(fnf.items) == [b"5"]


def test_rsocket_fnf_one_at_a_time_owner_after_its_batch_drained_consumes_at_once() -> None:
    # (A thread in a direct call is the owner; the call runs the calls
    # queued before it first: the drain of the batch that thread started.)
    loop = _Loop()
    fnf, batches = _queue(loop)
    fnf.send(b"1")
    fnf.send(b"2")
    loop.run()
    loop.owner = True
    fnf.send(b"3")
    assert batches == [[Payload(b"1"), Payload(b"2")], [Payload(b"3")]]
    assert loop.calls == []


def test_rsocket_fnf_one_at_a_time_full_waits_for_room_then_times_out() -> None:
    loop = _Loop()
    fnf, batches = _queue(loop, capacity=2)
    fnf.send(b"1")
    fnf.send(b"2")
    with pytest.raises(TimeoutError):
        fnf.send(b"3", timeout=0.05)
    done = threading.Event()

    def producer() -> None:
        fnf.send(b"4", timeout=WAIT)
        done.set()

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    while not fnf._space_waiters:  # the producer is waiting for room
        t.join(0.001)
    loop.run()  # makes room: the blocked producer goes on
    assert done.wait(WAIT)
    t.join(WAIT)
    loop.run()
    assert [p.data for b in batches for p in b] == [b"1", b"2", b"4"]


def test_rsocket_fnf_one_at_a_time_after_close_raises_the_close_error() -> None:
    loop = _Loop()
    fnf, _ = _queue(loop)
    fnf.close()
    with pytest.raises(QueueClosed):
        fnf.send(b"x")
    with pytest.raises(QueueClosed):
        fnf.send("x", b"m")


class _Got:
    def __init__(self) -> None:
        self.got: list[tuple[bytes, bytes | None]] = []

    def fire_and_forget(self, request: Request) -> None:
        self.got.append((request.data, request.metadata))

    def request_response(self, request: Request) -> Payload:
        return Payload(b"%d" % len(self.got))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_fnf_one_at_a_time_peer_call_is_the_queues_send(loop: str) -> None:
    assert RSocketPeer.fire_and_forget.__doc__ is not None  # the method's docstring kept
    assert "Queue REQUEST_FNF" in RSocketPeer.fire_and_forget.__doc__
    handler = _Got()
    sent: list[object] = [b"a", "b", (b"c", b"m"), b"d", *[b"%d" % i for i in range(200)]]
    with serve("tcp://127.0.0.1:0", handler, loop=loop) as server:
        # Composite metadata declared (connect's default): raw metadata fails at the call.
        not_composite = pytest.raises(ValueError, match="not composite")
        with connect(server.url, loop=loop) as composite, not_composite:
            composite.fire_and_forget(b"x", b"raw", timeout=WAIT)
        with connect(server.url, loop=loop, metadata_mime_type=RAW) as client:
            assert client.fire_and_forget == client._fnf.send  # no frame of the peer's own
            for item in sent:
                if isinstance(item, tuple):
                    client.fire_and_forget(item[0], item[1], timeout=WAIT)
                else:
                    client.fire_and_forget(item, timeout=WAIT)  # type: ignore[arg-type]
            client.fire_and_forget_many([b"e", (b"f", b"n")], timeout=WAIT)
            reply = client.request_response(b"count", timeout=WAIT)  # behind every fnf
    assert reply is not None and int(reply.data) == len(sent) + 2
    want = [x if isinstance(x, tuple) else (x if isinstance(x, bytes) else x.encode(), None)
            for x in sent]  # type: ignore[union-attr]
    assert handler.got == [*want, (b"e", None), (b"f", b"n")]
