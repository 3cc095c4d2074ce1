"""``sansrs.adapters.tools.capture.CaptureProxy`` on loopback sockets."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from sansrs.adapters.tools.capture import CaptureProxy

from sansrs.trace import DataRecord, Direction, EndReason, EndRecord, read_trace

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT
TIMEOUT = 10.0


class _EchoServer:
    """Echoes every chunk with a prefix; half-closes after the peer does."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(TIMEOUT)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(TIMEOUT)
        with conn:
            while data := conn.recv(65536):
                conn.sendall(b"<" + data + b">")
            conn.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.thread.join(TIMEOUT)
        self.listener.close()


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk
        buf += chunk
    return buf


def test_capture_proxy_records_both_directions_with_chunks(tmp_path: Path) -> None:
    server = _EchoServer()
    path = tmp_path / "echo.rstrace"
    with CaptureProxy(
        ("127.0.0.1", server.port), path, metadata={"description": "echo"}, timeout=TIMEOUT
    ) as proxy:
        with socket.create_connection(proxy.address, timeout=TIMEOUT) as client:
            for word in (b"one", b"two", b"three"):
                client.sendall(word)
                # wait for each echo so every chunk travels on its own
                assert _recv_exactly(client, len(word) + 2) == b"<" + word + b">"
            client.shutdown(socket.SHUT_WR)
            assert client.recv(10) == b""  # the server's close came through
        assert proxy.wait_finished(TIMEOUT)
    server.close()
    assert proxy.error is None
    trace = read_trace(path)
    assert trace.metadata["description"] == "echo"
    assert trace.metadata["tool"] == "sansrs.adapters.tools.capture"
    assert trace.chunks(C2S) == [b"one", b"two", b"three"]
    assert trace.data(S2C) == b"<one><two><three>"
    ends = [r for r in trace.records if isinstance(r, EndRecord)]
    assert [(e.direction, e.reason) for e in ends] == [(C2S, EndReason.EOF), (S2C, EndReason.EOF)]
    times = [r.timestamp for r in trace.records]
    assert times == sorted(times) and times[0] >= 0.0


def test_capture_proxy_close_mid_connection_aborts_open_directions(tmp_path: Path) -> None:
    server = _EchoServer()
    path = tmp_path / "abort.rstrace"
    proxy = CaptureProxy(("127.0.0.1", server.port), path, timeout=TIMEOUT)
    with socket.create_connection(proxy.address, timeout=TIMEOUT) as client:
        client.sendall(b"ping")
        assert _recv_exactly(client, 6) == b"<ping>"
        proxy.close()
        assert proxy.wait_finished(0)
    server.close()
    trace = read_trace(path)
    assert trace.data(C2S) == b"ping"
    ends = {r.direction: r.reason for r in trace.records if isinstance(r, EndRecord)}
    assert set(ends) == {C2S, S2C}
    assert EndReason.ABORTED in ends.values()


def test_capture_proxy_without_a_connection_writes_an_empty_trace(tmp_path: Path) -> None:
    path = tmp_path / "empty.rstrace"
    proxy = CaptureProxy(("127.0.0.1", 9), path, timeout=TIMEOUT)
    assert not proxy.wait_finished(0)
    proxy.close()
    assert read_trace(path).records == ()


def test_capture_proxy_unreachable_target_reports_the_error(tmp_path: Path) -> None:
    # A port that nothing listens on: bind one, close it, use its number.
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    path = tmp_path / "refused.rstrace"
    with CaptureProxy(("127.0.0.1", port), path, timeout=TIMEOUT) as proxy:
        with socket.create_connection(proxy.address, timeout=TIMEOUT) as client:
            assert proxy.wait_finished(TIMEOUT)
            assert client.recv(1) == b""  # dropped, not left hanging
        assert isinstance(proxy.error, OSError)
    assert not [r for r in read_trace(path).records if isinstance(r, DataRecord)]


def test_capture_proxy_idle_timeout_ends_a_silent_connection(tmp_path: Path) -> None:
    server = _EchoServer()
    path = tmp_path / "idle.rstrace"
    proxy = CaptureProxy(("127.0.0.1", server.port), path, timeout=TIMEOUT, idle_timeout=0.3)
    with proxy, socket.create_connection(proxy.address, timeout=TIMEOUT) as client:
        assert proxy.wait_finished(TIMEOUT)
        assert client.recv(1) == b""  # torn down
    server.close()
    ends = [r for r in read_trace(path).records if isinstance(r, EndRecord)]
    assert {e.direction for e in ends} == {C2S, S2C}
    assert {e.reason for e in ends} == {EndReason.ABORTED}
