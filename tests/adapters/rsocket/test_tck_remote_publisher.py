"""A remote request-stream, consumed as a Publisher, through the Reactive
Streams verification kit (sansrs.tck) against the demo responder over TCP."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from sansrs.adapters.rsocket.client import Client, connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.server import Server, serve
from sansrs.adapters.rsocket.types import Payload
from sansrs.tck import PublisherVerification, TestEnvironment

from sansrs.streams import MAX_DEMAND, Publisher

# Signals cross a real socket: allow more than the in-process runs do.
ENV = TestEnvironment.from_environ(
    default_timeout_ms=1000, default_no_signals_timeout_ms=40, gc_timeout_ms=1000
)


class TestRemoteStreamPublisher(PublisherVerification[Payload]):
    env = ENV
    server: ClassVar[Server]
    client: ClassVar[Client]

    @classmethod
    def setup_class(cls) -> None:
        cls.server = serve("tcp://127.0.0.1:0", handler_factory=DemoHandler)
        cls.client = connect(cls.server.url)

    @classmethod
    def teardown_class(cls) -> None:
        cls.client.close()
        cls.server.close()

    def create_publisher(self, elements: int) -> Publisher[Payload]:
        n = MAX_DEMAND if elements >= MAX_DEMAND else elements
        publisher: Any = self.client.stream_publisher(json.dumps({"n": n, "size": 4}))
        return publisher  # type: ignore[no-any-return]

    def create_failed_publisher(self) -> Publisher[Payload] | None:
        return None  # the error would only travel after the first request(n)
