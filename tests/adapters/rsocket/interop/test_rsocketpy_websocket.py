"""Interop with rsocket-py (PyPI ``rsocket``) over WebSocket, both directions,
with rsocket-py's aiohttp transport: one RSocket frame per binary message, no
length prefix (spec: Framing Protocol Usage). The same checks as over TCP
(rsocketpy_interop.py): request-response with metadata, fire-and-forget,
metadata push, an application error, a stream of 1000 with request-n 32, a
channel of 100 and a 5 MiB request-response; plain, fragmenting at 64 KiB,
and with leases.
"""

from __future__ import annotations

import pytest
from sansrs.adapters.rsocket.client import connect

from tests.adapters.rsocket.interop.rsocketpy_interop import (
    RAW_METADATA,
    check_against_demo,
    check_rsocketpy_observations,
    rsocketpy_server,
    run_rsocketpy_client,
    sansrs_server,
)

pytestmark = pytest.mark.interop

PATH = "/rsocket"
URL = f"ws://127.0.0.1:0{PATH}"


# -- rsocket-py client -> sansrs serve ws:// -----------------------------------


def test_rsocketpy_websocket_client_against_sansrs_serve() -> None:
    with sansrs_server(url=URL) as url:
        assert url.startswith("ws://") and url.endswith(PATH)
        check_rsocketpy_observations(run_rsocketpy_client(url))


def test_rsocketpy_websocket_client_fragmenting_against_sansrs_serve() -> None:
    with sansrs_server(url=URL) as url:
        check_rsocketpy_observations(run_rsocketpy_client(url, "--fragment", "65536"))


def test_rsocketpy_websocket_client_with_lease_against_sansrs_serve() -> None:
    with sansrs_server("--lease", url=URL) as url:
        check_rsocketpy_observations(run_rsocketpy_client(url, "--lease"))


# -- sansrs client ws:// -> rsocket-py (aiohttp) responder ----------------------


def test_sansrs_websocket_client_against_rsocketpy_responder() -> None:
    with rsocketpy_server(ws_path=PATH) as url, connect(url, metadata_mime_type=RAW_METADATA) as c:
        check_against_demo(c)


def test_sansrs_websocket_client_fragmenting_against_rsocketpy_responder() -> None:
    with (
        rsocketpy_server(ws_path=PATH) as url,
        connect(url, fragment_size=65536, metadata_mime_type=RAW_METADATA) as c,
    ):
        check_against_demo(c)


def test_sansrs_websocket_client_with_lease_against_rsocketpy_responder() -> None:
    with (
        rsocketpy_server("--lease", ws_path=PATH) as url,
        connect(url, lease=True, metadata_mime_type=RAW_METADATA) as c,
    ):
        check_against_demo(c)
