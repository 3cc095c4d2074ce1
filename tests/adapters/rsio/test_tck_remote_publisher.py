"""A remote rsio publisher, consumed as a Reactive Streams Publisher, through
the verification kit (sansrs.tck) against the demo counter over TCP."""

from __future__ import annotations

from typing import Any, ClassVar

from sansrs.adapters.rsio import Client, Server, connect, serve
from sansrs.adapters.rsio.demo import demo_publishers
from sansrs.tck import PublisherVerification, TestEnvironment

from sansrs.streams import MAX_DEMAND, Publisher

# Signals cross a real socket: allow more than the in-process runs do.
ENV = TestEnvironment.from_environ(
    default_timeout_ms=1000, default_no_signals_timeout_ms=40, gc_timeout_ms=1000
)


class TestRsioRemotePublisher(PublisherVerification[bytes]):
    env = ENV
    server: ClassVar[Server]
    client: ClassVar[Client]

    @classmethod
    def setup_class(cls) -> None:
        cls.server = serve("tcp://127.0.0.1:0", demo_publishers)
        cls.client = connect(cls.server.url)

    @classmethod
    def teardown_class(cls) -> None:
        cls.client.close()
        cls.server.close()

    def create_publisher(self, elements: int) -> Publisher[bytes]:
        name = "counter" if elements >= MAX_DEMAND else f"counter/{elements}"
        publisher: Any = self.client.publisher(name)
        return publisher  # type: ignore[no-any-return]

    def create_failed_publisher(self) -> Publisher[bytes] | None:
        return None  # the error would only travel after the first request(n)
