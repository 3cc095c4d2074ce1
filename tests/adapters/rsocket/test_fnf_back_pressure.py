"""The blocking client's fire-and-forgets (and metadata pushes; a resumable
session's too; a channel's items) against a peer that reads nothing,
on the thread and selector drivers, over TCP and WebSocket: the unwritten
bytes the connection holds (its buffer and the core's output) stay within
``high_water`` and one batch (the caller waits before a put that starts a
batch while they are at ``high_water`` or more: ``Batcher``'s ``room``);
the wait ends with ``TimeoutError`` after ``timeout``, when the peer reads
(every item then arrives), or with ``ConnectionClosed`` when the
connection dies."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed, Loop
from sansrs.adapters.drive.config import LoopConfig
from sansrs.adapters.rsocket import SessionLost, connect_resumable, serve_resumable
from sansrs.adapters.rsocket.client import Client, connect
from sansrs.adapters.transport.websocket.transport import SEND_BATCH
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection
from wsproto.events import Request as WsRequest

from sansrs.rsocket import RequestNFrame, encode_frame_prefixed
from tests.adapters.kernel_queues import kernel_queued
from tests.adapters.rsocket.chaos import ChaosProxy, Fault

WAIT = 10.0
RAW = "application/octet-stream"
HIGH = 64 * 1024
ITEM = b"x" * 64
#: A frame of ITEM at most (header and length), and the items of one batch
#: (FireAndForgets' capacity): what may join the output past ``high_water``.
FRAME = len(ITEM) + 16
BATCH = 4096
#: Items that overfill every buffer on the way many times over (kernel ones included).
TOO_MANY = 8 * 1024 * 1024 // len(ITEM)


class StalledPeer:
    """A listener whose one connection (after a WebSocket upgrade, for
    ``ws``) reads nothing until ``go`` is set, then reads to the end
    (``got``: the bytes after the upgrade); ``reset`` instead ends it with
    an RST. Small socket buffers, so that the client's own buffer fills."""

    def __init__(self, ws: bool) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        port = self.listener.getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}/rs" if ws else f"tcp://127.0.0.1:{port}"
        self.ws = ws
        self.told = threading.Event()
        self.reading = True
        self.got = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def go(self) -> None:
        """Read everything from now on."""
        self.told.set()

    def reset(self) -> None:
        """End the connection with an RST, unread."""
        self.reading = False
        self.told.set()

    def _serve(self) -> None:
        sock, _ = self.listener.accept()
        with sock, contextlib.suppress(OSError):
            if self.ws:
                self._upgrade(sock)
            self.told.wait(WAIT)
            if not self.reading:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                return
            while chunk := sock.recv(1 << 20):
                self.got += len(chunk)

    @staticmethod
    def _upgrade(sock: socket.socket) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)  # the request's head alone: the RSocket bytes stay unread
        ws.receive_data(head)
        assert any(isinstance(e, WsRequest) for e in ws.events())
        sock.sendall(ws.send(AcceptConnection()))

    def close(self) -> None:
        self.told.set()
        self.listener.close()
        self.thread.join(WAIT)


def _unwritten(client: Client) -> int:
    return client._thread.buffered + client._engine.conn.queued_output  # type: ignore[attr-defined]


def _one_at_a_time(client: Client, count: int | None, timeout: float | None) -> None:
    send = client.fire_and_forget
    for _ in range(TOO_MANY) if count is None else range(count):
        send(ITEM, timeout=timeout)


def _many(client: Client, count: int | None, timeout: float | None) -> None:
    items = itertools.repeat(ITEM, TOO_MANY if count is None else count)
    client.fire_and_forget_many(items, timeout=timeout)


def _metadata_pushes(client: Client, count: int | None, timeout: float | None) -> None:
    push = client.metadata_push
    for _ in range(TOO_MANY) if count is None else range(count):
        push(ITEM, timeout=timeout)


