"""The chaos proxy's WebSocket message cuts (``chaos.py``, ``websocket=True``):
a scripted server answers a scripted upgrade, then sends binary messages of
100 bytes; what the client read before its link was reset shows where the
cut fell. And what the proxy counts as a link that carried the session."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from sansrs.rsocket import FrameType
from tests.adapters.rsocket.chaos import ChaosProxy, Fault, _carried, kinds_for

MESSAGE = 100
HEAD = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"


def _message(i: int) -> bytes:
    """An unmasked binary frame (FIN, opcode 2) of ``MESSAGE`` bytes."""
    return bytes([0x82, MESSAGE]) + bytes([i]) * MESSAGE


def _read_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"ended inside the HTTP head: {data!r}"
        data += chunk
    return data


class ScriptedServer:
    """Answers one upgrade, then sends 20 messages when told to."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.go = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            _read_head(conn)
            conn.sendall(HEAD)
            assert self.go.wait(20)
            with contextlib.suppress(OSError):  # the proxy resets the link
                conn.sendall(b"".join(_message(i) for i in range(20)))
                conn.recv(1)

    def close(self) -> None:
        self.listener.close()
        self.thread.join(20)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer()
    try:
        yield s
    finally:
        s.close()


def _received_after_cut(server: ScriptedServer, kind: Fault) -> tuple[bytes, ChaosProxy]:
    """What the client read after the upgrade, to the reset; ``kind``
    injected before the server sends its messages."""
    with ChaosProxy(("127.0.0.1", server.port), websocket=True) as proxy:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=20)
        with client:
            client.sendall(b"GET /rsocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")
            head = _read_head(client)
            proxy.inject(kind)  # queued on the proxy thread before the messages arrive
            server.go.set()
            got = bytearray(head[head.index(b"\r\n\r\n") + 4 :])
            with contextlib.suppress(ConnectionResetError):
                while chunk := client.recv(65536):
                    got += chunk
        assert proxy.wait_for(lambda p: len(p.faults) == 1, 20)
        return bytes(got), proxy


@pytest.mark.timeout(30)
def test_chaos_proxy_mid_message_cut_leaves_the_client_half_a_websocket_message(
    server: ScriptedServer,
) -> None:
    got, proxy = _received_after_cut(server, Fault.MID_MESSAGE)
    assert got == _message(0)[: 2 + MESSAGE // 2]  # its header and half its payload
    assert [f.kind for f in proxy.faults] == [Fault.MID_MESSAGE]
    assert proxy.cuts() == 1


@pytest.mark.timeout(30)
def test_chaos_proxy_after_message_cut_falls_on_a_websocket_message_boundary(
    server: ScriptedServer,
) -> None:
    got, proxy = _received_after_cut(server, Fault.AFTER_MESSAGE)
    assert got == _message(0)  # the whole message, nothing of the next
    assert [f.kind for f in proxy.faults] == [Fault.AFTER_MESSAGE]


def test_chaos_proxy_message_cuts_need_a_websocket_proxy() -> None:
    assert Fault.MID_MESSAGE not in kinds_for(websocket=False)
    assert set(kinds_for(websocket=True)) == set(Fault)
    with ChaosProxy(("127.0.0.1", 9)) as proxy, pytest.raises(ValueError, match="websocket"):
        proxy.schedule([Fault.RESET, Fault.MID_MESSAGE], every=(1, 2), limit=1)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", [Fault.MID_MESSAGE, Fault.MID_FRAME])
def test_chaos_proxy_stop_faults_drops_a_cut_not_yet_made(
    server: ScriptedServer, kind: Fault
) -> None:
    """A message cut is placed at the next message after it was injected, a
    ``MID_FRAME`` a few bytes later; one still waiting when the faults stop
    would otherwise fall on whatever comes next (a test's goodbye: a cut
    nobody resumes, and the chaos test's ``resumes >= cuts`` fails)."""
    with ChaosProxy(("127.0.0.1", server.port), websocket=True) as proxy:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=20)
        with client:
            client.sendall(b"GET /rsocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")
            head = _read_head(client)
            proxy.inject(kind)
            proxy.stop_faults()
            server.go.set()
            got = bytearray(head[head.index(b"\r\n\r\n") + 4 :])
            want = b"".join(_message(i) for i in range(20))
            while len(got) < len(want):
                chunk = client.recv(65536)
                assert chunk, f"the link ended after {len(got)} bytes"
                got += chunk
        assert bytes(got) == want
        assert proxy.faults == []


def _frame(kind: int, body: bytes = b"x" * 20) -> bytes:
    """An RSocket frame of type ``kind`` on stream 0 (no length prefix)."""
    return bytes(4) + bytes([kind << 2, 0]) + body


def _masked(payload: bytes, opcode: int = 0x2, mask: bytes = b"\x5a\xa5\x0f\xf0") -> bytes:
    """A client's WebSocket frame (FIN, masked), as a browser sends it."""
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked


def test_chaos_proxy_a_link_carried_the_session_once_the_client_spoke_past_its_resume() -> None:
    """What the proxy counts as a link that carried the session (``session_cuts``):
    SETUP on it, or anything after its RESUME (the client says nothing more
    until RESUME_OK); a RESUME alone, an upgrade, a ping are not enough."""
    resume, setup = _frame(FrameType.RESUME), _frame(FrameType.SETUP)
    tcp_resume = len(resume).to_bytes(3, "big") + resume
    assert not _carried(tcp_resume[:7], websocket=False)
    assert not _carried(tcp_resume, websocket=False)
    assert _carried(tcp_resume + b"\0", websocket=False)
    assert _carried((len(setup).to_bytes(3, "big") + setup)[:8], websocket=False)
    head = b"GET /rsocket HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"
    assert not _carried(head, websocket=True)
    ws_resume = head + _masked(resume)
    assert not _carried(ws_resume[:-1], websocket=True)
    assert not _carried(ws_resume, websocket=True)
    assert not _carried(ws_resume + _masked(b"p", opcode=0x9), websocket=True)  # a ping
    assert _carried(ws_resume + _masked(b"p", opcode=0x9) + _masked(b"k")[:2], websocket=True)
    assert _carried(head + _masked(setup)[:11], websocket=True)
