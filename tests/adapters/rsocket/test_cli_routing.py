"""``sansrs request --route/--auth-*/--data-mime`` against ``sansrs serve``'s
demo routes (docs/extensions.md): answers, errors and exit codes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.cli.commands import sansrs, served


def _server(*extra: str) -> Iterator[str]:
    with served("tcp://127.0.0.1:0", *extra) as address:
        yield address


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    yield from _server()


@pytest.fixture(scope="module")
def secured() -> Iterator[str]:
    yield from _server("--auth-simple", "ann:pw", "--auth-bearer", "tok")


def test_cli_route_echo_answers_the_data_unchanged(url: str) -> None:
    result = sansrs("request", url, "--rr", "hello", "--route", "echo")
    assert (result.returncode, result.stdout) == (0, "hello\n"), result.stderr


def test_cli_route_stream_and_channel(url: str) -> None:
    result = sansrs("request", url, "--stream", '{"n": 3, "size": 2}', "--route", "stream")
    assert result.stdout.splitlines() == ["00", "01", "02"], result.stderr
    result = sansrs("request", url, "--channel", "a", "b", "--route", "channel")
    assert result.stdout.splitlines() == ["a", "b"], result.stderr


def test_cli_unknown_route_exits_2_naming_it(url: str) -> None:
    result = sansrs("request", url, "--rr", "x", "--route", "no.such")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: APPLICATION_ERROR (0x201): no handler for route 'no.such'"
    )


def test_cli_error_route_is_the_contract_rejection(url: str) -> None:
    result = sansrs("request", url, "--rr", "please", "--route", "error")
    assert result.returncode == 2 and "rejected: please" in result.stderr


def test_cli_data_mime_travels_in_setup_and_request(url: str) -> None:
    result = sansrs("request", url, "--rr", "{}", "--route", "echo", "--data-mime",
                    "application/json")
    assert (result.returncode, result.stdout) == (0, "{}\n"), result.stderr


def test_cli_requests_without_route_keep_the_demo_behaviour(url: str) -> None:
    result = sansrs("request", url, "--rr", "hello", "-m", "meta")
    assert result.stdout == "hello\t[metadata meta]\n"


def test_cli_metadata_cannot_be_combined_with_route(url: str) -> None:
    result = sansrs("request", url, "--rr", "x", "--route", "echo", "-m", "raw")
    assert result.returncode == 1 and "--metadata cannot be combined" in result.stderr


def test_cli_simple_and_bearer_credentials(secured: str) -> None:
    result = sansrs("request", secured, "--rr", "x", "--route", "whoami",
                    "--auth-simple", "ann:pw")
    assert (result.returncode, result.stdout) == (0, "ann\n"), result.stderr
    result = sansrs("request", secured, "--rr", "x", "--route", "echo", "--auth-bearer", "tok")
    assert (result.returncode, result.stdout) == (0, "x\n"), result.stderr


def test_cli_rejected_request_exits_non_zero_with_the_peers_error(secured: str) -> None:
    result = sansrs("request", secured, "--rr", "x", "--route", "echo")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: REJECTED (0x202): authentication required"
    result = sansrs("request", secured, "--rr", "x")  # no route: the fallback needs them too
    assert result.returncode == 2 and "authentication required" in result.stderr


def test_cli_wrong_password_is_rejected_setup(secured: str) -> None:
    result = sansrs("request", secured, "--rr", "x", "--route", "echo",
                    "--auth-simple", "ann:nope")
    assert result.returncode == 3
    assert "REJECTED_SETUP (0x3): unknown credentials" in result.stderr


def test_cli_serve_refuses_auth_for_rsio() -> None:
    result = sansrs("serve", "tcp://127.0.0.1:0", "--protocol", "rsio", "--auth-bearer", "t")
    assert result.returncode == 1 and "--protocol rsocket" in result.stderr
