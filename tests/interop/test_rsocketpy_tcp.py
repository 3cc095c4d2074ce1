"""Interop with rsocket-py (PyPI ``rsocket``) over TCP, both directions.

rsocket-py runs in a subprocess (benchmarks/rsocketpy_peer.py): as the demo
responder for our client, and as a client against ``sansrs serve``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sansrs.adapters.rsocket_sync import Client, connect
from sansrs.adapters.rsocket_types import Payload, RSocketError

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "benchmarks" / "rsocketpy_peer.py"
WAIT = 20.0
BIG = bytes(range(256)) * (5 * 1024 * 1024 // 256)


@contextmanager
def process(cmd: list[str]) -> Iterator[str]:
    """Start a server process; yield its ``tcp://`` URL from the READY line."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line and line[0] == "READY", f"no READY line from {cmd}"
        address = line[1]
        yield address if address.startswith("tcp://") else f"tcp://127.0.0.1:{address}"
    finally:
        proc.terminate()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)


def rsocketpy_server(*extra: str) -> contextmanager[str]:  # type: ignore[type-arg]
    return process([sys.executable, str(PEER), "serve", "0", *extra])


def sansrs_server(*extra: str) -> contextmanager[str]:  # type: ignore[type-arg]
    return process([sys.executable, "-m", "sansrs", "serve", "tcp://127.0.0.1:0", *extra])


def run_rsocketpy_client(url: str, *extra: str) -> dict[str, object]:
    port = url.rsplit(":", 1)[1]
    out = subprocess.run(
        [sys.executable, str(PEER), "interop", port, *extra],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


# -- rsocket-py client -> sansrs serve --------------------------------------


def _check_rsocketpy_observations(seen: dict[str, object]) -> None:
    assert seen["rr"] == ["hello", "meta"]
    assert seen["fnf_count"] == "3"
    assert seen["mp_count"] == "2"
    assert seen["mp_last"] == "last=pushed-2"
    assert seen["error"] == ["RuntimeError", "rejected: error please"]
    assert seen["stream"] == [1000, "00000000", "00000999"]
    assert seen["channel"] == [[f"c{i}", f"m{i}"] for i in range(100)]
    assert seen["big_ok"] is True


def test_rsocketpy_client_against_sansrs_serve() -> None:
    with sansrs_server() as url:
        _check_rsocketpy_observations(run_rsocketpy_client(url))


def test_rsocketpy_client_fragmenting_against_sansrs_serve() -> None:
    with sansrs_server() as url:
        _check_rsocketpy_observations(run_rsocketpy_client(url, "--fragment", "65536"))


def test_rsocketpy_client_with_lease_against_sansrs_serve() -> None:
    with sansrs_server("--lease") as url:
        _check_rsocketpy_observations(run_rsocketpy_client(url, "--lease"))


# -- sansrs client -> rsocket-py responder -----------------------------------


def _check_against_demo(c: Client) -> None:
    assert c.request_response(b"hello", b"meta", timeout=WAIT) == Payload(b"hello", b"meta")
    for _ in range(3):
        c.fire_and_forget(b"fnf")
    c.metadata_push(b"pushed-1")
    c.metadata_push(b"pushed-2")
    assert c.request_response(b"fnf-count", timeout=WAIT) == Payload(b"3")
    assert c.request_response(b"mp-count", timeout=WAIT) == Payload(b"2")
    assert c.request_response(b"mp-last", timeout=WAIT) == Payload(b"last=pushed-2")
    with pytest.raises(RSocketError) as info:
        c.request_response(b"error please", timeout=WAIT)
    assert info.value.error_code == 0x201 and info.value.message == "rejected: error please"
    request = json.dumps({"n": 1000, "size": 8})
    with c.request_stream(request, prefetch=32, timeout=WAIT) as items:
        got = [p.data for p in items]
    assert got == [str(i).zfill(8).encode() for i in range(1000)]
    outbound = [Payload(b"c%d" % i, b"m%d" % i) for i in range(100)]
    with c.request_channel(outbound, timeout=WAIT) as items:
        assert list(items) == outbound
    assert c.request_response(BIG, b"big", timeout=WAIT) == Payload(BIG, b"big")


def test_sansrs_client_against_rsocketpy_responder() -> None:
    with rsocketpy_server() as url, connect(url) as c:
        _check_against_demo(c)


def test_sansrs_client_fragmenting_against_rsocketpy_responder() -> None:
    with rsocketpy_server() as url, connect(url, fragment_size=65536) as c:
        _check_against_demo(c)


def test_sansrs_client_with_lease_against_rsocketpy_responder() -> None:
    with rsocketpy_server("--lease") as url, connect(url, lease=True) as c:
        _check_against_demo(c)
