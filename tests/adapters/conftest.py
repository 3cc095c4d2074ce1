"""Fixtures shared by the RSocket adapter tests: the demo responder over TCP
on 127.0.0.1 and a client connected to it (declaring raw metadata: the demo's
contract echoes and counts metadata bytes as they are)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sansrs.adapters.rsocket.client import Client, connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.server import Server, serve


@pytest.fixture
def demo() -> Iterator[Server]:
    with serve("tcp://127.0.0.1:0", handler_factory=DemoHandler) as server:
        yield server


@pytest.fixture
def client(demo: Server) -> Iterator[Client]:
    with connect(demo.url, metadata_mime_type="application/octet-stream") as c:
        yield c
