"""Shared pieces of the Ditto adapter tests: history fixtures, a recording
Subscriber, and a back-to-back link (client and server engines, each on its own
driver thread, joined by a loopback TCP pair that carries message records)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sansrs.adapters.ditto import DittoConnection
from sansrs.adapters.ditto.engine import DittoClientEngine, DittoServerEngine
from sansrs.adapters.ditto.history import HistorySource, InMemoryHistory
from sansrs.adapters.drive import ConnectionThread
from sansrs.adapters.transport.tcp import TcpTransport

from sansrs.ditto import DittoClientConfig, DittoServerConfig

WAIT = 10.0
ROOT = Path(__file__).resolve().parents[3]
EXAMPLE_HISTORY = ROOT / "examples" / "ditto_history.jsonl"
NS = "org.eclipse.ditto"


def example_events() -> list[dict[str, Any]]:
    lines = EXAMPLE_HISTORY.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip() and not line.startswith("#")]


def events_of(thing: str) -> list[dict[str, Any]]:
    return [e for e in example_events() if e["topic"].startswith(f"{NS}/{thing}/things/")]


def counter_history(thing: str, n: int) -> list[dict[str, Any]]:
    """``n`` events of ``<NS>:<thing>``, revisions 1..n."""
    return [
        {
            "topic": f"{NS}/{thing}/things/twin/events/modified",
            "headers": {},
            "path": "/attributes/counter",
            "value": i,
            "revision": i,
            "timestamp": f"2023-01-01T00:00:{i % 60:02d}Z",
        }
        for i in range(1, n + 1)
    ]


class RecordTransport(TcpTransport):
    """One end of a socketpair speaking message records (as the WebSocket
    transport does): lets the engines run back to back without WebSocket."""

    message_framed = True


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        a = socket.create_connection(listener.getsockname())
        b, _ = listener.accept()
    return a, b


@dataclass
class Link:
    client: DittoConnection
    client_engine: DittoClientEngine
    client_thread: ConnectionThread
    server: DittoServerEngine
    server_thread: ConnectionThread


@contextmanager
def back_to_back(
    source: HistorySource,
    *,
    server_config: DittoServerConfig | None = None,
    client_config: DittoClientConfig | None = None,
) -> Iterator[Link]:
    a, b = tcp_pair()
    server_engine = DittoServerEngine(source, server_config)
    server_thread = ConnectionThread(RecordTransport(b), server_engine, name="ditto-b2b-server")
    server_engine.attach(server_thread)
    client_engine = DittoClientEngine(client_config)
    client_thread = ConnectionThread(RecordTransport(a), client_engine, name="ditto-b2b-client")
    server_thread.start()
    client_thread.start()
    connection = DittoConnection(client_thread, client_engine)
    try:
        yield Link(connection, client_engine, client_thread, server_engine, server_thread)
    finally:
        connection.close()
        server_thread.close()


def call_on(thread: ConnectionThread, fn: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Run ``fn`` on the connection's owning thread and return its result: the
    only safe way to read an engine's state from a test."""
    done = threading.Event()
    box: list[Any] = []
    thread.call_soon(lambda: (box.append(fn()), done.set()))
    assert done.wait(timeout), "the connection thread did not run the call"
    return box[0]


class Recorder:
    """A Subscriber that records every signal and lets the test drive demand."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.error: BaseException | None = None
        self.completed = False
        self.subscription: Any = None
        self.subscribed = threading.Event()
        self.done = threading.Event()
        self.threads: set[str] = set()
        self._cond = threading.Condition()

    def on_subscribe(self, subscription: Any) -> None:
        self.threads.add(threading.current_thread().name)
        self.subscription = subscription
        self.subscribed.set()

    def on_next(self, item: Any) -> None:
        self.threads.add(threading.current_thread().name)
        with self._cond:
            self.items.append(item)
            self._cond.notify_all()

    def on_error(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def on_complete(self) -> None:
        self.completed = True
        self.done.set()

    def wait_items(self, n: int, timeout: float = WAIT) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.items) >= n, timeout), self.items


def default_source() -> InMemoryHistory:
    return InMemoryHistory(example_events())
