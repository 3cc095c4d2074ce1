"""LoadBalancedClient over real servers on loopback: lazy connections,
round robin, reconnection with backoff (an injected clock), no request on
a closed connection, in-flight requests on a dying connection failing with
an error naming the target, targets from a callable, routed requests.

Every test runs on every driver: the synchronous balancer over the thread
and the selector drivers, and the asyncio balancer
(``sansrs.adapters.rsocket.aio_balancer``), driven from the test through
:class:`SyncView` (each call awaited on an event loop in its own thread)."""

from __future__ import annotations

import asyncio
import inspect
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import (
    AsyncRoutedRequester,
    BalancerConfig,
    LoadBalancedClient,
    NoTargetAvailable,
    Payload,
    Request,
    Router,
    Server,
    WeightedStrategy,
    aio,
    aio_balancer,
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
        self.opened: list[tuple[str, Any]] = []
        self.attempts: list[str] = []
        self.down: set[str] = set()

    def _attempt(self, url: str) -> None:
        self.attempts.append(url)
        if url in self.down:
            raise ConnectionRefusedError(f"{url} is down")

    def __call__(self, url: str, **options: Any) -> Any:
        self._attempt(url)
        client = connect(url, **options)
        self.opened.append((url, client))
        return client


class AsyncConnector(Connector):
    """The same, for the asyncio balancer (the clients it records are
    views (:class:`SyncView`) of the asyncio ones)."""

    def __init__(self, run: Callable[[Any], Any]) -> None:
        super().__init__()
        self._run = run

    async def __call__(self, url: str, **options: Any) -> Any:  # type: ignore[override]
        self._attempt(url)
        client = await aio.connect(url, **options)
        self.opened.append((url, SyncView(self._run, client)))
        return client


class Collected(list[Any]):
    """A stream's items, gathered on the loop; ``with`` as the sync streams."""

    def __enter__(self) -> Collected:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class SyncView:
    """An asyncio object (the asyncio balancer, a routed view, a client)
    used from the test's thread: each method runs on the event loop; a
    coroutine is awaited, an async stream gathered; ``wait_closed(timeout)``
    answers as the synchronous client's."""

    def __init__(self, run: Callable[[Any], Any], target: Any) -> None:
        self._run = run
        self._target = target

    def wait_closed(self, timeout: float) -> bool:
        self._run(asyncio.wait_for(self._target.wait_closed(), timeout))
        return True

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        async def invoke(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if inspect.isawaitable(result):
                return await result
            if hasattr(result, "__anext__"):
                return Collected([item async for item in result])
            return result

        def call(*args: Any, **kwargs: Any) -> Any:
            result = self._run(invoke(*args, **kwargs))
            return (
                SyncView(self._run, result) if isinstance(result, AsyncRoutedRequester) else result
            )

        return call

    def __enter__(self) -> SyncView:
        return self

    def __exit__(self, *exc: object) -> None:
        self._run(self._target.close())


class Flavour:
    """One driver: how the tests make a balancer and a connector for it."""

    def __init__(self, name: str, run: Callable[[Any], Any] | None = None) -> None:
        self.name = name
        self.run = run

    def connector(self) -> Connector:
        return Connector() if self.run is None else AsyncConnector(self.run)

    def balancer(self, targets: Any, **options: Any) -> Any:
        if self.run is None:
            return LoadBalancedClient(targets, loop=self.name, **options)
        return SyncView(self.run, aio_balancer.LoadBalancedClient(targets, **options))


@contextmanager
def _event_loop() -> Iterator[Callable[[Any], Any]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-balancer-loop")
    thread.start()

    def run(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(WAIT * 3)

    try:
        yield run
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(WAIT)
        loop.close()


@pytest.fixture(params=["thread", "selector", "asyncio"])
def flavour(request: pytest.FixtureRequest) -> Iterator[Flavour]:
    if request.param != "asyncio":
        yield Flavour(str(request.param))
        return
    with _event_loop() as run:
        yield Flavour("asyncio", run)


def _urls(servers: list[tuple[Server, Named]]) -> list[str]:
    return [s.url for s, _ in servers]


def _answer(client: Any) -> str:
    reply = client.request_response(b"x", timeout=WAIT)
    assert reply is not None
    return reply.data.decode()


def test_balancer_connects_lazily_and_round_robins(
    servers: list[tuple[Server, Named]], flavour: Flavour
) -> None:
    connector = flavour.connector()
    with flavour.balancer(_urls(servers), connector=connector) as client:
        assert connector.attempts == []  # nothing opened yet
        assert [_answer(client) for _ in range(6)] == ["a", "b", "c", "a", "b", "c"]
        assert len(connector.opened) == 3  # one connection per target, reused
        assert all(s["connected"] for s in client.stats().values())


def test_balancer_in_flight_request_on_a_dying_connection_fails_naming_it(
    servers: list[tuple[Server, Named]],
    flavour: Flavour,
) -> None:
    _, (server_b, handler_b), _ = servers
    with flavour.balancer(_urls(servers)[:2]) as client:
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
    flavour: Flavour,
) -> None:
    clock = Clock()
    connector = flavour.connector()
    urls = _urls(servers)
    with flavour.balancer(urls, connector=connector, clock=clock) as client:
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


def test_balancer_reconnects_after_backoff(
    servers: list[tuple[Server, Named]], flavour: Flavour
) -> None:
    clock = Clock()
    connector = flavour.connector()
    urls = _urls(servers)[:2]
    connector.down.add(urls[0])
    config = BalancerConfig(backoff_initial=1.0, backoff_jitter=0.0)
    with flavour.balancer(
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


def test_balancer_with_every_target_down_raises_no_target_available(flavour: Flavour) -> None:
    connector = flavour.connector()
    connector.down.update({"tcp://127.0.0.1:1", "tcp://127.0.0.1:2"})
    with flavour.balancer(sorted(connector.down), connector=connector) as client:
        with pytest.raises(NoTargetAvailable, match="no target available") as info:
            client.request_response(b"x", timeout=WAIT)
        assert isinstance(info.value, ConnectionClosed)
    with flavour.balancer([]) as empty, pytest.raises(NoTargetAvailable, match="no target"):
        empty.fire_and_forget(b"x")


def test_balancer_targets_from_a_callable_are_refreshed(
    servers: list[tuple[Server, Named]],
    flavour: Flavour,
) -> None:
    clock = Clock()
    urls = _urls(servers)
    current = [urls[0]]
    config = BalancerConfig(refresh_interval=5.0)
    connector = flavour.connector()
    with flavour.balancer(
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


def test_balancer_streams_channels_and_fire_and_forget(flavour: Flavour) -> None:
    from sansrs.adapters.rsocket.demo import DemoHandler

    with ExitStack() as stack:
        urls = [
            stack.enter_context(serve("tcp://127.0.0.1:0", handler_factory=DemoHandler)).url
            for _ in range(2)
        ]
        balanced = flavour.balancer(urls, strategy=WeightedStrategy(), metadata_mime_type=RAW)
        with balanced as client:
            with client.request_stream('{"n": 3, "size": 1}', timeout=WAIT) as items:
                assert [p.data for p in items] == [b"0", b"1", b"2"]
            with client.request_channel([b"x", b"y"], timeout=WAIT) as items:
                assert [p.data for p in items] == [b"x", b"y"]
            if flavour.run is None:  # the synchronous client's pipeline
                answers = list(client.request_response_many([b"p", b"q"], timeout=WAIT))
                assert answers == [Payload(b"p"), Payload(b"q")]
            client.fire_and_forget(b"f")
            client.metadata_push(b"m")
            assert all(s["pending"] == 0 for s in client.stats().values())


def test_balancer_routed_requests(flavour: Flavour) -> None:
    router = Router()
    router.response("who.{n}")(lambda r: b"%s:%s" % (r.variables["n"].encode(), r.data))
    with ExitStack() as stack:
        urls = [stack.enter_context(serve("tcp://127.0.0.1:0", router)).url for _ in range(2)]
        with flavour.balancer(urls) as client:  # composite metadata by default
            who = client.route("who.{n}", 7)
            assert [who.request_response(b"d", timeout=WAIT) for _ in range(2)] == [
                Payload(b"7:d")
            ] * 2
        with (
            flavour.balancer(urls, metadata_mime_type=RAW) as plain,
            pytest.raises(ValueError, match="composite"),
        ):
            plain.route("who.1")


def _catch(fn: Any) -> Any:
    try:
        return fn()
    except BaseException as exc:
        return exc


def test_aio_balancer_request_cancelled_while_connecting_counts_against_no_target() -> None:
    async def main() -> None:
        entered = asyncio.Event()

        async def stuck(url: str, **options: Any) -> Any:
            entered.set()
            await asyncio.Event().wait()  # a connect that never ends

        client = aio_balancer.LoadBalancedClient(["tcp://127.0.0.1:1"], connector=stuck)
        async with client:
            asking = asyncio.ensure_future(client.request_response(b"x"))
            await entered.wait()
            asking.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asking
            stats = client.stats()["tcp://127.0.0.1:1"]
            assert (stats["pending"], stats["failures"], stats["failed"]) == (0, 0, 0)

    asyncio.run(asyncio.wait_for(main(), 40))


class HeldStream:
    """A responder whose streams stay open and silent (a Publisher that
    never emits) once it has signalled ``held``."""

    def __init__(self) -> None:
        self.held = threading.Event()

    def request_stream(self, request: Request) -> Any:
        self.held.set()
        return _Never()


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(_catch(fn)))
    thread.start()
    return thread, outcome


def test_balancer_stream_on_a_dying_connection_fails_naming_it_and_releases_its_target(
    flavour: Flavour,
) -> None:
    handler = HeldStream()
    with serve("tcp://127.0.0.1:0", handler) as server, flavour.balancer([server.url]) as client:
        thread, outcome = _in_thread(lambda: list(client.request_stream(b"s", timeout=WAIT)))
        assert handler.held.wait(WAIT)
        assert client.stats()[server.url]["pending"] == 1
        (peer,) = server.peers
        peer.abort()
        thread.join(WAIT)
        (error,) = outcome
        assert isinstance(error, ConnectionClosed)
        assert str(error).startswith(server.url + ": ")
        assert isinstance(error.__cause__, ConnectionClosed)  # the connection's own error
        stats = client.stats()[server.url]
        assert (stats["pending"], stats["failed"]) == (0, 1)


def test_balancer_request_on_a_dying_connection_chains_the_connections_own_error(
    servers: list[tuple[Server, Named]],
    flavour: Flavour,
) -> None:
    (server, handler), *_ = servers
    with flavour.balancer([server.url]) as client:
        thread, outcome = _in_thread(lambda: client.request_response(b"hold"))
        assert handler.held.wait(WAIT)
        (peer,) = server.peers
        peer.abort()
        thread.join(WAIT)
        (error,) = outcome
        assert str(error).startswith(server.url + ": ")
        cause = error.__cause__
        assert isinstance(cause, ConnectionClosed) and not str(cause).startswith(server.url)


class GatedStream:
    """A responder whose stream sends ``one`` at once, then ``two`` and its
    end only when the test calls :meth:`release`."""

    def __init__(self) -> None:
        self.subscriber: Any = None
        self.first_sent = threading.Event()

    def request_stream(self, request: Request) -> Any:
        return _GatedPublisher(self)

    def release(self) -> None:
        self.subscriber.on_next(Payload(b"two"))
        self.subscriber.on_complete()


class _GatedPublisher:
    def __init__(self, owner: GatedStream) -> None:
        self.owner = owner

    def subscribe(self, subscriber: Any) -> None:
        self.owner.subscriber = subscriber
        subscriber.on_subscribe(_FirstItemOnly(self.owner))


class _FirstItemOnly:
    def __init__(self, owner: GatedStream) -> None:
        self.owner = owner

    def request(self, n: int) -> None:
        if not self.owner.first_sent.is_set():
            self.owner.first_sent.set()
            self.owner.subscriber.on_next(Payload(b"one"))

    def cancel(self) -> None:
        pass


def test_balancer_stream_timeout_is_not_its_end_the_rest_still_arrives(flavour: Flavour) -> None:
    """A ``timeout=`` per item bounds a wait; it does not end the stream (as
    a plain client's stream): iterating on after the TimeoutError gets the
    items that come later, and the target is released at the real end. The
    asyncio balancer used to count the timeout as the end: the next step
    said "no more items" while the stream ran on (silent loss)."""
    handler = GatedStream()
    with serve("tcp://127.0.0.1:0", handler) as server:
        if flavour.run is None:
            with flavour.balancer([server.url]) as client:
                items = iter(client.request_stream(b"s", timeout=0.2))
                assert next(items).data == b"one"
                with pytest.raises(TimeoutError):
                    next(items)
                handler.release()
                assert [p.data for p in items] == [b"two"]
                stats = client.stats()[server.url]
        else:

            async def steps() -> dict[str, Any]:
                async with aio_balancer.LoadBalancedClient([server.url]) as client:
                    stream = client.request_stream(b"s", timeout=0.2)
                    assert (await stream.__anext__()).data == b"one"
                    with pytest.raises(TimeoutError):
                        await stream.__anext__()
                    handler.release()
                    assert [p.data async for p in stream] == [b"two"]
                    return client.stats()[server.url]

            stats = flavour.run(steps())
        assert (stats["pending"], stats["failed"]) == (0, 0)
