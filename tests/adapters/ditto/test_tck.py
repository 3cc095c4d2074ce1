"""Ditto history consumed as a Publisher, through the Reactive Streams
verification kit (sansrs.tck), against a sansrs Ditto server over WebSocket."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, ClassVar

from sansrs.adapters.ditto import DittoConnection, DittoHistoryServer, connect, serve
from sansrs.adapters.ditto.history import HistoryRequest
from sansrs.tck import PublisherVerification, TestEnvironment

from sansrs.streams import MAX_DEMAND, Publisher

# Signals cross a real socket: allow more than the in-process runs do.
ENV = TestEnvironment.from_environ(
    default_timeout_ms=1000, default_no_signals_timeout_ms=40, gc_timeout_ms=1000
)


class CountHistory:
    """Thing ``tck:n-<N>`` has N events (``tck:unbounded``: endless), read lazily."""

    def open(self, request: HistoryRequest) -> Iterator[Any]:
        name = request.topic.entity_name
        count = None if name == "unbounded" else int(name.removeprefix("n-"))
        numbers = itertools.count(1) if count is None else range(1, count + 1)
        return ({"topic": f"tck/{name}/things/twin/events/modified", "headers": {}, "path": "/",
                 "value": i, "revision": i} for i in numbers)


class TestDittoHistoryPublisher(PublisherVerification[Any]):
    env = ENV
    server: ClassVar[DittoHistoryServer]
    client: ClassVar[DittoConnection]

    @classmethod
    def setup_class(cls) -> None:
        cls.server = serve("ws://127.0.0.1:0/ws/2", CountHistory())
        cls.client = connect(cls.server.url)

    @classmethod
    def teardown_class(cls) -> None:
        cls.client.close()
        cls.server.close()

    def create_publisher(self, elements: int) -> Publisher[Any]:
        name = "unbounded" if elements >= MAX_DEMAND else f"n-{elements}"
        publisher: Any = self.client.persisted_events_publisher(f"tck:{name}")
        return publisher  # type: ignore[no-any-return]

    def create_failed_publisher(self) -> Publisher[Any] | None:
        # Ditto sends failed only after the first request (its lazify guarantee),
        # so the error reaches a Subscriber that has requested.
        return None
