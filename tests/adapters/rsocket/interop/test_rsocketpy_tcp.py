"""Interop with rsocket-py (PyPI ``rsocket``) over TCP, both directions.

rsocket-py runs in a subprocess (benchmarks/rsocketpy_peer.py): as the demo
responder for our client, and as a client against ``sansrs serve``. The
checks are shared with the WebSocket interop (rsocketpy_interop.py).
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


# -- rsocket-py client -> sansrs serve --------------------------------------


def test_rsocketpy_client_against_sansrs_serve() -> None:
    with sansrs_server() as url:
        check_rsocketpy_observations(run_rsocketpy_client(url))


def test_rsocketpy_client_fragmenting_against_sansrs_serve() -> None:
    with sansrs_server() as url:
        check_rsocketpy_observations(run_rsocketpy_client(url, "--fragment", "65536"))


def test_rsocketpy_client_with_lease_against_sansrs_serve() -> None:
    with sansrs_server("--lease") as url:
        check_rsocketpy_observations(run_rsocketpy_client(url, "--lease"))


# -- sansrs client -> rsocket-py responder -----------------------------------


def test_sansrs_client_against_rsocketpy_responder() -> None:
    with rsocketpy_server() as url, connect(url, metadata_mime_type=RAW_METADATA) as c:
        check_against_demo(c)


def test_sansrs_client_fragmenting_against_rsocketpy_responder() -> None:
    with (
        rsocketpy_server() as url,
        connect(url, fragment_size=65536, metadata_mime_type=RAW_METADATA) as c,
    ):
        check_against_demo(c)


def test_sansrs_client_with_lease_against_rsocketpy_responder() -> None:
    with (
        rsocketpy_server("--lease") as url,
        connect(url, lease=True, metadata_mime_type=RAW_METADATA) as c,
    ):
        check_against_demo(c)
