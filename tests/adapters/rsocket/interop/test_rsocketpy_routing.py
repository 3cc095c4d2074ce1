"""Routing and authentication interop with rsocket-py's ``RequestRouter``
(RSocket extensions: Composite Metadata, Routing, Authentication, Simple,
Bearer, Stream Data MIME Types), both directions, over TCP:

- a sansrs routed client against rsocket-py's router (every interaction
  model by route, simple and bearer credentials per request);
- rsocket-py's routing client against ``sansrs serve``'s routes.

rsocket-py runs in a subprocess (benchmarks/rsocketpy_routed_peer.py).
Errors are what each side's spec or implementation gives: rsocket-py
answers every handler failure with APPLICATION_ERROR (an unknown route with
an empty message); sansrs answers REJECTED for refused credentials, INVALID
for malformed metadata, APPLICATION_ERROR naming an unknown route, and
REJECTED_SETUP for refused SETUP credentials.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import (
    BearerAuth,
    Client,
    Payload,
    RSocketError,
    SimpleAuth,
    connect,
)
from sansrs.adapters.transport.urls import parse_url

from sansrs.rsocket import ErrorCode
from sansrs.rsocket.extensions import compose
from tests.adapters.rsocket.interop.rsocketpy_interop import ROOT, WAIT, process, sansrs_server

pytestmark = pytest.mark.interop

PEER = ROOT / "benchmarks" / "rsocketpy_routed_peer.py"
ANN = SimpleAuth("ann", "pw")
TOKEN = BearerAuth("tok")


@pytest.fixture(scope="module")
def rsocketpy_router() -> Iterator[str]:
    with process([sys.executable, str(PEER), "serve", "0", "--auth"]) as url:
        yield url


@pytest.fixture
def client(rsocketpy_router: str) -> Iterator[Client]:
    with connect(rsocketpy_router) as c:  # composite metadata: connect's default
        yield c


def test_default_connect_is_routed_by_rsocketpy_router(rsocketpy_router: str) -> None:
    # No metadata option at all: the SETUP declares composite metadata, which
    # rsocket-py's RoutingRequestHandler requires, and route() works at once.
    with connect(rsocketpy_router) as c:
        assert c.route("echo", auth=ANN).request_response(b"hi", timeout=WAIT) == Payload(b"hi")
        request = b'{"n": 3, "size": 2}'
        with c.route("stream", auth=ANN).request_stream(request, timeout=WAIT) as items:
            assert [p.data for p in items] == [b"00", b"01", b"02"]


# -- sansrs routed client -> rsocket-py RequestRouter ----------------------------------


def test_routed_client_every_interaction_model_against_rsocketpy(client: Client) -> None:
    echo = client.route("echo", auth=ANN)
    assert echo.request_response(b"hello", timeout=WAIT) == Payload(b"hello")
    with echo.request_stream(b"once", timeout=WAIT) as items:
        assert [p.data for p in items] == [b"once"]
    outbound = [b"c%d" % i for i in range(100)]
    with client.route("channel", auth=TOKEN).request_channel(outbound, timeout=WAIT) as items:
        assert [p.data for p in items] == outbound
    request = json.dumps({"n": 500, "size": 6})
    with client.route("stream", auth=TOKEN).request_stream(request, prefetch=16) as items:
        got = [p.data for p in items]
    assert got == [str(i).zfill(6).encode() for i in range(500)]
    for _ in range(3):
        client.route("fnf", auth=ANN).fire_and_forget(b"f")
    client.route("push", auth=ANN).metadata_push([("text/plain", b"pushed")])
    count = client.route("fnf-count", auth=ANN)
    assert count.request_response(b"", timeout=WAIT) == Payload(b"3")
    assert client.route("mp-count", auth=ANN).request_response(b"", timeout=WAIT) == Payload(b"1")
    last = client.route("mp-last", auth=ANN).request_response(b"", timeout=WAIT)
    assert last is not None and last.data.endswith(b"pushed")


def test_routed_client_simple_and_bearer_credentials_reach_rsocketpy(client: Client) -> None:
    assert client.route("whoami", auth=ANN).request_response(b"", timeout=WAIT) == Payload(b"ann")
    assert client.route("whoami", auth=TOKEN).request_response(b"", timeout=WAIT) == Payload(
        b"bearer"
    )
    typed = client.route("echo", auth=ANN, data_mime="application/json", accept=["text/plain"])
    assert typed.request_response(b"{}", timeout=WAIT) == Payload(b"{}")


def test_routed_client_errors_from_rsocketpy_and_the_connection_stays(client: Client) -> None:
    def error(call: Any) -> RSocketError:
        with pytest.raises(RSocketError) as info:
            call()
        return info.value

    wrong_password = error(
        lambda: client.route("echo", auth=SimpleAuth("ann", "bad")).request_response(
            b"", timeout=WAIT
        )
    )
    assert (wrong_password.error_code, wrong_password.message) == (
        ErrorCode.APPLICATION_ERROR,
        "unknown credentials",
    )
    missing = error(lambda: client.route("echo").request_response(b"", timeout=WAIT))
    assert missing.message == "Authentication required but not provided"
    unknown = error(lambda: client.route("no.such", auth=ANN).request_response(b"", timeout=WAIT))
    assert unknown.error_code == ErrorCode.APPLICATION_ERROR  # rsocket-py: no message
    rejected = error(lambda: client.route("error", auth=ANN).request_response(b"x", timeout=WAIT))
    assert rejected.message == "rejected: x"
    malformed = compose("echo", auth=ANN) + b"\xab\x00\x00\x00"  # a reserved well-known id
    bad = error(lambda: client.request_response(b"", malformed, timeout=WAIT))
    assert bad.error_code == ErrorCode.APPLICATION_ERROR
    echo = client.route("echo", auth=ANN)
    assert echo.request_response(b"still here", timeout=WAIT) == Payload(b"still here")


def test_setup_credentials_and_route_are_accepted_by_rsocketpy(rsocketpy_router: str) -> None:
    # rsocket-py checks per-request credentials only; SETUP's composite
    # metadata (credentials, a route) must not upset it.
    with connect(rsocketpy_router, auth=ANN, setup_route="setup.route") as c:
        assert c.route("echo", auth=ANN).request_response(b"x", timeout=WAIT) == Payload(b"x")


# -- rsocket-py routing client -> sansrs serve ----------------------------------------------


def test_rsocketpy_routing_client_against_sansrs_router() -> None:
    with sansrs_server("--auth-simple", "ann:pw", "--auth-bearer", "tok") as url:
        port = parse_url(url).port
        out = subprocess.run(
            [sys.executable, str(PEER), "interop", str(port)],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["rr"] == "hello"
    assert seen["whoami"] == "bearer"
    assert seen["typed"] == "{}"
    assert (seen["fnf_count"], seen["mp_count"]) == ("3", "1")
    assert seen["stream"] == [100, "0000", "0099"]
    assert seen["channel"] == [f"c{i}" for i in range(50)]
    assert seen["errors"] == {
        "unknown_route": [ErrorCode.APPLICATION_ERROR, "no handler for route 'no.such'"],
        "wrong_password": [ErrorCode.REJECTED, "unknown credentials"],
        "no_credentials": [ErrorCode.REJECTED, "authentication required"],
        "malformed": [
            ErrorCode.INVALID,
            "malformed metadata: composite metadata: reserved well-known id 0x2b",
        ],
        "wrong_model": [
            ErrorCode.APPLICATION_ERROR,
            "route 'stream' has no request-response handler (it has request-stream)",
        ],
    }
    assert seen["after_errors"] == "still"
    assert seen["setup_rejected"] == [[ErrorCode.REJECTED_SETUP, "unknown credentials"]]


@pytest.mark.timeout(30)
def test_raw_metadata_setup_rejected_by_rsocketpy_fails_the_request_at_once(
    rsocketpy_router: str,
) -> None:
    # #31 finding 1, against a real peer: rsocket-py's router rejects a
    # SETUP without composite metadata (connect's default before #33) and
    # keeps the socket a while; the request fails with its REJECTED_SETUP at
    # once, never after its timeout.
    for _ in range(10):
        with connect(rsocketpy_router, metadata_mime_type="application/octet-stream") as c:
            started = time.monotonic()
            with pytest.raises(ConnectionClosed, match="REJECTED_SETUP"):
                c.request_response(b"x", timeout=5)
            assert time.monotonic() - started < 2.5
