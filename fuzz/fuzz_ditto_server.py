"""Fuzz target: arbitrary text messages into a ``sansrs.ditto.DittoServer`` whose
application accepts, rejects or delays every subscription.

Rule: nothing at all escapes ``receive_message`` / ``handle_timeout`` (the
server answers bad input with Ditto's error response, never an exception);
every outgoing message is compact JSON with ``topic``, ``headers`` and
``path`` that encodes as UTF-8; ``created`` IDs are unique; per subscription ID
no more ``next`` than the positive demand the input requested for it;
``complete`` only after a request for that ID, and ``failed`` only after a
request or cancel for it unless it is the idle timeout (408).

Input: byte 0: seconds the clock advances per message (0-255, so idle and
zombie timeouts fire); the rest: UTF-8 text (invalid bytes become lone
surrogates), one message per line. Seeds: fuzz/corpus/ditto_server/ (the
examples in tests/ditto/examples as conversations; regenerate with
``python fuzz/fuzz_ditto_server.py --make-corpus``).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

from fuzz._harness import instrumented, run

with instrumented(__name__):
    from sansrs.ditto import DittoError, DittoException, DittoServer, DittoServerConfig, Kind
    from sansrs.ditto.events import SubscribeReceived
    from sansrs.streams import error_publisher, from_iterable, range_publisher

CONFIG = DittoServerConfig(max_message_size=4096, max_subscriptions=4, max_zombies=4)
MAX_LONG = 2**63 - 1


def _react(server: DittoServer, delayed: list[tuple[str, Kind]], counter: list[int]) -> None:
    for event in server.events():
        if not isinstance(event, SubscribeReceived):
            continue
        sid, kind = event.subscription_id, event.kind
        choice = counter[0] % 5
        counter[0] += 1
        if choice == 0:
            server.accept(sid, from_iterable([{"n": 1}, {"n": 2}, [3]]), kind=kind)
        elif choice == 1:
            server.accept(sid, range_publisher(0), kind=kind)  # infinite
        elif choice == 2:
            server.reject(sid, DittoError(status=404, error="things:thing.notfound", message="x"),
                          kind=kind)
        elif choice == 3:
            error = DittoException(DittoError(status=503, error="e", message="m"))
            server.accept(sid, error_publisher(error), kind=kind)
        else:
            delayed.append((sid, kind))  # decided with the next message


def _kind_of(topic: str) -> str:
    """The kind of a subscription's topic: Ditto numbers the two kinds apart."""
    return "search" if "/search/" in topic else "streaming"


def _command(text: str) -> tuple[str, tuple[str, str], int] | None:
    """(action, (kind, subscription ID), demand) of a request/cancel, as leniently as possible."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("topic"), str):
        return None
    action = obj["topic"].rsplit("/", 1)[-1]
    value = obj.get("value")
    if action not in ("request", "cancel") or not isinstance(value, dict):
        return None
    sid = value.get("subscriptionId")
    demand = value.get("demand")
    if not isinstance(sid, str):
        return None
    return action, (_kind_of(obj["topic"]), sid), demand if type(demand) is int else 0


def test_one_input(data: bytes) -> None:
    if not data:
        return
    step = float(data[0])
    texts = data[1:].decode("utf-8", "surrogateescape").split("\n")[:32]
    server = DittoServer(CONFIG)
    delayed: list[tuple[str, Kind]] = []
    counter = [0]
    demand: Counter[tuple[str, str]] = Counter()
    touched: set[tuple[str, str]] = set()
    requested: set[tuple[str, str]] = set()
    nexts: Counter[tuple[str, str]] = Counter()
    created: set[tuple[str, str]] = set()
    now = 0.0
    for text in texts:
        now += step
        command = _command(text)
        if command is not None:
            action, sid, n = command
            touched.add(sid)
            if action == "request":
                requested.add(sid)
                if 0 < n <= MAX_LONG:
                    demand[sid] = min(demand[sid] + n, MAX_LONG)
        server.receive_message(text, now=now)
        for sid, kind in delayed:
            server.accept(sid, from_iterable(["late"]), kind=kind)
        delayed.clear()
        _react(server, delayed, counter)
        server.handle_timeout(now)
        for message in server.messages_to_send():
            _check(message, created, nexts, demand, requested, touched)


def _check(
    message: str,
    created: set[tuple[str, str]],
    nexts: Counter[tuple[str, str]],
    demand: Counter[tuple[str, str]],
    requested: set[tuple[str, str]],
    touched: set[tuple[str, str]],
) -> None:
    message.encode("utf-8")
    obj: Any = json.loads(message)
    # ensure_ascii=True is the form of a message that carries lone surrogates
    forms = {json.dumps(obj, separators=(",", ":"), ensure_ascii=a) for a in (False, True)}
    if message not in forms:
        raise AssertionError(f"not compact: {message!r}")
    if not (isinstance(obj, dict) and list(obj)[:3] == ["topic", "headers", "path"]):
        raise AssertionError(f"not a Ditto envelope: {message!r}")
    action = obj["topic"].rsplit("/", 1)[-1]
    value = obj.get("value")
    sid = (_kind_of(obj["topic"]), value.get("subscriptionId") if isinstance(value, dict) else None)
    if action == "created":
        if sid in created:
            raise AssertionError(f"created twice: {sid!r}")
        created.add(sid)
    elif action == "next":
        nexts[sid] += 1
        if nexts[sid] > demand[sid]:
            raise AssertionError(f"next beyond demand for {sid!r}")
    elif action == "complete" and sid not in requested:
        raise AssertionError(f"complete before any request for {sid!r}")
    elif action == "failed" and value["error"]["status"] != 408 and sid not in touched:
        raise AssertionError(f"failed before any request for {sid!r}: {message!r}")


def make_corpus() -> None:
    """Write the seeds: every example alone, and the streaming/search conversations."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parent
    examples = root.parent / "tests" / "ditto" / "examples"
    folder = root / "corpus" / "ditto_server"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()

    def compact(name: str) -> bytes:
        path = next(examples.rglob(f"{name}.json"))
        text = json.dumps(json.loads(path.read_text(encoding="utf-8")), separators=(",", ":"))
        return text.encode("utf-8")

    seeds = [b"\x01" + compact(p.stem) for p in sorted(examples.rglob("*.json"))]
    conversations = [
        ("docs-01-subscribeForPersistedEvents", "docs-03-request", "code-cancel"),
        ("code-subscribe-timestamps", "code-request", "code-request", "code-cancel"),
        ("code-subscribe-policy", "code-cancel", "code-request"),
        ("create-subscription-command", "request-subscription-command"),
    ]
    for step, names in zip((1, 0, 7, 30), conversations, strict=True):
        seeds.append(bytes([step]) + b"\n".join(compact(n) for n in names))
    seeds.append(b"\x3d" + compact("code-subscribe-timestamps") + b"\n{\n")  # idle timeout
    for seed in seeds:
        (folder / hashlib.sha1(seed).hexdigest()[:16]).write_bytes(seed)


if __name__ == "__main__":
    if sys.argv[1:] == ["--make-corpus"]:
        make_corpus()
    else:
        run(test_one_input)
