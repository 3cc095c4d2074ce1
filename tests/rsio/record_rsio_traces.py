"""Record the reactive-streams-io traces in tests/traces/rsio_*.trace.

    .venv/bin/python tests/rsio/record_rsio_traces.py

Each session runs a sansrs rsio client against a sansrs rsio server over TCP
on 127.0.0.1, through ``sansrs.adapters.tools.capture.CaptureProxy``, so the files
hold the bytes exactly as each side's ``recv`` returned them. The server
splits elements above 1024 bytes. test_rsio_traces.py replays them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from sansrs.adapters.rsio import Client, RsioError, connect, serve
from sansrs.adapters.rsio.demo import BlobPublisher, CounterPublisher
from sansrs.adapters.tools.capture import CaptureProxy

from sansrs.rsio import ConnectionConfig

TRACES = Path(__file__).resolve().parent.parent / "traces"
PUBLISHERS = {
    "counter/1000": CounterPublisher(1000),
    "counter": CounterPublisher(),
    "blobs": BlobPublisher(2, 3000),
}
SERVER_CONFIG = ConnectionConfig(split_size=1024)


def counter_packed(client: Client) -> None:
    with client.subscribe_packed("counter/1000", prefetch=256, timeout=10) as batches:
        data = b"".join(batches)
    assert len(data) == 8000


def blobs_split(client: Client) -> None:
    assert [len(b) for b in client.subscribe("blobs", prefetch=2, timeout=10)] == [3000, 3000]


def cancel_and_error(client: Client) -> None:
    with client.subscribe("counter", prefetch=16, timeout=10) as it:
        for _ in range(20):
            next(it)
    try:
        list(client.subscribe("missing", prefetch=4, timeout=10))
    except RsioError:
        pass
    else:
        raise AssertionError("expected onError")


SESSIONS: dict[str, tuple[str, Callable[[Client], None]]] = {
    "rsio_counter_packed": ("subscribe_packed counter/1000, prefetch 256", counter_packed),
    "rsio_blobs_split": ("two 3000-byte elements split into 1024-byte parts", blobs_split),
    "rsio_cancel_error": ("cancel an infinite stream after 20, then onError", cancel_and_error),
}


def main() -> int:
    with serve("tcp://127.0.0.1:0", PUBLISHERS, config=SERVER_CONFIG) as server:
        target = (server.endpoint.host, server.endpoint.port)
        for name, (description, session) in SESSIONS.items():
            meta = {"protocol": "rsio", "framing": "stream", "description": description}
            with CaptureProxy(target, TRACES / f"{name}.trace", metadata=meta) as proxy:
                host, port = proxy.address
                with connect(f"tcp://{host}:{port}") as client:
                    session(client)
                if not proxy.wait_finished(10):
                    raise SystemExit(f"{name}: capture did not finish")
            print(f"wrote {name}.trace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
