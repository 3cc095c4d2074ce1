"""Two rsio ``Connection``s back to back in memory, for tests in tests/rsio/.

``pump()`` moves every queued byte both ways, cut by ``chunker``, until both
are quiet, and collects each side's events (``client_events`` /
``server_events``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sansrs.rsio import Connection, ConnectionConfig, Role
from sansrs.rsio.events import Event

Chunker = Callable[[bytes], list[bytes]]


def whole(data: bytes) -> list[bytes]:
    return [data]


class Pair:
    def __init__(
        self,
        client_config: ConnectionConfig | None = None,
        server_config: ConnectionConfig | None = None,
        chunker: Chunker = whole,
    ) -> None:
        self.client = Connection(Role.CLIENT, client_config)
        self.server = Connection(Role.SERVER, server_config)
        self.chunker = chunker
        self.client_events: list[Event] = []
        self.server_events: list[Event] = []
        self.wire: list[tuple[str, bytes]] = []  # (direction, bytes) as sent

    def pump(self) -> None:
        for _ in range(1000):
            moved = False
            for src, dst, name in (
                (self.client, self.server, "c2s"),
                (self.server, self.client, "s2c"),
            ):
                data = src.data_to_send()
                if data:
                    moved = True
                    self.wire.append((name, data))
                    for chunk in self.chunker(data):
                        dst.receive_data(chunk)
            self.client_events += self.client.events()
            self.server_events += self.server.events()
            if not moved:
                return
        raise AssertionError("pump did not settle")

    def take(self) -> tuple[list[Event], list[Event]]:
        c, s = self.client_events, self.server_events
        self.client_events, self.server_events = [], []
        return c, s

    def subscribed(
        self, name: str = "p", demand: int = 0, element_size: int = 0
    ) -> int:
        """Client subscribes to ``name`` on the server, which answers onSubscribe."""
        sid = self.client.subscribe(name, demand)
        self.pump()
        self.server.send_on_subscribe(sid, element_size)
        self.pump()
        self.take()
        return sid


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]
