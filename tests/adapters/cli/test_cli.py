"""``python -m sansrs``: serve the demo responder and make requests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

WAIT = 30.0


def sansrs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sansrs", *args], capture_output=True, text=True, timeout=WAIT
    )


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sansrs", "serve", "tcp://127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, address = proc.stdout.readline().split()
        assert ready == "READY"
        assert address.startswith("tcp://127.0.0.1:") and not address.endswith(":0")
        yield address
    finally:
        proc.terminate()
        assert proc.wait(WAIT) == 0  # SIGTERM is a clean shutdown


@pytest.mark.parametrize("args", [(), ("serve",), ("request",)])
def test_help_everywhere(args: tuple[str, ...]) -> None:
    result = sansrs(*args, "--help")
    assert result.returncode == 0
    assert "usage: sansrs" in result.stdout


def test_request_response_prints_data_and_metadata(url: str) -> None:
    result = sansrs("request", url, "--rr", "hello", "-m", "meta")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello\t[metadata meta]\n"


def test_stream_prints_each_item(url: str) -> None:
    result = sansrs("request", url, "--stream", '{"n": 3, "size": 4}', "--prefetch", "2")
    assert result.stdout.splitlines() == ["0000", "0001", "0002"]


def test_channel_echoes_each_argument(url: str) -> None:
    result = sansrs("request", url, "--channel", "a", "b", "c")
    assert result.stdout.splitlines() == ["a", "b", "c"]


def test_fire_and_forget_and_metadata_push_exit_cleanly(url: str) -> None:
    assert sansrs("request", url, "--fnf", "ping").returncode == 0
    assert sansrs("request", url, "--metadata-push", "m").returncode == 0


def test_error_reply_exits_2_with_the_message(url: str) -> None:
    result = sansrs("request", url, "--rr", "error!")
    assert result.returncode == 2
    assert "APPLICATION_ERROR" in result.stderr and "rejected: error!" in result.stderr


def test_unreachable_server_exits_3() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        result = sansrs("request", f"tcp://127.0.0.1:{port}", "--rr", "x")
    assert result.returncode == 3
    assert "error:" in result.stderr


def test_bad_url_is_a_usage_error() -> None:
    result = sansrs("request", "gopher://127.0.0.1:1", "--rr", "x")
    assert result.returncode == 1
    assert result.stderr.startswith("error:") and "unknown URL scheme" in result.stderr
    for scheme in ("tcp://", "tls://", "unix://", "ws://", "wss://"):
        assert scheme in result.stderr  # every scheme the command takes, named
    result = sansrs("serve", "tcp://127.0.0.1")
    assert result.returncode == 1 and "missing port" in result.stderr


@pytest.mark.parametrize("protocol", ["rsocket", "rsio"])
@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_serve_honours_loop_for_every_protocol(
    protocol: str, loop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--loop`` is honoured by each protocol it is offered for (it used to
    be dropped for rsio): the server runs on the driver asked for."""
    from sansrs.adapters import cli
    from sansrs.adapters.cli import serve
    from sansrs.adapters.drive import ServerThread, default_loop

    seen: list[object] = []

    def fake_serve_until_closed(start: object) -> int:
        server = start()  # type: ignore[operator]
        with server:
            seen.append(server._accept)
        return 0

    monkeypatch.setattr(serve, "serve_until_closed", fake_serve_until_closed)
    argv = ["serve", "--protocol", protocol, "--loop", loop, "tcp://127.0.0.1:0"]
    assert cli.main(argv) == 0
    (accept,) = seen
    if loop == "selector":
        assert accept.loop is default_loop()  # type: ignore[attr-defined]
    else:
        assert isinstance(accept, ServerThread)


def test_serve_refuses_an_option_the_protocol_does_not_have() -> None:
    result = sansrs("serve", "--protocol", "rsio", "--lease", "tcp://127.0.0.1:0")
    assert result.returncode == 1
    assert "--lease applies to --protocol rsocket" in result.stderr


def test_cli_version_is_the_installed_distribution_version() -> None:
    from importlib.metadata import version

    result = sansrs("--version")
    assert result.returncode == 0
    assert result.stdout == f"sansrs {version('sansrs')}\n"


@pytest.mark.parametrize("args", [(), ("ditto",), ("serve",), ("subscribe",), ("request",)])
def test_cli_help_is_plain_text(args: tuple[str, ...]) -> None:
    """No reST markup from docstrings in what users read."""
    result = sansrs(*args, "--help")
    assert result.returncode == 0
    for markup in ("``", ":mod:", ":data:", ":class:", ":func:"):
        assert markup not in result.stdout, markup


