"""Fixtures of the misbehaving-peer tests: one selector loop for the module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sansrs.adapters.drive import Loop, LoopConfig

WAIT = 10.0


@pytest.fixture(scope="module")
def selector_loop() -> Iterator[Loop]:
    loop = Loop(LoopConfig(close_timeout=0.3), name="peers-test").start()
    yield loop
    loop.stop(WAIT)
