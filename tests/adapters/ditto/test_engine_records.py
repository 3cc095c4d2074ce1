"""The Ditto engines and the record kinds the WebSocket transport hands them:
text messages as TEXT_LINES records (``WebSocketOptions(text_lines=True)``,
what Ditto connections use) come out exactly as the same messages in a
TEXT_RUN record or in TEXT records one by one, valid or broken (a
differential test); the server engine writes TEXT_LINES."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sansrs.adapters.ditto.engine import (
    DittoClientEngine,
    DittoServerEngine,
    SubscriptionHandle,
    history_request,
)
from sansrs.adapters.ditto.history import InMemoryHistory
from sansrs.adapters.drive.queues import CreditQueue
from sansrs.adapters.transport.websocket import messages as ws

from sansrs.ditto import DittoClientConfig, DittoRemoteError
from tests.adapters.ditto.helpers import NS, counter_history

THING = "lines"
PREFETCH = 16


def _client() -> tuple[DittoClientEngine, CreditQueue[Any], bytes]:
    """A client engine that has subscribed (its subscribe message out)."""
    engine = DittoClientEngine(DittoClientConfig(correlation_ids=lambda: "c-1"))
    queue: CreditQueue[Any] = CreditQueue(granted=PREFETCH)
    engine.subscribe(SubscriptionHandle(history_request(f"{NS}:{THING}"), queue, PREFETCH))
    return engine, queue, engine.data_to_send()


def _texts_of(records: bytes) -> list[bytes]:
    out: list[bytes] = []
    for kind, payload in ws.MessageReader(keep_runs=True).feed(records):
        assert kind == ws.MessageKind.TEXT_LINES  # what the server engine writes
        out += ws.split_lines(payload)
    return out


def _server_messages(events: int) -> list[bytes]:
    """What a server engine answers a client's subscribe and requests with:
    ``created``, the items (within the demand), ``complete``."""
    server = DittoServerEngine(InMemoryHistory(counter_history(THING, events)))
    client, queue, data = _client()
    texts: list[bytes] = []
    while not queue.done:
        server.receive_data(data, 0.0)
        server.pump()
        out = server.data_to_send()
        if not out:
            break
        texts += _texts_of(out)
        client.receive_data(out, 0.0)
        got = len(queue)
        if got:
            queue.get_batch(0, got)
            queue.grant(got)
        data = client.data_to_send()
        if got:
            handle = next(iter(client._by_key.values()), None)
            if handle is not None:
                client.request_more(handle, got)
                data += client.data_to_send()
    return texts


MESSAGES = _server_messages(40)
CREATED, ITEMS, COMPLETE = MESSAGES[0], MESSAGES[1:-1], MESSAGES[-1]
#: Broken messages: not JSON, not an envelope, not UTF-8, a next without
#: its subscription's fields; and a repeated item (not broken for the client).
BROKEN = [b"{", b"[]", b"\xc3(", b'{"topic":"x/y/things/twin/streaming/next"}', ITEMS[0]]
FAILED = CREATED.replace(b"/created", b"/failed").replace(
    b'{"subscriptionId":"0"}', b'{"subscriptionId":"0","error":{"status":500,"error":"x"}}'
)


def _outcome(records: bytes) -> tuple[Any, ...]:
    engine, queue, _ = _client()
    engine.receive_data(ws.encode_record(ws.MessageKind.TEXT, CREATED), 0.0)  # a read of its own
    engine.receive_data(records, 0.0)
    items: list[Any] = []
    error: BaseException | None = None
    while True:
        try:
            items += queue.get_batch(0, PREFETCH)
        except Exception as exc:  # the end: EndOfStream, or why it failed
            error = exc
            break
        if not len(queue) and not queue.done:
            break
    reason = engine.close_reason()
    return (
        items,
        type(error).__name__,
        str(error),
        engine.wants_close(),
        None if reason is None else str(reason),
        engine.data_to_send(),
    )


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_ditto_engine_reads_text_lines_as_runs_and_single_messages(data: st.DataObject) -> None:
    # At most the demand (more would be a broken server, caught alike).
    messages = list(ITEMS[: data.draw(st.integers(0, PREFETCH + 1), label="items")])
    if data.draw(st.booleans(), label="complete"):
        messages.append(COMPLETE)
    for _ in range(data.draw(st.integers(0, 2), label="broken")):
        at = data.draw(st.integers(0, len(messages)), label="at")
        messages.insert(at, data.draw(st.sampled_from(BROKEN), label="which"))
    assume(messages)  # a record holds at least one message
    lines = ws.encode_lines(b"".join(m + b"\xff" for m in messages))
    run = ws.encode_run(b"".join(len(m).to_bytes(3, "big") + m for m in messages), text=True)
    single = b"".join(ws.encode_record(ws.MessageKind.TEXT, m) for m in messages)
    as_lines, as_run, one_by_one = _outcome(lines), _outcome(run), _outcome(single)
    assert as_lines == as_run
    assert as_lines[:5] == one_by_one[:5]  # (one by one, requests may leave in other turns)


def test_ditto_server_engine_writes_text_lines_checked_as_utf8() -> None:
    """Non-ASCII messages travel as UTF-8 lines (not Latin-1)."""
    events = counter_history(THING, 3)
    events[1]["value"] = "caf\u00e9 \U0001f600"
    server = DittoServerEngine(InMemoryHistory(events))
    client, queue, data = _client()
    server.receive_data(data, 0.0)
    server.pump()
    client.receive_data(server.data_to_send(), 0.0)
    server.receive_data(client.data_to_send(), 0.0)
    server.pump()
    out = server.data_to_send()
    texts = _texts_of(out)
    assert any("caf\u00e9 \U0001f600".encode() in t for t in texts)
    client.receive_data(out, 0.0)
    values = [e["value"] for e in queue.get_batch(0, PREFETCH)]
    assert values == [1, "caf\u00e9 \U0001f600", 3]


def test_ditto_created_then_failed_in_one_read_ends_the_subscription() -> None:
    """Ditto may fail a subscription before the client's first request
    reaches it: ``created`` and ``failed`` in one read end the subscription
    with the error (the demand due at ``created`` is not asked of a
    subscription that has ended)."""
    engine, queue, _ = _client()
    engine.receive_data(ws.encode_lines(CREATED + b"\xff" + FAILED + b"\xff"), 0.0)
    assert queue.done
    with pytest.raises(DittoRemoteError) as failed:
        queue.get_batch(0, PREFETCH)
    assert failed.value.status == 500
    assert engine.data_to_send() == b""  # no request for it
    assert not engine.wants_close()


def test_connect_gives_each_subscribe_its_own_correlation_id() -> None:
    """``client_config``'s correlation-ids (one UUID a connection, then a
    counter) differ within a connection and between connections."""
    import uuid

    from sansrs.adapters.ditto.client import client_config

    first, second = client_config(None), client_config(None)
    assert first.correlation_ids is not None and second.correlation_ids is not None
    ids = [first.correlation_ids() for _ in range(3)] + [second.correlation_ids()]
    assert len(set(ids)) == 4
    head, _, n = ids[1].rpartition("-")
    assert uuid.UUID(head).version == 4 and n == "1"


def test_ditto_failed_after_complete_is_routine_and_other_strays_are_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A request that crosses Ditto's ``complete`` is answered ``failed`` for
    a subscription the client has ended: logged at DEBUG, not as a warning
    (it happens in normal reads). A stray message of any other kind (an item
    for no subscription) is still a warning."""
    engine, queue, _ = _client()
    engine.receive_data(ws.encode_lines(CREATED + b"\xff" + COMPLETE + b"\xff"), 0.0)
    assert queue.done
    with caplog.at_level("DEBUG", logger="sansrs.adapters.ditto"):
        engine.receive_data(ws.encode_lines(FAILED + b"\xff"), 0.0)
        engine.receive_data(ws.encode_lines(ITEMS[0] + b"\xff"), 0.0)
    strays = [r for r in caplog.records if "for no subscription" in r.getMessage()]
    assert [(r.levelname, r.getMessage().rsplit("/", 1)[-1]) for r in strays] == [
        ("DEBUG", "failed"),
        ("WARNING", "next"),
    ]
    assert not engine.wants_close()
