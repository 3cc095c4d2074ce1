"""A resumable client/server pair wired through an in-memory "transport"
that can be cut at any byte offset, then resumed on a new one.

Import as ``from resume_pair import ResumePair`` from a test in
``tests/rsocket/``. Bytes written by one end sit on ``wire`` until
``pump()`` delivers them (in chunks of ``chunk`` bytes); ``cut(a, b)``
delivers only the first ``a`` / ``b`` bytes in flight each way, loses the
rest, and tells both ends the transport ended; ``resume()`` opens a "new
transport": the client's RESUME reaches a fresh server connection, which
hands over to the stored session.
"""

from __future__ import annotations

from sansrs.rsocket import Connection, ConnectionConfig, Role, SessionStore
from sansrs.rsocket.events import Event, ResumeAccepted, SetupReceived


class ResumePair:
    def __init__(
        self,
        client_config: ConnectionConfig | None = None,
        server_config: ConnectionConfig | None = None,
        store: SessionStore | None = None,
        *,
        lease: tuple[int, int] | None = None,
        chunk: int = 1 << 30,
    ) -> None:
        self.store = store if store is not None else SessionStore(keep_detached=30.0)
        self.server_config = server_config
        self.client = Connection(Role.CLIENT, client_config)
        self.server = Connection(Role.SERVER, server_config, sessions=self.store)
        self.chunk = chunk
        self.now = 0.0
        self.to_server = bytearray()
        self.to_client = bytearray()
        self.client_events: list[Event] = []
        self.server_events: list[Event] = []
        self.client.setup(lease=lease is not None, resume=True)
        self.pump()
        assert isinstance(self.server_events[0], SetupReceived)
        if lease is None:
            self.server.accept_setup()
        else:
            self.server.accept_setup(lease_ttl=lease[0], lease_number=lease[1])
        self.pump()
        self.take()

    def _collect(self) -> None:
        self.to_server += self.client.data_to_send()
        self.to_client += self.server.data_to_send()

    def _deliver(self, wire: bytearray, dst: Connection, n: int) -> None:
        data = bytes(wire[:n])
        del wire[:]
        for i in range(0, len(data), self.chunk):
            dst.receive_data(data[i : i + self.chunk], self.now)

    def pump(self, limit: int = 10_000) -> None:
        for _ in range(limit):
            self._collect()
            if not self.to_server and not self.to_client:
                self.client_events += self.client.events()
                self.server_events += self.server.events()
                return
            self._deliver(self.to_server, self.server, len(self.to_server))
            self._deliver(self.to_client, self.client, len(self.to_client))
            self.client_events += self.client.events()
            self.server_events += self.server.events()
        raise AssertionError("the pair never went quiet")

    def in_flight(self) -> tuple[int, int]:
        """Bytes written but not delivered (client to server, server to client)."""
        self._collect()
        return len(self.to_server), len(self.to_client)

    def cut(self, to_server: int, to_client: int) -> None:
        """The transport dies after delivering this many in-flight bytes each way."""
        self._collect()
        self._deliver(self.to_server, self.server, to_server)
        self._deliver(self.to_client, self.client, to_client)
        self.client.connection_lost()
        self.server.connection_lost()
        self.client_events += self.client.events()
        self.server_events += self.server.events()

    def resume(self, *, pump: bool = True) -> list[Event]:
        """A new transport: RESUME to a fresh server connection; returns the
        fresh connection's events (``ResumeAccepted`` or a rejection). With
        ``pump=False`` the server's answer stays in flight (see ``cut``)."""
        self.client.resume()
        fresh = Connection(Role.SERVER, self.server_config, sessions=self.store)
        fresh.receive_data(self.client.data_to_send(), self.now)
        events = fresh.events()
        accepted = [e for e in events if isinstance(e, ResumeAccepted)]
        if accepted:
            self.server = accepted[0].session
        else:
            self.client.receive_data(fresh.data_to_send(), self.now)
            self.client_events += self.client.events()
        if pump:
            self.pump()
        return events

    def take(self) -> tuple[list[Event], list[Event]]:
        out = (self.client_events, self.server_events)
        self.client_events = []
        self.server_events = []
        return out
