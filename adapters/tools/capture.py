"""A capturing TCP proxy: forwards one connection and records it as a trace.

    with CaptureProxy(("127.0.0.1", server_port), "exchange.rstrace",
                      metadata={"description": "..."}) as proxy:
        connect the client to proxy.address ...
        proxy.wait_finished(timeout=10)

The proxy listens on 127.0.0.1 (an ephemeral port by default), accepts one
connection, connects to the target and pumps bytes both ways on two threads.
Every chunk is recorded exactly as ``recv`` returned it, with its time since
the connection was accepted, before it is forwarded. A side's EOF is recorded
and passed on as a half-close (``shutdown(SHUT_WR)``), so orderly RSocket
shutdowns look the same through the proxy as without it. Every socket
operation has a timeout; ``close()`` stops everything, ends any direction
still open (``EndReason.ABORTED``) and finishes the trace file.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import IO, Any

from sansrs.trace import Direction, EndReason, TraceWriter

__all__ = ["CaptureProxy"]

#: How often blocked accept/recv calls wake up to notice ``close()``.
_POLL = 0.1


class CaptureProxy:
    """Capture one TCP connection to ``target`` into a trace file.

    ``output`` is a path or a binary file object (left open). ``timeout``
    bounds connecting to the target and each send; ``idle_timeout`` ends a
    direction that has seen no bytes for that long (recorded as ABORTED).
    """

    def __init__(
        self,
        target: tuple[str, int],
        output: str | Path | IO[bytes],
        *,
        metadata: dict[str, Any] | None = None,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        timeout: float = 10.0,
        idle_timeout: float = 60.0,
        recv_size: int = 65536,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.recv_size = recv_size
        meta: dict[str, Any] = {
            "protocol": "rsocket",
            "framing": "length-prefixed",
            "tool": "sansrs.adapters.tools.capture",
            "target": f"{target[0]}:{target[1]}",
        }
        meta.update(metadata or {})
        self._writer = TraceWriter(output, meta)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._torn_down = threading.Event()
        self._closed = False
        self._finished = threading.Event()
        self._listener = socket.create_server(listen)
        self._listener.settimeout(_POLL)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0
        self._ended: set[Direction] = set()
        self.error: BaseException | None = None
        self._acceptor = threading.Thread(target=self._accept, name="capture-accept", daemon=True)
        self._acceptor.start()

    # -- public ------------------------------------------------------------

    @property
    def port(self) -> int:
        return self.address[1]

    def wait_finished(self, timeout: float) -> bool:
        """Wait until both directions ended; True if they did in time."""
        return self._finished.wait(timeout)

    def close(self) -> None:
        """Stop accepting and pumping, end open directions, finish the trace."""
        self._stop.set()
        for thread in (self._acceptor, *self._threads):
            if thread is not threading.current_thread():
                thread.join(self.timeout + 1.0)
        with self._lock:
            now = self._now()
            for direction in Direction:
                if direction not in self._ended and self._t0:
                    self._writer.write_end(direction, now, EndReason.ABORTED)
                    self._ended.add(direction)
            self._writer.close()
            self._closed = True
        for sock in (self._listener, *self._sockets):
            sock.close()
        self._finished.set()

    def __enter__(self) -> CaptureProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- threads -----------------------------------------------------------

    def _now(self) -> float:
        return max(0.0, time.monotonic() - self._t0)

    def _accept(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    client, _ = self._listener.accept()
                except TimeoutError:
                    continue
                break
            else:
                return
            self._listener.close()
            self._t0 = time.monotonic()
            self._sockets = [client]
            client.settimeout(_POLL)
            upstream = socket.create_connection(self.target, timeout=self.timeout)
            upstream.settimeout(_POLL)
            self._sockets.append(upstream)
            self._threads = [
                threading.Thread(
                    target=self._pump,
                    args=(client, upstream, Direction.CLIENT_TO_SERVER),
                    name="capture-c2s",
                    daemon=True,
                ),
                threading.Thread(
                    target=self._pump,
                    args=(upstream, client, Direction.SERVER_TO_CLIENT),
                    name="capture-s2c",
                    daemon=True,
                ),
            ]
            for thread in self._threads:
                thread.start()
        except OSError as exc:
            # Target unreachable: drop the client at once (it sees EOF).
            self.error = exc
            for sock in self._sockets:
                sock.close()
            self._finished.set()

    def _send_all(self, dst: socket.socket, data: bytes) -> None:
        # The socket's own timeout is the short poll interval (the other pump
        # recv()s on it); the whole send gets ``self.timeout``.
        view = memoryview(data)
        deadline = time.monotonic() + self.timeout
        while view:
            try:
                sent = dst.send(view)
            except TimeoutError:
                if self._stop.is_set() or time.monotonic() > deadline:
                    raise
                continue
            view = view[sent:]

    def _pump(self, src: socket.socket, dst: socket.socket, direction: Direction) -> None:
        reason = EndReason.EOF
        idle_since = time.monotonic()
        try:
            while True:
                if self._stop.is_set():
                    reason = EndReason.ABORTED
                    break
                try:
                    data = src.recv(self.recv_size)
                except TimeoutError:
                    if time.monotonic() - idle_since > self.idle_timeout:
                        reason = EndReason.ABORTED
                        break
                    continue
                if not data:
                    break
                idle_since = time.monotonic()
                with self._lock:
                    if self._closed:
                        return
                    self._writer.write_data(direction, self._now(), data)
                self._send_all(dst, data)
        except OSError as exc:
            reason = EndReason.ERROR
            self.error = exc
        if reason is EndReason.EOF and self._torn_down.is_set():
            reason = EndReason.ABORTED  # the EOF is our own teardown, not the peer's
        with self._lock:
            if self._closed:
                return
            if direction not in self._ended:
                self._writer.write_end(direction, self._now(), reason)
                self._ended.add(direction)
            both = len(self._ended) == len(Direction)
        try:
            if reason is EndReason.EOF:
                dst.shutdown(socket.SHUT_WR)
            else:
                # Tear down: the other pump sees an error or EOF and ends too.
                self._torn_down.set()
                src.shutdown(socket.SHUT_RDWR)
                dst.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if both:
            self._finished.set()