@pytest.fixture(params=["thread", "selector"])
def driver(request: pytest.FixtureRequest) -> Iterator[Loop | str]:
    """``"thread"``, or a selector loop of its own (the test's limits)."""
    if request.param == "thread":
        yield "thread"
        return
    loop = Loop(LoopConfig(high_water=HIGH))
    loop.start()
    yield loop
    loop.stop(abort=True)


@pytest.fixture(params=["tcp", "ws"])
def ws(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "ws")


def _client(peer: StalledPeer, driver: Loop | str, config: LoopConfig | None = None) -> Client:
    """A client of ``peer`` with a small socket send buffer (its own fills
    soon); the thread driver's limits ``config`` (default: ``HIGH``)."""
    config = (config or LoopConfig(high_water=HIGH)) if driver == "thread" else None
    client = connect(peer.url, loop=driver, loop_config=config, metadata_mime_type=RAW)
    sock = socket.socket(fileno=client.transport.fileno())
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    finally:
        sock.detach()
    return client


Send = Callable[[Client, "int | None", "float | None"], None]


@pytest.fixture(params=["one", "many"])
def send(request: pytest.FixtureRequest) -> Iterator[Send]:
    yield _one_at_a_time if request.param == "one" else _many


def _on_a_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[BaseException | None]]:
    """``fn`` started on a thread of its own; what it ended with (None, or
    what it raised) lands in the list."""
    done: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            done.append(None)
        except BaseException as exc:
            done.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, done


def _told_when_waiting(client: Client) -> threading.Event:
    """Set once a fire-and-forget asks for room (``Batcher``'s ``room``)."""
    waiting = threading.Event()
    room = client._fnf._room
    assert room is not None

    def told(timeout: float | None) -> None:
        waiting.set()
        room(timeout)

    client._fnf._room = told
    return waiting


def _waits_then_goes_on(peer: StalledPeer, client: Client, send: Send, most: int) -> None:
    """Until the output is at high_water: then the put that starts a batch
    (a push: each one) waits, in vain (nothing drains), and says so, with
    ``HIGH`` to ``most`` bytes unwritten. The peer reads: a waiting call
    ends, and every item arrives."""
    with pytest.raises(TimeoutError, match="no room on the connection"):
        send(client, None, 0.2)
    assert HIGH <= _unwritten(client) <= most
    caller, done = _on_a_thread(lambda: send(client, 2 * BATCH, WAIT))
    peer.go()
    caller.join(WAIT)
    assert done == [None]


def _reset_ends_the_wait(
    peer: StalledPeer,
    client: Client,
    caller: threading.Thread,
    done: list[BaseException | None],
) -> None:
    """The peer resets the connection: the caller's wait (no timeout) ends
    with ``ConnectionClosed``, and the connection with it."""
    peer.reset()
    caller.join(WAIT)
    assert len(done) == 1 and isinstance(done[0], ConnectionClosed)
    assert client._thread.join(WAIT)


#: Over WebSocket the transport also holds its framed copy of one send
#: batch of the connection's buffer.
WS_FRAMED = SEND_BATCH + FRAME


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "sends", [_one_at_a_time, _many, _metadata_pushes], ids=["one", "many", "metadata-push"]
)
def test_rsocket_fire_and_forget_waits_for_room_while_the_peer_reads_nothing(
    driver: Loop | str, ws: bool, sends: Send
) -> None:
    # (metadata_push as a fire-and-forget: each push crossed to the
    # connection's thread alone and its frame joined the output however
    # much was unwritten, megabytes against a peer reading nothing.)
    peer = StalledPeer(ws)
    try:
        client = _client(peer, driver)
        _waits_then_goes_on(peer, client, sends, HIGH + 2 * BATCH * FRAME + ws * WS_FRAMED)
        client.close()
        peer.thread.join(WAIT)
        assert peer.got > 2 * BATCH * len(ITEM)
    finally:
        peer.close()


