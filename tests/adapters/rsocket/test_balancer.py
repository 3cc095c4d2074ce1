"""LoadBalancedClient over real servers on loopback: lazy connections,
round robin, reconnection with backoff (an injected clock), no request on
a closed connection, in-flight requests on a dying connection failing with
an error naming the target, targets from a callable, routed requests."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import (
    BalancerConfig,
    Client,
    LoadBalancedClient,
    NoTargetAvailable,
    Payload,
    Request,
    Router,
    Server,
    WeightedStrategy,
    connect,
    serve,
)

#: Raw metadata bytes, declared as such (connect's default is composite).
RAW = "application/octet-stream"

WAIT = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Named:
    """A responder that answers with its name; ``hold`` requests stay
    unanswered (a Publisher that never emits) until the test lets them go."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.held = threading.Event()

    def request_response(self, request: Request) -> Any:
        if request.data == b"hold":
            self.held.set()
            return _Never()
        return Payload(self.name.encode())


class _Never:
    def subscribe(self, subscriber: Any) -> None:
        subscriber.on_subscribe(_NoSubscription())


class _NoSubscription:
    def request(self, n: int) -> None:
        pass

    def cancel(self) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[list[tuple[Server, Named]]]:
    with ExitStack() as stack:
        made = []
        for name in ("a", "b", "c"):
            handler = Named(name)
            made.append((stack.enter_context(serve("tcp://127.0.0.1:0", handler)), handler))
        yield made


