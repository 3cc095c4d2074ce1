"""A client and a server ``Connection`` wired back to back in memory.

Import as ``from pair import Pair`` from a test in ``tests/rsocket/``.
``pump()`` moves every queued byte between the two, cut by ``chunker``
(default: whole), until both are quiet, and collects their events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sansrs.rsocket import Connection, ConnectionConfig, Framing, Role
from sansrs.rsocket.events import Event, SetupReceived

Chunker = Callable[[bytes], list[bytes]]


def whole(data: bytes) -> list[bytes]:
    return [data]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def sized(n: int) -> Chunker:
    def cut(data: bytes) -> list[bytes]:
        return [data[i : i + n] for i in range(0, len(data), n)]

    return cut


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

    @classmethod
    def established(
        cls,
        client_config: ConnectionConfig | None = None,
        server_config: ConnectionConfig | None = None,
        chunker: Chunker = whole,
        lease: tuple[int, int] | None = None,
        **setup: Any,
    ) -> Pair:
        """SETUP sent and accepted (with a first LEASE when ``lease`` is given)."""
        pair = cls(client_config, server_config, chunker)
        pair.client.setup(lease=lease is not None, **setup)
        pair.pump()
        assert isinstance(pair.server_events[0], SetupReceived)
        if lease is None:
            pair.server.accept_setup()
        else:
            pair.server.accept_setup(lease_ttl=lease[0], lease_number=lease[1])
        pair.pump()
        pair.take()
        return pair

    def _move(self, src: Connection, dst: Connection) -> bool:
        if src.config.framing is Framing.MESSAGES:
            frames = src.frames_to_send()
            for frame in frames:
                dst.receive_frame(frame)
            return bool(frames)
        data = src.data_to_send()
        if not data:
            return False
        for chunk in self.chunker(data):
            if chunk:  # b"" would mean "the transport ended"
                dst.receive_data(chunk)
        return True

    def pump(self, limit: int = 1000) -> None:
        for _ in range(limit):
            moved = self._move(self.client, self.server)
            moved |= self._move(self.server, self.client)
            self.client_events += self.client.events()
            self.server_events += self.server.events()
            if not moved:
                return
        raise AssertionError("the pair never went quiet")

    def take(self) -> tuple[list[Event], list[Event]]:
        """The events collected so far (client's, server's), then forget them."""
        out = (self.client_events, self.server_events)
        self.client_events = []
        self.server_events = []
        return out
