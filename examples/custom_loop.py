"""Driving the sans-IO RSocket core from a hand-written event loop.

This is the pattern for plugging sansrs into any framework (Twisted, gevent,
a game loop, an embedded poller, ...): the core ``sansrs.rsocket.Connection``
never touches a socket or a clock. Your loop does four things, and only these:

1. bytes in:   ``conn.receive_data(data, now)`` whenever the socket has some
               (``b""`` when the peer closed), then handle ``conn.events()``;
2. bytes out:  append ``conn.data_to_send()`` to an output buffer and write
               as much as the socket takes; keep the rest, in order;
3. time:       call ``conn.handle_timeout(now)`` at ``conn.next_deadline()``
               (keepalive, peer liveness, leases);
4. intents:    call ``conn.request_stream(...)``, ``conn.send_payload(...)``,
               ``conn.request_n(...)``, ... only from the loop's thread.

Here one ``select.select`` loop runs a tiny server (request-response echo and
a counting stream that honours REQUEST_N) and a client that requests a
stream of 1,000 items with a window of 64 and a request-response, both in
this process over 127.0.0.1. Run it:

    .venv/bin/python examples/custom_loop.py

``sansrs.adapters.drive.selector`` is the full version of this loop (many
connections, a timer heap, wake-ups from other threads, back-pressure).
"""

from __future__ import annotations

import select
import socket
import time

from sansrs.rsocket import Connection, Role
from sansrs.rsocket import events as ev

STREAM_ITEMS = 1000
WINDOW = 64


class Endpoint:
    """One socket, one core, one output buffer: everything a loop keeps per connection."""

    def __init__(self, sock: socket.socket, conn: Connection, name: str) -> None:
        sock.setblocking(False)  # the loop must never block on one connection
        self.sock = sock
        self.conn = conn
        self.name = name
        self.out = bytearray()  # bytes the socket has not taken yet, in order
        self.closed = False

    def flush(self) -> None:
        """Queue what the core produced, then write what the socket accepts now."""
        self.out += self.conn.data_to_send()
        if self.out:
            try:
                sent = self.sock.send(self.out)
            except BlockingIOError:
                sent = 0
            del self.out[:sent]  # a partial write keeps the rest for next time

    def read(self, now: float) -> None:
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return
        # b"" means the peer closed: the core turns it into ConnectionLost/Closed.
        self.conn.receive_data(data, now)
        if not data:
            self.closed = True


class Server:
    """Echoes request-response; streams decimal numbers within the requester's credit."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.ep = endpoint
        self.streams: dict[int, int] = {}  # stream id -> next number to send

    def handle(self, event: object) -> None:
        conn = self.ep.conn
        if isinstance(event, ev.SetupReceived):
            conn.accept_setup()  # a server decides; here: accept everyone
        elif isinstance(event, ev.RequestResponseReceived):
            conn.send_payload(event.stream_id, event.data, event.metadata, complete=True)
        elif isinstance(event, ev.RequestStreamReceived):
            self.streams[event.stream_id] = 0  # initial_n is already credit in the core
        elif isinstance(event, ev.CancelReceived):
            self.streams.pop(event.stream_id, None)
        # RequestNReceived needs nothing here: the core adds the credit and
        # pump() below sends within it (Reactive Streams rule 1.1).

    def pump(self) -> None:
        """Send stream items only while the peer has granted credit."""
        conn = self.ep.conn
        for sid in list(self.streams):
            i = self.streams[sid]
            while conn.send_credit(sid) > 0 and not conn.output_blocked:
                last = i == STREAM_ITEMS - 1
                conn.send_payload(sid, b"%d" % i, complete=last)
                i += 1
                if last:
                    del self.streams[sid]
                    break
            else:
                self.streams[sid] = i


class Client:
    """Requests a stream with a window of WINDOW and replenishes as it consumes."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.ep = endpoint
        self.items: list[bytes] = []
        self.consumed_since_request = 0
        self.echo: bytes | None = None
        self.stream_done = False
        conn = endpoint.conn
        conn.setup(keepalive_interval=20_000, max_lifetime=90_000)
        # Requests may follow SETUP at once (the spec allows pipelining).
        self.echo_sid = conn.request_response(b"hello from a custom loop")
        self.stream_sid = conn.request_stream(b"count", initial_n=WINDOW)

    def handle(self, event: object) -> None:
        if not isinstance(event, ev.PayloadReceived):
            if isinstance(event, ev.ErrorReceived):
                raise RuntimeError(f"stream failed: {event.message}")
            return
        if event.stream_id == self.echo_sid:
            self.echo = event.data
            return
        if event.next:
            self.items.append(event.data)
            self.consumed_since_request += 1
        if event.complete:
            self.stream_done = True
        elif self.consumed_since_request >= WINDOW // 2:
            # Replenish half a window at a time: fewer REQUEST_N frames, never
            # stalls. receive_data parsed the whole read at once, so the core
            # may already know the stream completed further on in this batch
            # of events: then there is nothing left to ask for.
            if self.ep.conn.stream_state(self.stream_sid) is not None:
                self.ep.conn.request_n(self.stream_sid, self.consumed_since_request)
            self.consumed_since_request = 0

    @property
    def done(self) -> bool:
        return self.stream_done and self.echo is not None


def run_loop(endpoints: list[Endpoint], handlers: dict[str, object], until: object) -> None:
    """The hand-written loop: select, read, handle events, pump, write, timers."""
    deadline_total = time.monotonic() + 30
    while not until():  # type: ignore[operator]
        now = time.monotonic()
        if now > deadline_total:
            raise TimeoutError("example did not finish")
        # 3. time: sleep in select no longer than the earliest core deadline.
        deadlines = [d for e in endpoints if (d := e.conn.next_deadline()) is not None]
        timeout = max(0.0, min(deadlines) - now) if deadlines else 1.0
        readers = [e.sock for e in endpoints if not e.closed]
        writers = [e.sock for e in endpoints if e.out]  # only while bytes wait
        readable, _, _ = select.select(readers, writers, [], min(timeout, 1.0))
        now = time.monotonic()
        for e in endpoints:
            if e.sock in readable:
                e.read(now)  # 1. bytes in
            for event in e.conn.events():
                handlers[e.name].handle(event)  # type: ignore[attr-defined]
            deadline = e.conn.next_deadline()
            if deadline is not None and now >= deadline:
                e.conn.handle_timeout(now)
            pump = getattr(handlers[e.name], "pump", None)
            if pump is not None:
                pump()  # 4. intents: produce within credit
            e.flush()  # 2. bytes out


def main() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    client_sock = socket.create_connection(listener.getsockname())
    server_sock, _ = listener.accept()
    listener.close()

    server_ep = Endpoint(server_sock, Connection(Role.SERVER), "server")
    client_ep = Endpoint(client_sock, Connection(Role.CLIENT), "client")
    server = Server(server_ep)
    client = Client(client_ep)
    endpoints = [server_ep, client_ep]
    run_loop(endpoints, {"server": server, "client": client}, lambda: client.done)

    print(f"request-response echo: {client.echo!r}")
    print(f"stream: {len(client.items)} items, first {client.items[0]!r}, "
          f"last {client.items[-1]!r}")
    assert client.items == [b"%d" % i for i in range(STREAM_ITEMS)]

    # A graceful close: ERROR[CONNECTION_CLOSE] goes out, then the socket.
    client_ep.conn.close("done")
    client_ep.flush()
    for e in endpoints:
        e.sock.close()


if __name__ == "__main__":
    main()