class Connector:
    """Records the connections opened; ``down`` URLs refuse."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, Client]] = []
        self.attempts: list[str] = []
        self.down: set[str] = set()

    def __call__(self, url: str, **options: Any) -> Client:
        self.attempts.append(url)
        if url in self.down:
            raise ConnectionRefusedError(f"{url} is down")
        client = connect(url, **options)
        self.opened.append((url, client))
        return client


def _urls(servers: list[tuple[Server, Named]]) -> list[str]:
    return [s.url for s, _ in servers]


def _answer(client: LoadBalancedClient) -> str:
    reply = client.request_response(b"x", timeout=WAIT)
    assert reply is not None
    return reply.data.decode()


def test_balancer_connects_lazily_and_round_robins(servers: list[tuple[Server, Named]]) -> None:
    connector = Connector()
    with LoadBalancedClient(_urls(servers), connector=connector) as client:
        assert connector.attempts == []  # nothing opened yet
        assert [_answer(client) for _ in range(6)] == ["a", "b", "c", "a", "b", "c"]
        assert len(connector.opened) == 3  # one connection per target, reused
        assert all(s["connected"] for s in client.stats().values())


def test_balancer_in_flight_request_on_a_dying_connection_fails_naming_it(
    servers: list[tuple[Server, Named]],
) -> None:
    _, (server_b, handler_b), _ = servers
    with LoadBalancedClient(_urls(servers)[:2]) as client:
        assert _answer(client) == "a"
        outcome: list[BaseException | Payload | None] = []
        caller = threading.Thread(
            target=lambda: outcome.append(_catch(lambda: client.request_response(b"hold")))
        )
        caller.start()  # round robin: this one goes to b, which holds it
        assert handler_b.held.wait(WAIT)
        (peer,) = server_b.peers
        peer.abort()  # b's connection dies with the request in flight
        caller.join(WAIT)
        (error,) = outcome
        assert isinstance(error, ConnectionClosed)
        assert str(error).startswith(server_b.url + ": ")
        assert client.stats()[server_b.url]["failed"] == 1


def test_balancer_never_hands_a_request_to_a_closed_connection(
    servers: list[tuple[Server, Named]],
) -> None:
    clock = Clock()
    connector = Connector()
    urls = _urls(servers)
    with LoadBalancedClient(urls, connector=connector, clock=clock) as client:
        assert [_answer(client) for _ in range(3)] == ["a", "b", "c"]
        dead = dict(connector.opened)[urls[1]]
        servers[1][0].close(abort=True)
        connector.down.add(urls[1])
        assert dead.wait_closed(WAIT)
        # b's connection is closed: no request reaches it, none fails
        answers = [_answer(client) for _ in range(20)]
        assert set(answers) == {"a", "c"}
        assert client.stats()[urls[1]]["connected"] is False
        assert client.stats()[urls[1]]["failed"] == 0


def test_balancer_reconnects_after_backoff(servers: list[tuple[Server, Named]]) -> None:
    clock = Clock()
    connector = Connector()
    urls = _urls(servers)[:2]
    connector.down.add(urls[0])
    config = BalancerConfig(backoff_initial=1.0, backoff_jitter=0.0)
    with LoadBalancedClient(
        urls, connector=connector, clock=clock, config=config, rnd=random.Random(1)
    ) as client:
        assert _answer(client) == "b"  # a refused: the request went to b
        assert connector.attempts == urls
        assert [_answer(client) for _ in range(3)] == ["b"] * 3  # a backs off
        assert connector.attempts == urls  # and is not tried meanwhile
        connector.down.clear()
        clock.now += 0.9
        assert _answer(client) == "b"
        clock.now += 0.2  # past the 1 s backoff: a is tried again, and works
        assert {_answer(client) for _ in range(4)} == {"a", "b"}
        assert connector.attempts == [*urls, urls[0]]
        connector.down.add(urls[0])
        dict(connector.opened)[urls[0]].close()
        for _ in range(4):  # a fails once more: the backoff doubles
            _answer(client)
        assert client.stats()[urls[0]]["failures"] >= 1


def test_balancer_with_every_target_down_raises_no_target_available() -> None:
    connector = Connector()
    connector.down.update({"tcp://127.0.0.1:1", "tcp://127.0.0.1:2"})
    with LoadBalancedClient(sorted(connector.down), connector=connector) as client:
        with pytest.raises(NoTargetAvailable, match="no target available") as info:
            client.request_response(b"x", timeout=WAIT)
        assert isinstance(info.value, ConnectionClosed)
    with LoadBalancedClient([]) as empty, pytest.raises(NoTargetAvailable, match="no target"):
        empty.fire_and_forget(b"x")


def test_balancer_targets_from_a_callable_are_refreshed(
    servers: list[tuple[Server, Named]],
) -> None:
    clock = Clock()
    urls = _urls(servers)
    current = [urls[0]]
    config = BalancerConfig(refresh_interval=5.0)
    connector = Connector()
    with LoadBalancedClient(
        lambda: current, connector=connector, clock=clock, config=config
    ) as client:
        assert {_answer(client) for _ in range(3)} == {"a"}
        current[:] = [urls[1], urls[2]]
        assert _answer(client) == "a"  # not asked again yet
        clock.now += 5.0
        assert {_answer(client) for _ in range(4)} == {"b", "c"}
        assert client.targets == urls[1:]
        gone = dict(connector.opened)[urls[0]]
        assert gone.wait_closed(WAIT)  # a left the list and was idle: closed


def test_balancer_streams_channels_and_fire_and_forget() -> None:
    from sansrs.adapters.rsocket.demo import DemoHandler

    with ExitStack() as stack:
        urls = [
            stack.enter_context(serve("tcp://127.0.0.1:0", handler_factory=DemoHandler)).url
            for _ in range(2)
        ]
        balanced = LoadBalancedClient(urls, strategy=WeightedStrategy(), metadata_mime_type=RAW)
        with balanced as client:
            with client.request_stream('{"n": 3, "size": 1}', timeout=WAIT) as items:
                assert [p.data for p in items] == [b"0", b"1", b"2"]
            with client.request_channel([b"x", b"y"], timeout=WAIT) as items:
                assert [p.data for p in items] == [b"x", b"y"]
            answers = list(client.request_response_many([b"p", b"q"], timeout=WAIT))
            assert answers == [Payload(b"p"), Payload(b"q")]
            client.fire_and_forget(b"f")
            client.metadata_push(b"m")
            assert all(s["pending"] == 0 for s in client.stats().values())


def test_balancer_routed_requests() -> None:
    router = Router()
    router.response("who.{n}")(lambda r: b"%s:%s" % (r.variables["n"].encode(), r.data))
    with ExitStack() as stack:
        urls = [stack.enter_context(serve("tcp://127.0.0.1:0", router)).url for _ in range(2)]
        with LoadBalancedClient(urls) as client:  # composite metadata by default
            who = client.route("who.{n}", 7)
            assert [who.request_response(b"d", timeout=WAIT) for _ in range(2)] == [
                Payload(b"7:d")
            ] * 2
        with (
            LoadBalancedClient(urls, metadata_mime_type=RAW) as plain,
            pytest.raises(ValueError, match="composite"),
        ):
            plain.route("who.1")


def _catch(fn: Any) -> Any:
    try:
        return fn()
    except BaseException as exc:
        return exc

