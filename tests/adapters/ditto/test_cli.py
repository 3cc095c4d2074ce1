"""``sansrs ditto serve|history|search`` as subprocesses over a real WebSocket."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.adapters.ditto.helpers import EXAMPLE_HISTORY, NS, counter_history, events_of

WAIT = 30.0


def sansrs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sansrs", *args],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=None if env is None else {**os.environ, **env},
    )


@contextmanager
def ditto_server(
    *extra: str, history: Path = EXAMPLE_HISTORY, url: str = "ws://127.0.0.1:0/ws/2"
) -> Iterator[str]:
    """``sansrs ditto serve`` on a free port; yields its URL once it printed READY."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sansrs", "ditto", "serve", url, "--history", str(history),
         *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True)
    reader.start()
    try:
        try:
            line = lines.get(timeout=WAIT)
        except queue.Empty:
            pytest.fail("sansrs ditto serve printed no READY line")
        ready, address = line.split()
        assert ready == "READY"
        assert address.startswith(url.split(":0/")[0]) and address.endswith("/ws/2")
        assert ":0/" not in address  # the real port
        yield address
    finally:
        proc.terminate()
        assert proc.wait(WAIT) == 0  # SIGTERM is a clean shutdown
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with ditto_server() as address:
        yield address


def json_lines(text: str) -> list[object]:
    return [json.loads(line) for line in text.splitlines()]


def test_help() -> None:
    for args in (("ditto",), ("ditto", "history"), ("ditto", "serve"), ("ditto", "search")):
        result = sansrs(*args, "--help")
        assert result.returncode == 0
        assert "usage: sansrs ditto" in result.stdout


def test_history_prints_events_as_json_lines(url: str) -> None:
    result = sansrs("ditto", "history", url, f"{NS}:thing-1")
    assert result.returncode == 0, result.stderr
    assert json_lines(result.stdout) == events_of("thing-1")
    assert result.stderr.strip().splitlines()[-1] == (
        f"history of {NS}:thing-1: events: 7 (complete)"
    )


def test_history_options(url: str) -> None:
    result = sansrs(
        "ditto", "history", url, f"{NS}:thing-1", "--from-revision", "2", "--to-revision", "6",
        "--filter", "gt(attributes/counter,2)", "--prefetch", "1",
    )
    assert result.returncode == 0, result.stderr
    assert [e["revision"] for e in json_lines(result.stdout)] == [4, 5, 6]  # type: ignore[index]
    result = sansrs(
        "ditto", "history", url, f"{NS}:thing-1", "--from-revision", "-2",
        "--from-timestamp", "2022-10-25T14:00:00Z", "--to-timestamp", "2022-10-25T14:05:00Z",
    )
    assert [e["revision"] for e in json_lines(result.stdout)] == [6]  # type: ignore[index]


def test_history_of_a_policy(url: str) -> None:
    result = sansrs("ditto", "history", url, f"{NS}:policy-1", "--policy")
    assert result.returncode == 0, result.stderr
    assert len(json_lines(result.stdout)) == 1


def test_failed_exits_2_with_the_ditto_error(url: str) -> None:
    result = sansrs("ditto", "history", url, f"{NS}:missing")
    assert result.returncode == 2
    assert "404 things:thing.notfound" in result.stderr
    assert "(failed)" in result.stderr


def test_bad_arguments_exit_1(url: str) -> None:
    assert sansrs("ditto", "history", url, "no-namespace").returncode == 1
    assert sansrs("ditto", "history", url, f"{NS}:t", "--password", "p").returncode == 1


def test_search(url: str) -> None:
    result = sansrs("ditto", "search", url, "--filter", 'eq(attributes/location,"attic")',
                    "--fields", "thingId,attributes/counter")
    assert result.returncode == 0, result.stderr
    expected = {"thingId": f"{NS}:thing-2", "attributes": {"counter": 10}}
    assert json_lines(result.stdout) == [expected]
    assert "search: things: 1 (complete)" in result.stderr


def test_serve_with_basic_auth() -> None:
    with ditto_server("--user", "ditto", "--password", "s3cret") as address:
        refused = sansrs("ditto", "history", address, f"{NS}:thing-2")
        wrong = sansrs("ditto", "history", address, f"{NS}:thing-2", "--user", "ditto",
                       "--password", "x")
        ok = sansrs("ditto", "history", address, f"{NS}:thing-2", "--user", "ditto",
                    env={"SANSRS_DITTO_PASSWORD": "s3cret"})
    assert refused.returncode == 3 and "HTTP 401" in refused.stderr
    assert wrong.returncode == 3 and "HTTP 401" in wrong.stderr
    assert ok.returncode == 0, ok.stderr
    assert json_lines(ok.stdout) == events_of("thing-2")


def test_serve_with_bearer_token() -> None:
    with ditto_server("--token", "t0ken") as address:
        refused = sansrs("ditto", "history", address, f"{NS}:thing-2", "--token", "other")
        ok = sansrs("ditto", "history", address, f"{NS}:thing-2", "--token", "t0ken")
    assert refused.returncode == 3 and "HTTP 401" in refused.stderr
    assert ok.returncode == 0, ok.stderr


def test_serve_refuses_a_bad_history_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"topic": "not a topic"}\n', encoding="utf-8")
    result = sansrs("ditto", "serve", "ws://127.0.0.1:0/ws/2", "--history", str(bad))
    assert result.returncode == 1
    assert "bad.jsonl:1" in result.stderr