@pytest.mark.timeout(60)
def test_rsocket_fire_and_forget_waiting_for_room_ends_when_the_connection_dies(
    driver: Loop | str, ws: bool, send: Send
) -> None:
    peer = StalledPeer(ws)
    try:
        client = _client(peer, driver)
        with pytest.raises(TimeoutError):
            send(client, None, 0.2)
        waiting = _told_when_waiting(client)
        # No timeout: the connection's end ends it.
        caller, done = _on_a_thread(lambda: send(client, 2 * BATCH, None))
        assert waiting.wait(WAIT)
        _reset_ends_the_wait(peer, client, caller, done)
    finally:
        peer.close()


@pytest.mark.timeout(60)
def test_rsocket_metadata_push_waiting_for_room_ends_when_the_connection_dies(
    driver: Loop | str,
) -> None:
    peer = StalledPeer(False)
    try:
        client = _client(peer, driver)
        caller, done = _on_a_thread(lambda: _metadata_pushes(client, None, None))
        client._thread.wait_until(lambda: _unwritten(client) >= HIGH, WAIT)  # type: ignore[attr-defined]
        _reset_ends_the_wait(peer, client, caller, done)
    finally:
        peer.close()


@pytest.mark.timeout(60)
def test_rsocket_resumable_fire_and_forget_waits_for_room_while_the_peer_reads_nothing(
    driver: Loop | str, send: Send
) -> None:
    # A session's driver had no room to wait for: its transport's buffer
    # grew with every fire-and-forget (megabytes against a peer reading nothing).
    peer = StalledPeer(False)
    try:
        config = LoopConfig(high_water=HIGH) if driver == "thread" else None
        client = connect_resumable(
            peer.url, loop=driver, loop_config=config, metadata_mime_type=RAW
        )
        _waits_then_goes_on(peer, client, send, HIGH + 2 * BATCH * FRAME)
        # (The raw peer never acknowledges what it read: the session ends
        # with fire-and-forgets it cannot confirm, and says so.)
        with contextlib.suppress(SessionLost):
            client.close()
        peer.thread.join(WAIT)
        assert peer.got > 2 * BATCH * len(ITEM)
    finally:
        peer.close()


#: One of the channel's items as a PAYLOAD frame on the wire (the length
#: prefix, the 6-byte header, the data: no metadata).
CHANNEL_FRAME = 3 + 6 + len(ITEM)
#: A turn queues a stream's items up to ``high_water`` bytes of them
#: (``Outbounds.turn_bytes``), counted without their frames' heads.
TURN = HIGH // len(ITEM) * CHANNEL_FRAME


class Counted:
    """A server's fire-and-forget handler that counts, and tells waiters."""

    def __init__(self) -> None:
        self.count = 0
        self.cond = threading.Condition()

    def fire_and_forget(self, request: object) -> None:
        with self.cond:
            self.count += 1
            self.cond.notify_all()

    def wait_for(self, n: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.count >= n, WAIT)


@pytest.mark.timeout(60)
def test_rsocket_resumable_fire_and_forget_waiting_for_room_goes_on_after_a_resume(
    driver: Loop | str,
) -> None:
    # The wait spans transports: the stalled one is cut while a caller
    # waits for room; the session resumes on the next, which drains the
    # output, and the caller goes on. Every fire-and-forget arrives once.
    handler = Counted()
    config = LoopConfig(high_water=HIGH) if driver == "thread" else None
    with serve_resumable("tcp://127.0.0.1:0", handler) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with ChaosProxy(("127.0.0.1", port)) as proxy:
            client = connect_resumable(
                proxy.url, loop=driver, loop_config=config, metadata_mime_type=RAW
            )
            try:
                client.fire_and_forget(ITEM)
                assert handler.wait_for(1)  # the first link carries the session
                proxy.stall(3 * WAIT)
                sent = 1
                with pytest.raises(TimeoutError, match="no room on the connection"):
                    while True:
                        client.fire_and_forget(ITEM, timeout=0.2)  # (raising: not queued)
                        sent += 1
                waiting = _told_when_waiting(client)
                caller, done = _on_a_thread(lambda: _one_at_a_time(client, 2 * BATCH, WAIT))
                assert waiting.wait(WAIT)
                proxy.inject(Fault.RESET)
                caller.join(WAIT)
                assert done == [None]
                sent += 2 * BATCH
                assert handler.wait_for(sent)
                assert client.resumes >= 1
            finally:
                client.close()
    assert handler.count == sent  # once each


