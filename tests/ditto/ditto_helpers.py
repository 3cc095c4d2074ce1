"""Shared fixtures of the Ditto tests: example files, a hand-driven Publisher."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sansrs.ditto import DittoServer, Envelope, parse_envelope
from sansrs.ditto._envelope import dumps
from sansrs.ditto.events import Event

#: Copies of Ditto's published examples (Eclipse Ditto's docs and serializers), kept in
#: the repository so the suite does not depend on the shared folder.
EXAMPLES = Path(__file__).resolve().parent / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.rglob("*.json"))

DITTO_KEY_ORDER = (
    "topic", "headers", "path", "value", "extra", "status", "revision", "timestamp",
    "metadata", "fields",
)  # fmt: skip


def example(name: str) -> dict[str, Any]:
    path = next(p for p in EXAMPLE_FILES if p.stem == name)
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def ditto_text(name: str) -> str:
    """The example as Ditto writes it: compact, envelope keys in Ditto's order.

    The docs-* files list ``path`` before ``headers`` (hand-written docs);
    Ditto itself writes ``topic, headers, path, value``.
    """
    obj = example(name)
    ordered = {key: obj[key] for key in DITTO_KEY_ORDER if key in obj}
    assert set(ordered) == set(obj), f"unexpected keys in {name}"
    return dumps(ordered)


def decoded(text: str) -> Envelope:
    return parse_envelope(text)


def drain(server: Any) -> list[Event]:
    events: list[Event] = list(server.events())
    return events


class ManualSubscription:
    def __init__(self) -> None:
        self.requests: list[int] = []
        self.cancelled = 0

    def request(self, n: int) -> None:
        self.requests.append(n)

    def cancel(self) -> None:
        self.cancelled += 1


class ManualPublisher:
    """A Publisher the test drives by hand: it records its Subscriber."""

    def __init__(self) -> None:
        self.subscriber: Any = None
        self.subscription = ManualSubscription()
        self.subscribes = 0

    def subscribe(self, subscriber: Any) -> None:
        self.subscribes += 1
        self.subscriber = subscriber
        subscriber.on_subscribe(self.subscription)


def subscribe_text(
    entity: str = "org.eclipse.ditto/thing-2/things/twin",
    value: Any = None,
    headers: dict[str, Any] | None = None,
) -> str:
    obj: dict[str, Any] = {
        "topic": f"{entity}/streaming/subscribeForPersistedEvents",
        "headers": headers or {},
        "path": "/",
    }
    if value is not None:
        obj["value"] = value
    return dumps(obj)


def request_text(
    sid: str,
    demand: Any,
    headers: dict[str, Any] | None = None,
    entity: str = "org.eclipse.ditto/thing-2/things/twin",
) -> str:
    return dumps(
        {
            "topic": f"{entity}/streaming/request",
            "headers": headers or {},
            "path": "/",
            "value": {"subscriptionId": sid, "demand": demand},
        }
    )


def cancel_text(sid: str, headers: dict[str, Any] | None = None) -> str:
    return dumps(
        {
            "topic": "org.eclipse.ditto/thing-2/things/twin/streaming/cancel",
            "headers": headers or {},
            "path": "/",
            "value": {"subscriptionId": sid},
        }
    )


def sent(server: DittoServer) -> list[dict[str, Any]]:
    """The queued messages, parsed (each must be compact JSON)."""
    out = []
    for text in server.messages_to_send():
        text.encode("utf-8")  # must fit a WebSocket text message
        obj = json.loads(text)
        assert dumps(obj) == text, "not in compact form"
        out.append(obj)
    return out
