"""What the direct-call tests share (test_direct_calls, test_latency_path): the
client's driver, who reads its socket, and a settled reactor (``loop_kind``: conftest)."""

from __future__ import annotations

import threading
from typing import Any

from sansrs.adapters.drive import LoopConnection

WAIT = 10.0


def driver_of(client: Any) -> LoopConnection:
    """The :class:`LoopConnection` under a client, whatever its driver."""
    thread = client._thread
    return thread if isinstance(thread, LoopConnection) else thread._conn


def reads_by_thread(monkeypatch: Any, client: Any) -> list[int]:
    """Record which thread reads ``client``'s socket each time it is read
    (the reactor, or a thread in a direct call, in whichever path)."""
    readers: list[int] = []
    transport = driver_of(client).transport
    original = transport.recv

    def recv(max_bytes: int) -> bytes:
        readers.append(threading.get_ident())
        return original(max_bytes)

    monkeypatch.setattr(transport, "recv", recv)
    return readers


def settle(driver: LoopConnection) -> None:
    """Let the reactor finish what it has queued: a call run twice on its
    thread (the turns it owes run between the first and the second)."""
    for _ in range(2):
        done = threading.Event()
        driver.loop.call_soon(done.set)
        assert done.wait(WAIT)
