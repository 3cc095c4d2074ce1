"""Token refresh on the open socket, driven through the engine's timers with
an injected clock (no sleeps), and the backoff of reconnects with injected
randomness: the pure parts of docs/protocols/ditto.md, "Reconnect, resume,
follow"."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from sansrs.adapters.ditto.engine import DittoClientEngine, SubscriptionHandle, history_request
from sansrs.adapters.ditto.resume import (
    Backoff,
    ReconnectFailed,
    ReconnectPolicy,
    resumed_query,
    revision_of,
)
from sansrs.adapters.ditto.tokens import (
    Deliver,
    TokenPolicy,
    TokenRefresher,
    jwt_expiry,
    jwt_token_message,
)
from sansrs.adapters.drive.queues import CreditQueue
from sansrs.adapters.transport.websocket import messages as ws

from sansrs.ditto import DittoClientConfig

WALL = 1_700_000_000.0  # the wall clock's "now" in these tests


def jwt(exp: Any) -> str:
    def part(obj: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'exp': exp, 'sub': 'u'})}.sig"


def texts_of(records: bytes) -> list[str]:
    out: list[str] = []
    for _kind, payload in ws.MessageReader(keep_runs=True).feed(records):
        out += [p.decode() for p in ws.split_lines(payload)]
    return out


class Provider:
    """Hands out JWTs that live ``life`` seconds from the wall clock, at once
    (a synchronous fetch: the engine's deliver runs inside handle_timeout)."""

    def __init__(self, life: float) -> None:
        self.life = life
        self.wall = WALL
        self.calls = 0

    def fetch(self, deliver: Deliver) -> None:
        self.calls += 1
        deliver(jwt(self.wall + self.life))


def _engine(provider: Provider, first: str, policy: TokenPolicy | None = None
            ) -> DittoClientEngine:
    engine = DittoClientEngine()
    engine.tokens = TokenRefresher(first, 0.0, provider.fetch, policy=policy,
                                   wall=lambda: provider.wall)
    return engine


def test_ditto_token_jwt_expiry_reads_the_exp_claim_unverified() -> None:
    assert jwt_expiry(jwt(WALL + 5)) == WALL + 5
    assert jwt_expiry(jwt(12.5)) == 12.5
    for not_a_jwt in ("opaque", "a.b", "a.!!!.c", jwt("soon"), jwt(True), jwt(None),
                      "x." + base64.urlsafe_b64encode(b"[1]").decode() + ".y",
                      "x." + base64.urlsafe_b64encode(b"\xff\xfe").decode() + ".y",
                      "x." + base64.urlsafe_b64encode(b"[" * 100_000).decode() + ".y"):
        assert jwt_expiry(not_a_jwt) is None, not_a_jwt


def test_ditto_token_refresh_is_sent_ahead_of_expiry_on_the_engines_timer() -> None:
    provider = Provider(life=300)
    engine = _engine(provider, jwt(WALL + 300), TokenPolicy(refresh_margin=60))
    assert engine.next_deadline() == 240.0  # 60 s before the exp claim
    engine.handle_timeout(239.9)
    assert provider.calls == 0 and engine.data_to_send() == b""
    provider.wall = WALL + 240
    engine.handle_timeout(240.0)
    assert provider.calls == 1
    assert texts_of(engine.data_to_send()) == [jwt_token_message(jwt(WALL + 540))]
    assert engine.next_deadline() == 480.0  # the new token's exp - margin, on the engine's clock


def test_ditto_token_short_lived_tokens_refresh_at_half_life_and_opaque_ones_by_lifetime() -> None:
    short = _engine(Provider(life=30), jwt(WALL + 30), TokenPolicy(refresh_margin=60))
    assert short.next_deadline() == 15.0
    opaque = _engine(Provider(life=30), "opaque", TokenPolicy(lifetime=100, refresh_margin=10))
    assert opaque.next_deadline() == 90.0
    never = _engine(Provider(life=30), "opaque")
    assert never.next_deadline() is None  # no exp, no lifetime: Ditto's close decides


def test_ditto_token_a_failing_provider_is_retried_until_the_token_expires() -> None:
    calls: list[Deliver] = []
    engine = DittoClientEngine()
    engine.tokens = TokenRefresher(jwt(WALL + 100), 0.0, calls.append,
                                   policy=TokenPolicy(refresh_margin=20, retry=15),
                                   wall=lambda: WALL)
    engine.handle_timeout(80.0)
    assert engine.next_deadline() is None  # a fetch is under way: no second one
    engine.handle_timeout(81.0)
    assert len(calls) == 1
    calls[0](OSError("identity provider down"))
    # retried 15 s after the engine's last "now" (81), not at once
    assert engine.next_deadline() == 96.0 and engine.data_to_send() == b""
    engine.handle_timeout(96.0)
    calls[1](RuntimeError("still down"))
    assert engine.next_deadline() is None  # 111 would be after the expiry at 100
    assert engine.refresh_token()  # on demand, still possible
    calls[2]("not a token with spaces")  # refused, never written
    assert engine.data_to_send() == b""


def test_ditto_token_an_expired_token_is_sent_but_not_rescheduled() -> None:
    provider = Provider(life=-5)
    engine = _engine(provider, jwt(WALL + 10), TokenPolicy(refresh_margin=2))
    engine.handle_timeout(8.0)
    assert texts_of(engine.data_to_send()) == [jwt_token_message(jwt(WALL - 5))]
    assert engine.next_deadline() is None


def test_ditto_token_message_refuses_text_that_would_break_the_line() -> None:
    assert jwt_token_message("a.b.c") == "JWT-TOKEN?jwtToken=a.b.c"
    for bad in ("", "a b", "a\nb", "tök"):
        with pytest.raises(ValueError):
            jwt_token_message(bad)


def test_ditto_reconnect_backoff_is_capped_exponential_with_injected_jitter() -> None:
    policy = ReconnectPolicy(initial_delay=1, multiplier=2, max_delay=5, jitter=0.5,
                             max_outage=30, random=lambda: 1.0)
    backoff = Backoff(policy, started=100.0)
    cause = ConnectionError("lost")
    delays = [backoff.next_delay(100.0, cause) for _ in range(5)]
    assert delays == [0.5, 1.0, 2.0, 2.5, 2.5]  # halved by the jitter, capped at 5
    no_jitter = Backoff(ReconnectPolicy(initial_delay=1, jitter=0.5, random=lambda: 0.0), 0.0)
    assert no_jitter.next_delay(0.0, cause) == 1.0


def test_ditto_reconnect_gives_up_past_the_outage_naming_the_cause() -> None:
    policy = ReconnectPolicy(initial_delay=4, max_delay=4, jitter=0, max_outage=10)
    backoff = Backoff(policy, started=0.0)
    assert backoff.next_delay(0.0, OSError("refused")) == 4
    assert backoff.next_delay(5.0, OSError("refused")) == 4
    refused = ConnectionRefusedError("connection refused")
    with pytest.raises(ReconnectFailed) as failed:
        backoff.next_delay(7.0, refused)  # 7 + 4 > 10
    assert failed.value.cause is refused and failed.value.attempts == 2
    assert "connection refused" in str(failed.value) and failed.value.__cause__ is refused


def test_ditto_resume_query_continues_after_the_last_revision() -> None:
    query = {"from_revision": -10, "from_timestamp": "2022-01-01T00:00:00Z", "to_revision": 90,
             "filter": "exists(value)"}
    assert resumed_query(query, None) == query
    assert resumed_query(query, 41) == {"from_revision": 42, "to_revision": 90,
                                        "filter": "exists(value)"}
    assert revision_of({"revision": 3}) == 3
    assert revision_of({"revision": True}) is None and revision_of([1]) is None


def _created(engine: DittoClientEngine, sid: str) -> None:
    text = json.dumps({"topic": "org.eclipse.ditto/x/things/twin/streaming/created",
                       "headers": {"correlation-id": "c"}, "path": "/",
                       "value": {"subscriptionId": sid}})
    engine.receive_data(ws.encode_lines(text.encode() + b"\xff"), 0.0)


def _demands(engine: DittoClientEngine) -> list[int]:
    return [json.loads(t)["value"]["demand"] for t in texts_of(engine.data_to_send())]


def test_ditto_keepalive_requests_the_withheld_unit_before_dittos_idle_timeout() -> None:
    now = [0.0]
    engine = DittoClientEngine(DittoClientConfig(correlation_ids=lambda: "c"))
    engine.keep_alive(45.0, lambda: now[0])
    queue: CreditQueue[Any] = CreditQueue(granted=4)
    handle = SubscriptionHandle(history_request("org.eclipse.ditto:x"), queue, 4)
    engine.subscribe(handle)
    engine.data_to_send()  # the subscribe
    _created(engine, "0")
    assert _demands(engine) == [3]  # one unit of the window withheld
    assert engine.next_deadline() == 45.0
    now[0] = 44.0
    engine.handle_timeout(44.0)
    assert _demands(engine) == []
    now[0] = 45.0
    engine.handle_timeout(45.0)  # the consumer holds its window: 45 s without a request
    assert _demands(engine) == [1]  # from the window: 4 asked in all, never more
    assert engine.next_deadline() is None  # nothing left to send without breaking it
    now[0] = 50.0
    engine.request_more(handle, 2)  # the consumer took two: one asked, one withheld
    assert _demands(engine) == [1]
    assert engine.next_deadline() == 95.0
    engine.cancel(handle)
    assert engine.next_deadline() is None


def test_ditto_keepalive_is_off_by_default_and_asks_the_whole_window() -> None:
    engine = DittoClientEngine(DittoClientConfig(correlation_ids=lambda: "c"))
    queue: CreditQueue[Any] = CreditQueue(granted=4)
    engine.subscribe(SubscriptionHandle(history_request("org.eclipse.ditto:x"), queue, 4))
    engine.data_to_send()
    _created(engine, "0")
    assert _demands(engine) == [4] and engine.next_deadline() is None
