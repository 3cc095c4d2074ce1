"""Fixtures of the driver tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sansrs.adapters.drive import Loop

WAIT = 10.0


@pytest.fixture(params=["thread", "selector"])
def loop_kind(request: pytest.FixtureRequest) -> Iterator[str | Loop]:
    """``connect(..., loop=loop_kind)``: the drivers that allow direct calls,
    a thread per connection and a selector loop of the test's own."""
    if request.param == "thread":
        yield "thread"
        return
    loop = Loop(name="direct-test").start()
    yield loop
    loop.stop(WAIT)
