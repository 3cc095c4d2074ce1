"""Bytecode per routed request and per Ditto event, in one thread, no sockets.

What a module split must leave unchanged (its calls stay the calls they
were): the bytecode instructions (``sys.settrace`` with
``f_trace_opcodes``, load-independent) that

- ``--routed``: a :class:`~sansrs.adapters.rsocket.routing.RouterConnection`
  runs per request it routes (request-response and stream to a template
  route, fire-and-forget routed and unrouted, a run of fire-and-forgets to a
  ``many=True`` route, per request, a channel's window), the SETUP's
  connection made beforehand;
- ``--ditto``: the Ditto client runs per history event: the core alone
  (``DittoClient.receive_message`` and ``receive_run``, per event) and the
  client engine (``DittoClientEngine.receive_data`` of the server engine's
  records, its sink's ``put_many`` included), the server engine per event
  (``pump`` and ``data_to_send``), back to back.

    .venv/bin/python benchmarks/bench_dispatch_opcodes.py --routed --ditto
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any


class Counter:
    """Bytecode instructions executed while ``on`` (this thread)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            self.count += 1
        return self

    def measure(self, fn: Callable[[], object], times: int) -> float:
        fn()  # warm: first-call caches, lazy imports
        self.count = 0
        sys.settrace(self)
        try:
            for _ in range(times):
                fn()
        finally:
            sys.settrace(None)
        return self.count / times


def routed(times: int) -> dict[str, float]:
    from sansrs.adapters.rsocket import Request, Router

    from sansrs.rsocket.extensions import COMPOSITE_METADATA, compose

    class Setup:
        metadata_mime_type = COMPOSITE_METADATA
        data_mime_type = "application/json"
        metadata = b""
        data = b""

    class Fallback:
        def fire_and_forget(self, request: Request) -> None:
            pass

    router = Router(fallback=Fallback())
    router.response("users.{id}.get")(lambda request: b"ok")
    router.stream("ticks")(lambda request: [b"a"])
    router.fnf("log")(lambda request: None)
    router.fnf("logs", many=True)(lambda requests: None)
    router.channel("chat", prefetch=8)(lambda request, inbound: [])
    conn: Any = router.accept_setup(Setup(), None)
    user = Request(b"x", compose(route="users.42.get"), None)
    ticks = Request(b"x", compose(route="ticks"), None)
    log = Request(b"x", compose(route="log"), None)
    bare = Request(b"x", None, None)
    logs = [Request(b"x", compose(route="logs"), None)] * 16
    chat = compose(route="chat")
    count = Counter().measure
    return {
        "request_response (template route)": count(lambda: conn.request_response(user), times),
        "request_stream": count(lambda: conn.request_stream(ticks), times),
        "fire_and_forget (routed)": count(lambda: conn.fire_and_forget(log), times),
        "fire_and_forget (no metadata)": count(lambda: conn.fire_and_forget(bare), times),
        "fire_and_forget_many (per request of 16)": count(
            lambda: conn.fire_and_forget_many(logs), times
        ) / len(logs),
        "channel_window": count(lambda: conn.channel_window(chat), times),
    }


def ditto(events: int) -> dict[str, float]:
    from sansrs.adapters.ditto.engine import (
        DittoClientEngine,
        DittoServerEngine,
        SubscriptionHandle,
        history_request,
    )
    from sansrs.adapters.ditto.history import HistoryRequest, select_events
    from sansrs.adapters.drive.queues import CreditQueue

    from sansrs.ditto import DittoClient, DittoServer
    from sansrs.ditto import events as ev
    from sansrs.streams import from_iterable

    def history(n: int) -> list[dict[str, Any]]:
        topic = "bench/thing/things/twin/events/modified"
        return [{"topic": topic, "path": "/attributes", "revision": r, "value": {"n": r}}
                for r in range(1, n + 1)]

    # The core: the server's messages of ``events`` events, then the client's
    # work on them, one message at a time and as runs.
    def core_texts() -> tuple[DittoClient, list[str], str]:
        server, client = DittoServer(), DittoClient()
        client.subscribe_for_persisted_events("bench", "thing")
        for text in client.messages_to_send():
            server.receive_message(text, now=0.0)
        sid = next(e for e in server.events() if isinstance(e, ev.SubscribeReceived))
        server.accept(sid.subscription_id, from_iterable(history(events)))
        created = server.messages_to_send()
        for text in created:
            client.receive_message(text)
        csid = next(e for e in client.events() if isinstance(e, ev.SubscriptionCreated))
        client.request(csid.subscription_id, events + 1)
        for text in client.messages_to_send():
            server.receive_message(text, now=0.0)
        return client, server.messages_to_send()[:events], csid.subscription_id

    counter = Counter()
    result = {}
    client, texts, _ = core_texts()
    warm, rest = texts[:64], texts[64:]
    for text in warm:
        client.receive_message(text)
    counter.count = 0
    sys.settrace(counter)
    for text in rest:
        client.receive_message(text)
    sys.settrace(None)
    result["core receive_message (per event)"] = counter.count / len(rest)
    client, texts, _ = core_texts()
    client.receive_run(texts[:64])
    counter.count = 0
    sys.settrace(counter)
    for i in range(64, len(texts), 256):
        client.receive_run(texts[i : i + 256])
    sys.settrace(None)
    result["core receive_run of 256 (per event)"] = counter.count / (len(texts) - 64)

    class Source:
        def open(self, request: HistoryRequest) -> Any:
            return select_events(history(events), request.options, request.entity_id, events)

    server_engine = DittoServerEngine(Source())
    client_engine = DittoClientEngine()
    queue: CreditQueue[Any] = CreditQueue(granted=events + 1)
    handle = SubscriptionHandle(history_request("bench:thing"), queue, events + 1)
    client_engine.subscribe(handle)
    server_engine.receive_data(client_engine.data_to_send(), 0.0)  # subscribe
    server_engine.pump()
    client_engine.receive_data(server_engine.data_to_send(), 0.0)  # created
    server_engine.receive_data(client_engine.data_to_send(), 0.0)  # request
    server_side = client_side = 0
    while not queue.done:
        counter.count = 0
        sys.settrace(counter)
        server_engine.pump()
        data = server_engine.data_to_send()
        sys.settrace(None)
        server_side += counter.count
        if not data:
            break
        counter.count = 0
        sys.settrace(counter)
        client_engine.receive_data(data, 0.0)
        sys.settrace(None)
        client_side += counter.count
    assert len(queue) == events, len(queue)
    result["client engine receive_data (per event)"] = client_side / events
    result["server engine pump + data_to_send (per event)"] = server_side / events
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routed", action="store_true", help="per routed request")
    parser.add_argument("--ditto", action="store_true", help="per Ditto history event")
    parser.add_argument("--count", type=int, default=2000, help="requests / events counted")
    args = parser.parse_args()
    rows: dict[str, float] = {}
    if args.routed or not args.ditto:
        rows.update(routed(args.count))
    if args.ditto or not args.routed:
        rows.update(ditto(args.count))
    print("| path | bytecode |\n| --- | ---: |")
    for name, value in rows.items():
        print(f"| {name} | {value:.1f} |")


if __name__ == "__main__":
    main()
