from __future__ import annotations

import pytest
from sansrs.adapters.transport import urls
from sansrs.adapters.transport.urls import RESERVED_SCHEMES, Endpoint, UnsupportedScheme, parse_url


def test_tcp_url_parses_host_and_port() -> None:
    assert parse_url("tcp://127.0.0.1:7878") == Endpoint("tcp", "127.0.0.1", 7878)


def test_scheme_is_case_insensitive_and_trailing_slash_allowed() -> None:
    assert parse_url("TCP://localhost:1/") == Endpoint("tcp", "localhost", 1)


def test_ipv6_host_round_trips_through_url() -> None:
    ep = parse_url("tcp://[::1]:9000")
    assert ep.host == "::1"
    assert ep.url == "tcp://[::1]:9000"


def test_port_zero_means_any_and_with_port_replaces_it() -> None:
    ep = parse_url("tcp://127.0.0.1:0")
    assert ep.port == 0
    assert str(ep.with_port(4242)) == "tcp://127.0.0.1:4242"


def test_reserved_schemes_say_not_implemented(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every scheme once reserved (tls, unix, ws, wss) is served now; the
    # mechanism stays for the next one.
    assert not RESERVED_SCHEMES
    monkeypatch.setattr(urls, "RESERVED_SCHEMES", frozenset({"quic"}))
    with pytest.raises(UnsupportedScheme, match="reserved"):
        parse_url("quic://127.0.0.1:1")


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("http://127.0.0.1:1", "unknown URL scheme"),
        ("127.0.0.1:1", "unknown URL scheme"),
        ("tcp://127.0.0.1", "missing port"),
        ("tcp://:80", "missing host"),
        ("tcp://127.0.0.1:99999", "invalid port"),
        ("tcp://127.0.0.1:1/path", "no path"),
        ("tcp://127.0.0.1:1?x=1", "no path"),
    ],
)
def test_bad_urls_are_rejected_with_a_reason(url: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_url(url)


def test_non_string_url_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_url(b"tcp://127.0.0.1:1")  # type: ignore[arg-type]
