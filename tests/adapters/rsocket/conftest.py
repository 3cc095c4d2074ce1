"""Fixtures shared by the RSocket adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sansrs.adapters.drive.selector import Loop


@pytest.fixture
def loops() -> Iterator[tuple[Loop, Loop]]:
    """A selector loop for the server and one for the client (the
    resumption tests run both ends on selector loops of their own)."""
    server_loop, client_loop = Loop(name="test-server").start(), Loop(name="test-client").start()
    yield server_loop, client_loop
    client_loop.stop(5.0)
    server_loop.stop(5.0)