def test_cli_help_lists_the_exit_codes_and_the_ws_extra() -> None:
    out = sansrs("--help").stdout
    assert "exit status:" in out and "130" in out
    assert "pip install 'sansrs[ws]'" in out


@pytest.mark.parametrize(
    "args",
    [
        ("request",),  # URL and kind missing
        ("request", "tcp://127.0.0.1:1"),  # no --rr/--stream/...
        ("request", "tcp://127.0.0.1:1", "--rr", "x", "--prefetch", "many"),
        ("frobnicate",),
        ("ditto", "history"),
    ],
)
def test_cli_usage_errors_exit_1_not_the_peer_error_status(args: tuple[str, ...]) -> None:
    """argparse's own exit status is 2, which these commands give to the
    peer's error: a usage error exits 1 (the documented usage status)."""
    result = sansrs(*args)
    assert result.returncode == 1, result.stderr
    assert "usage: sansrs" in result.stderr and "error:" in result.stderr


_WITHOUT_WS = (
    "import sys; sys.modules['wsproto'] = None; "
    "from sansrs.adapters.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.parametrize(
    "args",
    [
        ("request", "ws://127.0.0.1:1/rsocket", "--rr", "x"),
        ("serve", "ws://127.0.0.1:0/rsocket"),
        ("subscribe", "ws://127.0.0.1:1/rsio", "counter"),
        ("ditto", "history", "ws://127.0.0.1:1/ws/2", "a:b"),
    ],
)
def test_cli_missing_ws_extra_names_it_without_a_traceback(args: tuple[str, ...]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_WS, *args], capture_output=True, text=True, timeout=WAIT
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: ws:// needs the 'ws' extra")
    assert "pip install 'sansrs[ws]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_python_m_sansrs_in_an_uninstalled_source_tree_says_what_to_do() -> None:
    """``python -m sansrs`` from a checkout, without sansrs installed (``-S``:
    no site-packages, the current directory's sansrs/ only)."""
    import sansrs

    root = Path(sansrs.__file__).parent.parent
    result = subprocess.run(
        [sys.executable, "-S", "-m", "sansrs", "--version"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=root,
    )
    assert result.returncode == 1
    assert "sansrs.adapters is not importable" in result.stderr
    assert "pip install ." in result.stderr and ".venv/bin/sansrs" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_tls_or_wss_without_a_certificate_says_which_option() -> None:
    result = sansrs("serve", "wss://127.0.0.1:0/rsocket")
    assert result.returncode == 1
    assert "needs --certfile" in result.stderr


def test_serve_refuses_resumable_for_rsio() -> None:
    result = sansrs("serve", "--protocol", "rsio", "--resumable", "tcp://127.0.0.1:0")
    assert result.returncode == 1
    assert "--resumable applies to --protocol rsocket" in result.stderr


@pytest.mark.timeout(60)
def test_serve_resumable_over_wss_with_a_certificate_resumes_a_cut_session(
    tmp_path: Path,
) -> None:
    """``sansrs serve wss://... --certfile --keyfile --resumable``: the demo
    responder over TLS with resumable sessions; a client checking the
    certificate reads a stream across a cut link (it resumes)."""
    from sansrs.adapters.rsocket.resume import ResumeOptions, connect_resumable
    from sansrs.adapters.tools.faults import FaultProxy

    from tests.adapters.transport.tls_certs import certs

    c = certs()
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(b"".join(pem.bytes() for pem in c.server.cert_chain_pems))
    c.server.private_key_pem.write_to_path(str(key))
    argv = ["serve", "wss://127.0.0.1:0/rsocket", "--resumable"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sansrs", *argv, "--certfile", str(cert), "--keyfile", str(key)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, address = proc.stdout.readline().split()
        assert ready == "READY" and address.startswith("wss://127.0.0.1:")
        port = int(address.split(":")[2].split("/")[0])
        with FaultProxy(("127.0.0.1", port)) as proxy:
            client = connect_resumable(
                f"wss://127.0.0.1:{proxy.port}/rsocket",
                ssl_context=c.client_context(),
                resume=ResumeOptions(reconnect_initial=0.01, reconnect_timeout=WAIT),
            )
            try:
                first = client.request_stream(b'{"n": 2000, "size": 6}', prefetch=16, timeout=WAIT)
                got = [next(first).data for _ in range(10)]
                proxy.cut_now()
                assert proxy.wait_cuts(1, WAIT)
                got += [p.data for p in first]
                assert got == [b"%06d" % i for i in range(2000)]
                assert client.resumes == 1
            finally:
                client.close()
    finally:
        proc.terminate()
        assert proc.wait(WAIT) == 0
