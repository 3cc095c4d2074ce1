"""Interop: rsocket-js 1.0 (alpha)'s resumable client (``RSocketConnector``
with ``resume``) against ``serve_resumable``, over WebSocket (``ws://`` and
``wss://``) and TCP: a stream through links cut by the fault proxy (inside
and right after WebSocket messages; over ``wss://`` at random bytes, inside
TLS records) arrives once each, in order, and a RESUME for a session the
server no longer has ends the rsocket-js session. Over ``wss://`` the client
checks the server's certificate against the tests' throwaway CA (the ``ws``
package's ``ca`` option), host name included.

The client is ``rsocket_js/resume_client.mjs``; its packages are pinned in
``rsocket_js/package-lock.json`` and installed by ``make interop-js`` (CI
runs it). Skipped only where ``node`` is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sansrs.adapters.rsocket.resume import ResumeOptions, serve_resumable
from sansrs.adapters.rsocket.types import Request
from sansrs.adapters.tools.faults import FaultProxy

from tests.adapters.transport.tls_certs import certs

HERE = Path(__file__).parent / "rsocket_js"
NODE = shutil.which("node")
WAIT = 30.0
ITEMS = 3_000
#: Over wss:// each link carries at least 22 KB before its cut (below): more
#: items, so that the stream outlasts its three cuts.
ITEMS_WSS = 10_000

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


class Items:
    def request_stream(self, request: Request) -> Any:
        return (b"item-%d" % i for i in range(int(request.data)))

    def request_response(self, request: Request) -> bytes:
        return b"re:" + request.data


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The test CA (PEM) the rsocket-js client trusts over ``wss://``."""
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    certs().ca.cert_pem.write_to_path(str(path))
    yield path


def _client(url: str, mode: str, ca: Path, items: int = ITEMS) -> subprocess.Popen[str]:
    assert NODE is not None
    if not (HERE / "node_modules" / "rsocket-core").is_dir():
        pytest.fail("rsocket-js is not installed: run `make interop-js` (CI does)")
    extra = [str(ca)] if url.startswith("wss:") else []
    return subprocess.Popen(
        [NODE, str(HERE / "resume_client.mjs"), url, mode, str(items), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _urls(scheme: str, port: int) -> str:
    return f"tcp://127.0.0.1:{port}" if scheme == "tcp" else f"{scheme}://127.0.0.1:{port}/rsocket"


def _serve(scheme: str, options: ResumeOptions | None = None) -> Any:
    tls = {"ssl_context": certs().server_context()} if scheme == "wss" else {}
    return serve_resumable(_urls(scheme, 0), Items(), resume=options, **tls)


@pytest.mark.parametrize("scheme", ["ws", "wss", "tcp"])
def test_rsocket_js_resumable_client_resumes_through_cuts_exactly_once_in_order(
    scheme: str, ca_file: Path
) -> None:
    server = _serve(scheme)
    items = ITEMS_WSS if scheme == "wss" else ITEMS
    try:
        websocket = scheme == "ws"
        with FaultProxy(("127.0.0.1", server.endpoint.port), websocket=websocket) as proxy:
            if websocket:  # inside a message or right after one, both ways
                proxy.cut_messages_at_random(100, 600, cuts=3)
            elif scheme == "wss":
                # Inside TLS records, at least 22 KB into a link: its TLS
                # handshake and upgrade (about 4 KB) and the TLS record
                # (16 KB at most) carrying RESUME_OK always get through.
                # rsocket-js 1.0.0-alpha.3 waits for RESUME_OK with no
                # deadline: a link lost before it arrives is never replaced.
                proxy.cut_at_random(22_000, 32_000, cuts=3)
            else:
                proxy.cut_at_random(3_000, 12_000, cuts=3)
            node = _client(_urls(scheme, proxy.port), "stream", ca_file, items)
            out, err = node.communicate(timeout=WAIT)
            assert node.returncode == 0, err
            result = json.loads(out.splitlines()[-1])
            assert result["items"] == [f"item-{i}" for i in range(items)]
            assert result["answer"] == "re:after"
            assert proxy.stats.cuts == 3
        assert server.registry.stats.resumed == 3
        assert server.registry.stats.rejected == 0
    finally:
        server.close()


@pytest.mark.parametrize("scheme", ["ws", "wss", "tcp"])
def test_rsocket_js_resume_of_a_session_the_server_no_longer_has_ends_it(
    scheme: str, ca_file: Path
) -> None:
    expired = threading.Event()

    def step(name: str) -> None:
        if name == "finish":
            expired.set()

    options = ResumeOptions(keep_detached=0.2, on_step=step)
    server = _serve(scheme, options)
    try:
        with FaultProxy(("127.0.0.1", server.endpoint.port), websocket=scheme == "ws") as proxy:
            node = _client(_urls(scheme, proxy.port), "forgotten", ca_file)
            assert node.stdout is not None and node.stdin is not None
            assert node.stdout.readline().strip() == "ready"
            proxy.cut_now()
            assert expired.wait(WAIT)  # keep_detached passed: the session is gone
            assert server.registry.stats.expired == 1
            node.stdin.write("go\n")  # now the client may reconnect and RESUME
            node.stdin.flush()
            out, err = node.communicate(timeout=WAIT)
            assert node.returncode == 0, err
            result = json.loads(out.splitlines()[-1])
            # rsocket-js reads the ERROR[REJECTED_RESUME] (frame type 11) in
            # place of RESUME_OK and ends the session with this error.
            assert "RESUME" in result["closed"] and "11" in result["closed"], result
        assert server.registry.stats.resumed == 0
    finally:
        server.close()