def test_unreachable_server_exits_3() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        result = sansrs("ditto", "history", f"ws://127.0.0.1:{port}/ws/2", f"{NS}:t")
    assert result.returncode == 3
    assert "error:" in result.stderr


def test_history_into_a_closed_pipe_stops_quietly(tmp_path: Path) -> None:
    # `sansrs ditto history ... | head -1`: the reader closes early; the
    # history is far bigger than a pipe buffer, so the writer does hit EPIPE.
    history = tmp_path / "big.jsonl"
    history.write_text(
        "".join(json.dumps(e) + "\n" for e in counter_history("big", 20_000)), encoding="utf-8"
    )
    with ditto_server(history=history) as address:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sansrs", "ditto", "history", address, f"{NS}:big"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        proc.stdout.close()
        assert proc.wait(WAIT) == 0
        assert json.loads(first)["revision"] == 1
        assert "Traceback" not in proc.stderr.read()
        proc.stderr.close()


def test_wss_serve_and_history_with_certificate_files(tmp_path: Path) -> None:
    import trustme

    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    certfile, cafile = tmp_path / "server.pem", tmp_path / "ca.pem"
    server_cert.private_key_and_cert_chain_pem.write_to_path(str(certfile))
    ca.cert_pem.write_to_path(str(cafile))
    with ditto_server("--certfile", str(certfile), url="wss://127.0.0.1:0/ws/2") as address:
        assert address.startswith("wss://127.0.0.1:")
        ok = sansrs("ditto", "history", address, f"{NS}:thing-2", "--cafile", str(cafile))
        untrusted = sansrs("ditto", "history", address, f"{NS}:thing-2")
    assert ok.returncode == 0, ok.stderr
    assert json_lines(ok.stdout) == events_of("thing-2")
    assert untrusted.returncode == 3
    assert untrusted.stderr.startswith("error: TLS: the server's certificate is not trusted")


@pytest.mark.timeout(60)
def test_history_follow_switches_to_live_events_and_survives_a_drop(tmp_path: Path) -> None:
    from tests.adapters.ditto.fake_ditto import FakeDitto

    thing = f"{NS}:thing-1"
    events = counter_history("thing-1", 12)
    issued = tmp_path / "issued"
    script = tmp_path / "token.py"  # a token command: counts its runs
    script.write_text(f"import pathlib\np = pathlib.Path({str(issued)!r})\n"
                      "n = len(p.read_text()) if p.exists() else 0\n"
                      "p.write_text('x' * (n + 1))\nprint(f't{n}')\n")
    with FakeDitto({thing: events[:5]}, token_lifetime=2.0) as ditto:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sansrs", "ditto", "history", ditto.url, thing, "--follow",
             "--token-command", f"{sys.executable} {script}", "--token-lifetime", "2",
             "--refresh-margin", "1.5"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        out = proc.stdout
        threading.Thread(target=lambda: [lines.put(line) for line in out], daemon=True).start()

        def revisions(n: int) -> list[int]:
            return [json.loads(lines.get(timeout=WAIT))["revision"] for _ in range(n)]

        try:
            got = revisions(5)  # the history
            first = ditto.connection(0)
            ditto.wait_for(lambda: first.live)
            for event in events[5:8]:
                ditto.publish(event, entity=thing)
            got += revisions(3)  # live
            ditto.wait_for(lambda: len(first.refreshed_tokens) >= 1)  # --token-command again
            ditto.drop_all()
            second = ditto.connection(1)
            ditto.wait_for(lambda: second.live)
            for event in events[8:]:
                ditto.publish(event, entity=thing)
            got += revisions(4)
        finally:
            proc.send_signal(2)  # SIGINT: the user stops following
            code = proc.wait(WAIT)
    assert got == list(range(1, 13))  # no gap, no duplicate, across the seam and the drop
    assert code == 130
    assert first.refreshed_tokens[0].startswith("t") and len(issued.read_text()) >= 3


def test_history_follow_refuses_an_end_and_a_failing_token_command_exits_3(url: str) -> None:
    ended = sansrs("ditto", "history", url, f"{NS}:thing-1", "--follow", "--to-revision", "3")
    assert ended.returncode == 1 and "--follow has no end" in ended.stderr
    failing = sansrs("ditto", "history", url, f"{NS}:thing-1", "--token-command",
                     f"{sys.executable} -c 'import sys; sys.exit(4)'")
    assert failing.returncode == 3 and "--token-command failed" in failing.stderr
    both = sansrs("ditto", "history", url, f"{NS}:thing-1", "--token", "t",
                  "--token-command", "echo t")
    assert both.returncode == 1 and "not both" in both.stderr


@pytest.mark.timeout(60)
def test_search_reconnect_goes_on_after_the_last_thing() -> None:
    from tests.adapters.ditto.fake_ditto import FakeDitto

    things = {f"{NS}:t-{k:02d}": counter_history(f"t-{k:02d}", 1) for k in range(30)}
    # the first connection is cut after its created and 3 pages; the second is spared
    with FakeDitto(things, drop_after=[4, None]) as ditto:
        done = sansrs("ditto", "search", ditto.url, "--options", "size(5)", "--reconnect")
    assert done.returncode == 0, done.stderr
    assert [t["thingId"] for t in json_lines(done.stdout)] == sorted(things)  # type: ignore[index]
    assert len(ditto.connections) == 2
