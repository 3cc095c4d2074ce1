"""A resumable client and server on real loopback sockets, through a
``FaultProxy``, driven by the sans-IO cores in the test thread.

Same interface as ``ResumePair`` (``client``, ``server``, ``pump``,
``take``), so ``resume_workload.run`` drives it; the cuts come from the
proxy, not from ``cut``. ``pump()`` runs one I/O turn: write what the cores
queued, wait (``select``, bounded) for bytes, feed them with the monotonic
clock, run timers. When the client's transport dies it reconnects through
the proxy at once and sends RESUME; the server side hands a RESUME over to
the stored session (``ResumeAccepted``).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import time

from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    ConnectionState,
    RemoteProtocolError,
    Role,
    SessionStore,
)
from sansrs.rsocket.events import (
    ConnectionLost,
    ConnectionTerminated,
    Disconnected,
    Event,
    ResumeAccepted,
    SetupReceived,
)


class _End:
    """One socket and the connection that owns it."""

    def __init__(self, sock: socket.socket, conn: Connection) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.conn = conn
        self.out = bytearray()
        self.dead = False


class SocketResumePair:
    def __init__(
        self,
        proxy_address: tuple[str, int],
        listener: socket.socket,
        client_config: ConnectionConfig | None = None,
        server_config: ConnectionConfig | None = None,
        *,
        store: SessionStore | None = None,
        keepalive_ms: int = 20_000,
        lifetime_ms: int = 90_000,
        deadline: float = 60.0,
    ) -> None:
        self.proxy_address = proxy_address
        self.listener = listener
        listener.setblocking(False)
        self.store = store if store is not None else SessionStore(keep_detached=30.0)
        self.server_config = server_config
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ, None)
        self.deadline = time.monotonic() + deadline
        self.client = Connection(Role.CLIENT, client_config)
        self.client.setup(keepalive_interval=keepalive_ms, max_lifetime=lifetime_ms, resume=True)
        self.server: Connection | None = None  # the session, once SETUP arrived
        self.ends: dict[socket.socket, _End] = {}
        self.client_end = self._connect()
        self.client_events: list[Event] = []
        self.server_events: list[Event] = []
        self.reconnects = 0
        self.rejected: ConnectionTerminated | None = None
        while self.server is None:
            self.pump()
        assert isinstance(self.server_events[0], SetupReceived)
        self.server.accept_setup()
        self.pump()
        self.take()

    def _connect(self) -> _End:
        sock = socket.create_connection(self.proxy_address, timeout=5.0)
        end = _End(sock, self.client)
        self.ends[sock] = end
        self.sel.register(sock, selectors.EVENT_READ, end)
        return end

    def _drop(self, end: _End) -> None:
        end.dead = True
        self.ends.pop(end.sock, None)
        with contextlib.suppress(Exception):
            self.sel.unregister(end.sock)
        end.sock.close()

    def _lost(self, end: _End, now: float) -> None:
        """The transport of ``end`` ended."""
        self._drop(end)
        if end.conn.state is not ConnectionState.CLOSED:
            end.conn.receive_data(b"", now)
        self._collect()

    def _collect(self) -> None:
        self.client_events += self.client.events()
        if self.server is not None:
            self.server_events += self.server.events()

    def _on_server_events(self, end: _End) -> None:
        for ev in end.conn.events():
            if isinstance(ev, ResumeAccepted):
                end.conn = ev.session  # this socket now carries the session
                assert ev.session is self.server
                for other in list(self.ends.values()):
                    if other is not end and other.conn is ev.session:
                        # The old transport (half-open): its late end must
                        # not reach the session, which lives on this one.
                        self._drop(other)
            elif isinstance(ev, SetupReceived):
                self.server = end.conn
                self.server_events.append(ev)
            elif end.conn is self.server:
                self.server_events.append(ev)

    def pump(self) -> None:
        now = time.monotonic()
        if now > self.deadline:
            raise AssertionError("the socket pair did not finish in time")
        if self.client.state is ConnectionState.DISCONNECTED:
            # Reconnect on the next turn (a real adapter backs off) and resume.
            self.reconnects += 1
            self.client.resume()
            self.client_end = self._connect()
        for conn in (self.client, self.server):
            if conn is not None and conn.state is not ConnectionState.CLOSED:
                deadline = conn.next_deadline()
                if deadline is not None and now >= deadline:
                    conn.handle_timeout(now)
        for end in list(self.ends.values()):
            if end.conn.state is ConnectionState.DISCONNECTED:
                self._drop(end)  # a keepalive timeout detached it: close the transport
        for end in list(self.ends.values()):
            end.out += end.conn.data_to_send()
            self._write(end, now)
        timeout = 0.05
        for conn in (self.client, self.server):
            d = conn.next_deadline() if conn is not None else None
            if d is not None:
                timeout = max(0.0, min(timeout, d - now))
        for key, _ in self.sel.select(timeout):
            if key.data is None:
                self._accept()
                continue
            end = key.data
            if end.dead:
                continue
            try:
                data = end.sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            now = time.monotonic()
            if not data:
                self._lost(end, now)
                continue
            if end.conn.state is ConnectionState.CLOSED:
                continue
            with contextlib.suppress(RemoteProtocolError):
                end.conn.receive_data(data, now)  # (the ERROR is queued; it closed)
            if end.conn.role is Role.SERVER:
                self._on_server_events(end)
            self.client_events += self.client.events()
            if end.conn is self.client and self.client.state is ConnectionState.CLOSED:
                closed = [e for e in self.client_events if isinstance(e, ConnectionTerminated)]
                self.rejected = closed[-1] if closed else None
        for end in list(self.ends.values()):
            end.out += end.conn.data_to_send()
            self._write(end, time.monotonic())
        self._collect()

    def _write(self, end: _End, now: float) -> None:
        if end.dead or not end.out:
            return
        try:
            sent = end.sock.send(end.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._lost(end, now)
            return
        del end.out[:sent]

    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        conn = Connection(Role.SERVER, self.server_config, sessions=self.store)
        end = _End(sock, conn)
        self.ends[sock] = end
        self.sel.register(sock, selectors.EVENT_READ, end)

    # ResumePair's interface for resume_workload.run (cuts come from the proxy)

    def in_flight(self) -> tuple[int, int]:
        return 0, 0

    def cut(self, to_server: int, to_client: int) -> None:  # pragma: no cover - unused
        raise AssertionError("the proxy cuts")

    def resume(self) -> list[Event]:  # pragma: no cover - unused
        raise AssertionError("the pair resumes by itself")

    def take(self) -> tuple[list[Event], list[Event]]:
        self._collect()
        out = (self.client_events, self.server_events)
        self.client_events = []
        self.server_events = []
        return out

    def disconnects(self, events: list[Event]) -> int:
        return sum(isinstance(e, Disconnected) for e in events)

    def close(self) -> None:
        for end in list(self.ends.values()):
            self._drop(end)
        self.sel.close()

    def lost(self) -> list[Event]:
        return [e for e in self.client_events if isinstance(e, ConnectionLost)]