class GrantingPeer(StalledPeer):
    """A StalledPeer that reads the client's SETUP and REQUEST_CHANNEL,
    grants the channel all the credit it may ask for (REQUEST_N 2^31-1),
    and then reads nothing (``sock``: its end, once ``accepted``)."""

    def __init__(self, ws: bool) -> None:
        self.accepted = threading.Event()
        self.sock: socket.socket | None = None
        super().__init__(ws)

    def _serve(self) -> None:
        sock, _ = self.listener.accept()
        self.sock = sock
        self.accepted.set()
        with sock, contextlib.suppress(OSError):
            got = b""
            frames = 0
            while frames < 2:  # SETUP, then REQUEST_CHANNEL on stream 1
                got += sock.recv(1)
                if len(got) >= 3 and len(got) == 3 + int.from_bytes(got[:3], "big"):
                    frames += 1
                    got = b""
            sock.sendall(encode_frame_prefixed(RequestNFrame(stream_id=1, request_n=0x7FFFFFFF)))
            self.told.wait(WAIT)
            while chunk := sock.recv(1 << 20):
                self.got += len(chunk)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_channel_items_are_pulled_only_while_the_output_has_room(loop: str) -> None:
    # A client's channel to a peer that grants all the credit there is and
    # reads nothing: its items are pulled (on a worker) only as the pump
    # asks, within the sources' budget, and the pump stops at high_water
    # (the output the core holds while the socket is full counts: it grew
    # to max_queued_output, 4 MiB, with 64 KiB of high_water), so the
    # iterable is not drained into memory however many turns run.
    config = LoopConfig(high_water=HIGH, source_budget=HIGH)
    driver: Loop | str = "thread" if loop == "thread" else Loop(config)
    if isinstance(driver, Loop):
        driver.start()
    peer = GrantingPeer(False)
    pulled = [0]

    def items() -> Iterator[bytes]:
        while True:
            pulled[0] += 1
            yield ITEM

    try:
        client = _client(peer, driver, config)
        conn: Any = client._thread
        inbound = client.request_channel(items())
        conn.wait_until(lambda: _unwritten(client) >= HIGH, WAIT)
        for _ in range(200):  # turns, each one a chance to pump and pull more
            turned = threading.Event()
            conn.call_soon(turned.set)
            assert turned.wait(WAIT)
        # The unwritten output (the driver's and the core's) stops within a
        # turn's items past high_water. Every item pulled is on its way
        # (that output, then the two kernels' queues, measured: on loopback
        # they may take more than their small buffers say) or among what
        # the sources' budget lets be pulled ahead (and the one item a
        # worker holds beyond it).
        assert peer.accepted.wait(WAIT) and peer.sock is not None
        pulled_now = pulled[0]
        unwritten = _unwritten(client)
        assert unwritten < HIGH + TURN, unwritten  # (before a skip off Linux)
        kernels = kernel_queued(client.transport.fileno(), peer.sock.fileno())
        on_the_way = (unwritten + kernels) // CHANNEL_FRAME + 1  # + the REQUEST_CHANNEL's item
        assert pulled_now <= on_the_way + HIGH // len(ITEM) + 2, (pulled_now, unwritten, kernels)
        first = pulled_now
        peer.go()  # it reads: the channel flows again
        conn.wait_until(lambda: pulled[0] > first, WAIT)
        inbound.close()
        client.close()
    finally:
        peer.close()
        if isinstance(driver, Loop):
            driver.stop(abort=True)
