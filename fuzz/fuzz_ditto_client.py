"""Fuzz target: text messages into two ``sansrs.ditto.DittoClient``s with one
history subscription, one taking the shortcut for ``next`` messages
(``receive_message``), the other only the full path (``_receive``).

Rule: both give the same outcome for every message: the same
``RemoteProtocolError`` (message and status) or none, the same events, the
same messages out, the same state and demand; and ``receive_run`` of all the
messages says what ``receive_message`` says one at a time (its
``ItemsReceived`` taken apart). Nothing else escapes.

Input: byte 0: the demand requested (0: none; 255: the largest); the rest:
UTF-8 text (invalid bytes become lone surrogates), one message per line. A
line starting with ``!`` is a whole message; any other is an item, sent
behind the subscription's ``next`` prefix and followed by ``}}``. A valid
``next`` goes first, so the shortcut is learned. Seeds:
fuzz/corpus/ditto_client/ (regenerate with ``python -m
fuzz.fuzz_ditto_client --make-corpus``).
"""

from __future__ import annotations

import json
from typing import Any

from fuzz._harness import instrumented, main

with instrumented(__name__):
    from sansrs.ditto import DittoClient, DittoClientConfig, Headers, RemoteProtocolError
    from sansrs.ditto._fast import next_prefix
    from sansrs.ditto.events import ItemsReceived, NextReceived

CONFIG = DittoClientConfig(max_message_size=2048, max_subscriptions=4)
TOPIC = "ns/t/things/twin/streaming"
HEADERS = {"content-type": "application/json"}
PREFIX = next_prefix(f"{TOPIC}/next", Headers(HEADERS), "0")
WARM_UP = PREFIX + '{"topic":"ns/t/things/twin/events/modified","revision":1,"value":1}}}'
CREATED = json.dumps(
    {"topic": f"{TOPIC}/created", "headers": HEADERS, "path": "/",
     "value": {"subscriptionId": "0"}},
    separators=(",", ":"),
)


def subscribed(demand: int, config: DittoClientConfig = CONFIG) -> DittoClient:
    """A client with history subscription "0" created, ``demand`` requested (0: none)."""
    client = DittoClient(config)
    client.subscribe_for_persisted_events("ns", "t")
    client.receive_message(CREATED)
    if demand:
        client.request("0", demand)
    client.messages_to_send()
    list(client.events())
    return client


def outcome(client: DittoClient, text: str, full: bool) -> tuple[Any, ...]:
    """What ``text`` did to ``client`` (through the full path alone if ``full``)."""
    try:
        if full:
            client._receive(text)
        else:
            client.receive_message(text)
        error = None
    except RemoteProtocolError as exc:
        error = (exc.message, exc.error_code)
    sub = client._streams.get("0")
    return (error, list(client.events()), client.messages_to_send(), client.state_of("0"),
            None if sub is None else sub.demand)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    demand = 2**63 - 1 if data[0] == 255 else data[0]
    lines = data[1:].decode("utf-8", "surrogateescape").split("\n")[:32]
    texts = [WARM_UP] + [x[1:] if x.startswith("!") else PREFIX + x + "}}" for x in lines]
    fast, full = subscribed(demand), subscribed(demand)
    for text in texts:
        a, b = outcome(fast, text, False), outcome(full, text, True)
        if a != b:
            raise AssertionError(f"shortcut and full path differ on {text!r}: {a!r} != {b!r}")
    # receive_run of all of them says what receive_message says one at a time
    # (up to the first protocol error), its item runs taken apart.
    one, run = subscribed(demand), subscribed(demand)
    expected = got = None
    for text in texts:
        try:
            one.receive_message(text)
        except RemoteProtocolError as exc:
            expected = (exc.message, exc.error_code)
            break
    try:
        run.receive_run(texts)
    except RemoteProtocolError as exc:
        got = (exc.message, exc.error_code)
    flat: list[Any] = []
    for event in run.events():
        if isinstance(event, ItemsReceived):
            flat.extend(NextReceived(key=event.key, subscription_id=event.subscription_id, item=i)
                        for i in event.items)
        else:
            flat.append(event)
    a = (expected, list(one.events()), one.messages_to_send(), one.state_of("0"))
    b = (got, flat, run.messages_to_send(), run.state_of("0"))
    if a != b:
        raise AssertionError(f"receive_run differs: {a!r} != {b!r}")


def seeds() -> list[bytes]:
    item = '{"topic":"ns/t/things/twin/events/modified","path":"/a","revision":2,"value":{"x":1.5}}'
    complete = CREATED.replace("/created", "/complete")
    return [
        b"\x05" + item.encode(),
        b"\x02" + "\n".join([item, item, item]).encode(),
        b"\xff" + "\n".join([item, "NaN", "1e999", " 1", "1 ", '{"a":1}},"x":{"y":1']).encode(),
        b"\x03" + "\n".join([item, "!" + complete, item]).encode(),
        b"\x00" + item.encode(),
        b"\x04" + "\n".join(["!" + PREFIX.replace('"0"', '"1"') + item + "}}", item]).encode(),
    ]


if __name__ == "__main__":
    main(test_one_input, "ditto_client", seeds)
