"""The Router over the synchronous drivers (a thread per connection and the
selector loop): every interaction model by route, templates, principals,
data MIME types, the errors the issue and the specs ask for."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import (
    COMPOSITE_METADATA,
    BearerAuth,
    Client,
    CustomAuth,
    Payload,
    RoutedRequest,
    Router,
    RSocketError,
    Server,
    SimpleAuth,
    connect,
    serve,
)
from sansrs.adapters.rsocket.demo import DemoHandler

from sansrs.rsocket import Connection, ConnectionConfig, ErrorCode, Role
from sansrs.rsocket.events import ErrorReceived
from sansrs.rsocket.extensions import (
    ROUTING,
    compose,
    decode_metadata,
    encode_routing,
    response_data_mime,
)
from sansrs.streams import CollectingSubscriber
from tests.adapters.rsocket.routed_service import Seen, make_router

#: Raw metadata bytes, declared as such (connect's default is composite).
RAW = "application/octet-stream"

WAIT = 10.0
ANN = SimpleAuth("ann", "pw-ann")


@pytest.fixture(params=["thread", "selector"])
def loop(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def server(seen: Seen, loop: str) -> Iterator[Server]:
    with serve("tcp://127.0.0.1:0", make_router(seen), loop=loop) as s:
        yield s


@pytest.fixture
def client(server: Server, loop: str) -> Iterator[Client]:
    with connect(server.url, auth=ANN, loop=loop) as c:
        yield c


def _error(call: object) -> RSocketError:
    with pytest.raises(RSocketError) as info:
        call()  # type: ignore[operator]
    return info.value


# -- every interaction model by route -----------------------------------------------


def test_router_request_response_with_template_variables(client: Client, seen: Seen) -> None:
    reply = client.route("users.{id}.get", 42).request_response(b"", timeout=WAIT)
    assert reply == Payload(b"42:ann:application/octet-stream")
    (request,) = seen.requests
    assert request.route == "users.42.get" and dict(request.variables) == {"id": "42"}
    assert request.principal == "ann" and request.peer is not None


def test_router_plain_route_wins_over_template(client: Client) -> None:
    assert client.route("users.me.get").request_response(b"", timeout=WAIT) == Payload(b"me:ann")


def test_router_request_stream(client: Client) -> None:
    with client.route("count").request_stream(b"5", timeout=WAIT) as items:
        assert [p.data for p in items] == [b"0", b"1", b"2", b"3", b"4"]


def test_router_request_channel(client: Client, seen: Seen) -> None:
    outbound = [Payload(b"a"), Payload(b"b", b"own"), Payload(b"c")]
    with client.route("echo").request_channel(outbound, timeout=WAIT) as items:
        assert [p.data for p in items] == [b"a", b"b", b"c"]


def test_rsocket_routing_must_only_be_used_in_initiating_frames_channel_items(
    client: Client, seen: Seen
) -> None:
    # The route rides on REQUEST_CHANNEL; the later PAYLOAD frames carry only
    # what the caller gave them.
    outbound = [Payload(b"a"), Payload(b"b", b"own"), Payload(b"c")]
    with client.route("echo", auth=ANN).request_channel(outbound, timeout=WAIT) as items:
        list(items)
    assert decode_metadata(seen.requests[0].metadata).route == "echo"
    assert [p.metadata for p in seen.inbound] == [b"own", None]


def test_router_fire_and_forget_and_metadata_push(client: Client, seen: Seen) -> None:
    client.route("log").fire_and_forget(b"line", timeout=WAIT)
    assert seen.fnf.wait(WAIT)
    client.route("config").metadata_push(timeout=WAIT)
    assert seen.push.wait(WAIT)
    fnf, push = seen.requests
    assert (fnf.route, fnf.data, fnf.principal) == ("log", b"line", "ann")
    assert (push.route, push.data, push.principal) == ("config", b"", "ann")


def test_router_request_response_many_on_a_route(client: Client) -> None:
    replies = client.route("users.{id}.get", 7).request_response_many(
        [b"x"] * 50 + [Payload(b"y", compose(data_mime="text/plain"))], in_flight=8, timeout=WAIT
    )
    answers = [r.data for r in replies if r is not None]
    assert answers == [b"7:ann:application/octet-stream"] * 50 + [b"7:ann:text/plain"]


def test_router_publishers_on_a_route(client: Client) -> None:
    done = threading.Event()
    sub: CollectingSubscriber[Payload] = CollectingSubscriber(
        prefetch=10, on_done=lambda _: done.set()
    )
    client.route("count").stream_publisher(b"3").subscribe(sub)
    assert done.wait(WAIT) and sub.completed
    assert [p.data for p in sub.items] == [b"0", b"1", b"2"]


# -- errors ---------------------------------------------------------------------


def test_router_unknown_route_is_application_error_naming_it(client: Client) -> None:
    error = _error(lambda: client.route("no.such.route").request_response(b"", timeout=WAIT))
    assert error.error_code == ErrorCode.APPLICATION_ERROR
    assert error.message == "no handler for route 'no.such.route'"
    # the connection stays usable
    assert client.route("users.me.get").request_response(b"", timeout=WAIT) == Payload(b"me:ann")


def test_router_route_without_the_interaction_model_is_application_error(client: Client) -> None:
    error = _error(lambda: client.route("count").request_response(b"", timeout=WAIT))
    assert error.error_code == ErrorCode.APPLICATION_ERROR
    assert error.message == "route 'count' has no request-response handler (it has request-stream)"
    with client.route("users.1.get").request_stream(b"", timeout=WAIT) as items:
        error = _error(lambda: list(items))
    assert "route 'users.1.get' has no request-stream handler" in error.message


def test_router_malformed_composite_metadata_is_invalid_and_connection_stays(
    client: Client,
) -> None:
    bad = compose("users.1.get") + b"\xab\x00\x00\x00"  # a reserved well-known id
    error = _error(lambda: client.request_response(b"", bad, timeout=WAIT))
    assert error.error_code == ErrorCode.INVALID
    assert "reserved well-known id 0x2b" in error.message
    truncated = compose("users.1.get")[:-2]  # our client refuses to send it: the check
    with pytest.raises(ValueError, match="not composite"):
        client.request_response(b"", truncated, timeout=WAIT)
    assert client.route("users.me.get").request_response(b"", timeout=WAIT) == Payload(b"me:ann")


def test_router_truncated_composite_metadata_from_a_scripted_peer_is_invalid(
    server: Server,
) -> None:
    # A peer that declared composite metadata and sends a truncated one (a
    # sansrs client checks its metadata first, so the sans-IO core plays it).
    conn = Connection(Role.CLIENT, ConnectionConfig())
    conn.setup(metadata_mime_type=COMPOSITE_METADATA, metadata=compose(auth=ANN))
    sid = conn.request_response(b"", compose("users.1.get")[:-2])
    with socket.create_connection(("127.0.0.1", server.endpoint.port), timeout=WAIT) as sock:
        sock.sendall(conn.data_to_send())
        errors: list[ErrorReceived] = []
        while not errors:
            data = sock.recv(65536)
            assert data, "closed before the ERROR frame"
            conn.receive_data(data)
            errors += [e for e in conn.events() if isinstance(e, ErrorReceived)]
    assert (errors[0].stream_id, errors[0].error_code) == (sid, ErrorCode.INVALID)
    assert "truncated" in errors[0].message


def test_router_request_without_route_and_no_fallback_is_application_error(
    client: Client,
) -> None:
    error = _error(lambda: client.request_response(b"x", timeout=WAIT))
    assert error.message == "no route in the request's metadata"


# -- authentication -------------------------------------------------------------------


def test_router_wrong_setup_password_is_rejected_setup(server: Server, loop: str) -> None:
    with connect(server.url, auth=SimpleAuth("ann", "nope"), loop=loop) as c:
        with pytest.raises(ConnectionClosed) as info:
            c.route("health").request_response(b"", timeout=WAIT)
        assert "REJECTED_SETUP" in str(info.value) and "wrong password for ann" in str(info.value)


def test_router_wrong_request_credentials_are_rejected_before_the_handler(
    server: Server, loop: str, seen: Seen
) -> None:
    with connect(server.url, metadata_mime_type=COMPOSITE_METADATA, loop=loop) as c:
        bad = SimpleAuth("bob", "wrong")
        error = _error(lambda: c.route("users.1.get", auth=bad).request_response(b"", timeout=WAIT))
        assert (error.error_code, error.message) == (ErrorCode.REJECTED, "wrong password for bob")
        unknown_token = BearerAuth("tok-x")
        error = _error(
            lambda: c.route("count", auth=unknown_token).request_response(b"", timeout=WAIT)
        )
        assert (error.error_code, error.message) == (ErrorCode.REJECTED, "authentication failed")
        error = _error(lambda: c.route("users.1.get").request_response(b"", timeout=WAIT))
        assert (error.error_code, error.message) == (ErrorCode.REJECTED, "authentication required")
        # an unknown route is not revealed to an unauthenticated requester
        error = _error(lambda: c.route("secret.admin").request_response(b"", timeout=WAIT))
        assert error.error_code == ErrorCode.REJECTED
        good = BearerAuth("tok-carol")
        reply = c.route("users.{id}.get", 2, auth=good).request_response(b"", timeout=WAIT)
        assert reply == Payload(b"2:carol:application/octet-stream")
    assert [r.principal for r in seen.requests] == ["carol"]  # no handler saw the others


def test_router_public_route_needs_no_credentials(server: Server, loop: str) -> None:
    with connect(server.url, metadata_mime_type=COMPOSITE_METADATA, loop=loop) as c:
        assert c.route("health").request_response(b"", timeout=WAIT) == Payload(b"ok:None")


def test_router_request_credentials_override_the_setup_principal(client: Client) -> None:
    bob = SimpleAuth("bob", "pw-bob")
    reply = client.route("users.me.get", auth=bob).request_response(b"", timeout=WAIT)
    assert reply == Payload(b"me:bob")


def test_router_custom_auth_goes_to_the_hook(server: Server, loop: str) -> None:
    with (
        connect(server.url, auth=CustomAuth("x-hmac", b"sig"), loop=loop) as c,
        pytest.raises(ConnectionClosed, match="authentication failed"),
    ):
        c.route("health").request_response(b"", timeout=WAIT)


# -- data MIME types (RSocket extension: Stream Data MIME Types) ----------------------


def test_rsocket_data_mime_absent_setup_mime_must_be_used_by_the_router(
    server: Server, loop: str
) -> None:
    with connect(server.url, auth=ANN, data_mime_type="application/cbor", loop=loop) as c:
        users = c.route("users.1.get")
        assert users.request_response(b"", timeout=WAIT) == Payload(b"1:ann:application/cbor")
        typed = c.route("users.1.get", data_mime="application/json")
        assert typed.request_response(b"", timeout=WAIT) == Payload(b"1:ann:application/json")


def test_rsocket_data_mime_responder_other_type_must_be_declared_in_answers(
    client: Client,
) -> None:
    reply = client.route("json").request_response(b"", timeout=WAIT)
    assert reply is not None
    assert response_data_mime(reply.metadata, "application/octet-stream") == "application/json"
    with client.route("json.count").request_stream(b"", timeout=WAIT) as items:
        mimes = [response_data_mime(p.metadata, "-") for p in items]
    assert mimes == ["application/json"] * 3
    # asked for JSON: nothing to declare
    accepted = client.route("json", accept=["application/json"])
    reply = accepted.request_response(b"", timeout=WAIT)
    assert reply is not None and reply.metadata is None


# -- fallback: today's handlers keep working ---------------------------------------------


def test_router_fallback_answers_connections_without_composite_metadata(loop: str) -> None:
    router = make_router(Seen(), fallback_factory=DemoHandler, require_auth=False)
    with (
        serve("tcp://127.0.0.1:0", router, loop=loop) as server,
        connect(server.url, metadata_mime_type=RAW) as c,
    ):
        assert c.request_response(b"hi", b"md", timeout=WAIT) == Payload(b"hi", b"md")
        with c.request_stream('{"n": 3, "size": 2}', timeout=WAIT) as items:
            assert [p.data for p in items] == [b"00", b"01", b"02"]
        with pytest.raises(ValueError, match="composite metadata"):
            c.route("echo")


def test_router_fallback_answers_composite_requests_without_route(loop: str) -> None:
    router = make_router(Seen(), fallback_factory=DemoHandler)
    with (
        serve("tcp://127.0.0.1:0", router, loop=loop) as server,
        connect(server.url, auth=ANN) as c,
    ):
        assert c.request_response(b"hi", timeout=WAIT) == Payload(b"hi")
        assert c.route("users.me.get").request_response(b"", timeout=WAIT) == Payload(b"me:ann")


def test_router_fallback_needs_a_principal_when_auth_is_required(loop: str) -> None:
    router = make_router(Seen(), fallback_factory=DemoHandler)
    with serve("tcp://127.0.0.1:0", router, loop=loop) as server, connect(server.url) as c:
        error = _error(lambda: c.request_response(b"x", timeout=WAIT))
    assert (error.error_code, error.message) == (ErrorCode.REJECTED, "authentication required")


def test_router_without_fallback_tells_a_plain_client_to_send_routes(loop: str) -> None:
    router = Router()
    router.response("r")(lambda r: b"")
    with (
        serve("tcp://127.0.0.1:0", router, loop=loop) as server,
        connect(server.url, metadata_mime_type=RAW) as c,
    ):
        error = _error(lambda: c.request_response(b"x", timeout=WAIT))
    assert COMPOSITE_METADATA in error.message and error.error_code == ErrorCode.APPLICATION_ERROR


# -- SETUP ---------------------------------------------------------------------------------


def test_router_setup_route_handler_sees_setup_and_can_reject(loop: str) -> None:
    router = Router()
    connected: list[RoutedRequest] = []

    @router.setup("client.{name}")
    def on_connect(request: RoutedRequest) -> None:
        if request.variables["name"] == "evil":
            raise PermissionError("go away")
        connected.append(request)

    @router.response("hello")
    def hello(request: RoutedRequest) -> bytes:
        return b"hello"

    with serve("tcp://127.0.0.1:0", router, loop=loop) as server:
        with connect(server.url, setup_route="client.a", setup_data=b"hi", loop=loop) as c:
            assert c.route("hello").request_response(b"", timeout=WAIT) == Payload(b"hello")
        assert [(r.route, r.data) for r in connected] == [("client.a", b"hi")]
        with (
            connect(server.url, setup_route="client.evil", loop=loop) as c,
            pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*go away"),
        ):
            c.route("hello").request_response(b"", timeout=WAIT)


def test_router_malformed_setup_metadata_is_invalid_setup(server: Server, loop: str) -> None:
    bad = compose("x")[:-1]
    with connect(
        server.url, metadata_mime_type=COMPOSITE_METADATA, setup_metadata=bad, loop=loop
    ) as c, pytest.raises(ConnectionClosed, match="INVALID_SETUP"):
        c.route("health").request_response(b"", timeout=WAIT)


def test_connect_auth_and_route_compose_setup_metadata() -> None:
    from sansrs.adapters.rsocket import EngineOptions

    extra = compose(entries=[("a/b", b"")])
    options = EngineOptions(auth=ANN, setup_route="r", setup_metadata=extra)
    assert options.metadata_mime_type == COMPOSITE_METADATA
    meta = decode_metadata(options.setup_metadata)
    assert (meta.route, meta.auth, [e.mime for e in meta.entries][-1]) == ("r", ANN, "a/b")
    with pytest.raises(ValueError, match="composite"):
        EngineOptions(auth=ANN, metadata_mime_type="application/json")


# -- the router's own rules ---------------------------------------------------------------


def test_router_registration_errors() -> None:
    router = Router()
    router.response("a")(lambda r: None)
    with pytest.raises(ValueError, match="already registered"):
        router.response("a")(lambda r: None)
    with pytest.raises(ValueError, match="kind"):
        router.add("request_everything", "b", lambda r: None)
    with pytest.raises(ValueError, match="authenticate="):
        router.response("c", authenticated=True)(lambda r: None)
    with pytest.raises(TypeError):
        router.add("request_response", "d", "not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="braces"):
        router.response("e{")(lambda r: None)
    with pytest.raises(TypeError):
        Router(fallback=object(), fallback_factory=lambda p: None)
    assert router.routes() == {"request_response": ["a"]}


def test_router_metadata_cache_is_bounded_and_never_keeps_credentials(
    client: Client, server: Server
) -> None:
    router = Router(cache_size=4)
    router.response("r.{n}")(lambda r: r.variables["n"])
    with serve("tcp://127.0.0.1:0", router) as s, connect(s.url, auth=ANN) as c:
        for n in range(20):
            assert c.route("r.{n}", n).request_response(b"", timeout=WAIT) == Payload(b"%d" % n)
        c.route("r.x", auth=ANN).request_response(b"", timeout=WAIT)
    cache = router._caches["request_response"]
    assert 0 < len(cache) <= 4
    assert all(hit.composite.auth is None for hit in cache.values())


def test_router_answers_server_initiated_requests_on_the_client() -> None:
    router = Router()
    router.response("whoami")(lambda r: b"client-side:" + r.route.encode())
    with (
        serve("tcp://127.0.0.1:0", handler_factory=DemoHandler) as server,
        connect(server.url, handler=router) as c,
    ):
        c.request_response(b"x", timeout=WAIT)  # the server knows us now
        (peer,) = server.peers
        reply = peer.route("whoami").request_response(b"", timeout=WAIT)
    assert reply == Payload(b"client-side:whoami")


def test_routed_request_metadata_is_composite_with_extra_entries(
    client: Client, seen: Seen
) -> None:
    extra = [(ROUTING, encode_routing("ignored-second-tag")), ("text/x-note", b"n")]
    client.route("users.{id}.get", 3, metadata=extra).request_response(b"", timeout=WAIT)
    meta = seen.requests[-1].composite
    assert meta.tags == ("users.3.get", "ignored-second-tag")
    assert [bytes(e.content) for e in meta.all("text/x-note")] == [b"n"]


def test_router_with_async_hooks_is_refused_by_the_synchronous_drivers(loop: str) -> None:
    async def check(auth: object) -> str:
        return "anyone"

    router = Router(authenticate=check)
    router.response("r")(lambda r: b"in")
    assert router.asyncio_only
    with pytest.raises(TypeError, match=r"aio\.serve"):
        serve("tcp://127.0.0.1:0", router, loop=loop)
    with pytest.raises(TypeError, match=r"aio\.serve"):
        connect("tcp://127.0.0.1:1", handler=router, loop=loop)
    setup_only = Router()

    @setup_only.setup("hello")
    async def hello(request: RoutedRequest) -> None: ...

    with pytest.raises(TypeError, match=r"aio\.serve"):
        serve("tcp://127.0.0.1:0", setup_only, loop=loop)
    # A factory's router cannot be seen up front: its SETUP is refused.
    with (
        serve("tcp://127.0.0.1:0", handler_factory=lambda peer: router, loop=loop) as server,
        connect(server.url, auth=ANN, loop=loop) as c,
        pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*aio\.serve"),
    ):
        c.route("r").request_response(b"", timeout=WAIT)


def test_router_plain_authenticate_returning_an_awaitable_is_refused(loop: str) -> None:
    async def check(auth: object) -> str:
        return "anyone"

    router = Router(authenticate=lambda auth: check(auth))
    router.response("r")(lambda r: b"in")
    with (
        serve("tcp://127.0.0.1:0", router, loop=loop) as server,
        connect(server.url, auth=ANN, loop=loop) as c,
        pytest.raises(ConnectionClosed, match=r"REJECTED_SETUP.*authentication failed"),
    ):
        c.route("r").request_response(b"", timeout=WAIT)


def test_router_behind_resumable_connections() -> None:
    from sansrs.adapters.rsocket import connect_resumable, serve_resumable

    router = make_router(Seen())
    with (
        serve_resumable("tcp://127.0.0.1:0", router) as server,
        connect_resumable(server.url, auth=ANN) as c,
    ):
        assert c.route("users.me.get").request_response(b"", timeout=WAIT) == Payload(b"me:ann")
        error = _error(lambda: c.route("nope").request_response(b"", timeout=WAIT))
        assert error.message == "no handler for route 'nope'"
