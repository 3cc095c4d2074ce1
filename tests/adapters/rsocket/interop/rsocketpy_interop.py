"""Shared pieces of the rsocket-py interop tests (TCP and WebSocket).

rsocket-py runs in a subprocess (benchmarks/rsocketpy_peer.py): as the demo
responder for our client, and as a client against ``sansrs serve``. The same
checks run over every transport; only the URL differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from sansrs.adapters.rsocket.client import Client
from sansrs.adapters.rsocket.errors import RSocketError
from sansrs.adapters.rsocket.types import Payload
from sansrs.adapters.transport.urls import parse_url

ROOT = Path(__file__).resolve().parents[4]
PEER = ROOT / "benchmarks" / "rsocketpy_peer.py"
WAIT = 20.0
BIG = bytes(range(256)) * (5 * 1024 * 1024 // 256)


@contextmanager
def process(cmd: list[str], ws_path: str | None = None) -> Iterator[str]:
    """Start a server process; yield its URL from the READY line (a bare port
    means rsocket-py: ``tcp://127.0.0.1:PORT``, or ``ws://127.0.0.1:PORT/PATH``
    with ``ws_path``)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line and line[0] == "READY", f"no READY line from {cmd}"
        address = line[1]
        if "://" in address:
            yield address
        elif ws_path is not None:
            yield f"ws://127.0.0.1:{address}{ws_path}"
        else:
            yield f"tcp://127.0.0.1:{address}"
    finally:
        proc.terminate()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)


def rsocketpy_server(*extra: str, ws_path: str | None = None) -> AbstractContextManager[str]:
    """rsocket-py serving the demo contract over TCP, or over WebSocket at ``ws_path``."""
    ws = ["--ws", ws_path] if ws_path is not None else []
    return process([sys.executable, str(PEER), "serve", "0", *ws, *extra], ws_path)


def sansrs_server(*extra: str, url: str = "tcp://127.0.0.1:0") -> AbstractContextManager[str]:
    """``sansrs serve URL`` (the demo responder) in a subprocess."""
    return process([sys.executable, "-m", "sansrs", "serve", url, *extra])


def run_rsocketpy_client(url: str, *extra: str) -> dict[str, object]:
    """rsocket-py's client runs every check against ``url`` (tcp:// or ws://)."""
    endpoint = parse_url(url)
    ws = ["--ws", endpoint.path] if endpoint.scheme == "ws" else []
    out = subprocess.run(
        [sys.executable, str(PEER), "interop", str(endpoint.port), *ws, *extra],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def check_rsocketpy_observations(seen: dict[str, object]) -> None:
    """What rsocket-py's client must have seen from a sansrs demo responder."""
    assert seen["rr"] == ["hello", "meta"]
    assert seen["fnf_count"] == "3"
    assert seen["mp_count"] == "2"
    assert seen["mp_last"] == "last=pushed-2"
    assert seen["error"] == ["RuntimeError", "rejected: error please"]
    assert seen["stream"] == [1000, "00000000", "00000999"]
    assert seen["channel"] == [[f"c{i}", f"m{i}"] for i in range(100)]
    assert seen["big_ok"] is True


#: What a client of the demo contract declares: its metadata is raw bytes.
RAW_METADATA = "application/octet-stream"


def check_against_demo(c: Client) -> None:
    """Every interaction model of our client (connected with ``metadata_mime_type=
    RAW_METADATA``) against rsocket-py's demo responder."""
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
