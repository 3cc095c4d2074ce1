"""What the direct-call tests share (test_direct_calls, test_latency_path):
the client's driver and a settled reactor (the ``loop_kind`` fixture: conftest)."""

from __future__ import annotations

import threading
from typing import Any

from sansrs.adapters.drive import LoopConnection

WAIT = 10.0


def driver_of(client: Any) -> LoopConnection:
    """The :class:`LoopConnection` under a client, whatever its driver."""
    thread = client._thread
    return thread if isinstance(thread, LoopConnection) else thread._conn


def settle(driver: LoopConnection) -> None:
    """Let the reactor finish what it has queued: a call run twice on its
    thread (the turns it owes run between the first and the second)."""
    for _ in range(2):
        done = threading.Event()
        driver.loop.call_soon(done.set)
        assert done.wait(WAIT)
