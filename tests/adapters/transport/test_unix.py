"""Unix domain sockets (``unix:///path``): URLs, the socket file's life
cycle, and the RSocket API on both driver loops."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from sansrs.adapters.rsocket.client import connect
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.rsocket.server import serve
from sansrs.adapters.rsocket.types import Payload
from sansrs.adapters.transport import listen, open_transport
from sansrs.adapters.transport.unix import UnixTransport
from sansrs.adapters.transport.urls import Endpoint, parse_url

WAIT = 10.0


def test_unix_url_is_an_absolute_path_and_round_trips() -> None:
    ep = parse_url("unix:///run/sansrs/rs.sock")
    assert ep == Endpoint("unix", "", 0, "/run/sansrs/rs.sock")
    assert ep.url == "unix:///run/sansrs/rs.sock" and str(ep) == ep.url


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("unix://host/x.sock", "no host"),
        ("unix:relative.sock", "absolute"),
        ("unix:///", "absolute"),
        ("unix:///x.sock?a=1", "no query"),
    ],
)
def test_bad_unix_urls_are_refused(url: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_url(url)


def test_listener_owns_its_socket_file(tmp_path: Path) -> None:
    path = tmp_path / "a.sock"
    listener = listen(f"unix://{path}")
    assert path.is_socket()
    # A second server on a live socket is refused, the first one's file kept.
    with pytest.raises(OSError, match="listening"):
        listen(f"unix://{path}")
    transport = open_transport(f"unix://{path}")
    assert isinstance(transport, UnixTransport) and transport.peer == f"unix:{path}"
    transport.close()
    listener.close()
    assert not path.exists()


def test_stale_socket_file_is_replaced_but_other_files_are_not(tmp_path: Path) -> None:
    path = tmp_path / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens: a crashed server's leftover
    listener = listen(f"unix://{path}")
    listener.close()
    regular = tmp_path / "file.txt"
    regular.write_text("keep me")
    with pytest.raises(FileExistsError):
        listen(f"unix://{regular}")
    assert regular.read_text() == "keep me"


def test_closing_does_not_remove_a_newer_servers_file(tmp_path: Path) -> None:
    path = tmp_path / "x.sock"
    first = listen(f"unix://{path}")
    os.unlink(path)  # someone removed it and a new server took the path
    second = listen(f"unix://{path}")
    first.close()
    assert path.is_socket()
    second.close()
    assert not path.exists()


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_over_unix_sockets(loop: str, tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/rs.sock"
    with (
        serve(url, handler_factory=DemoHandler, loop=loop) as server,
        connect(url, loop=loop) as client,
    ):
        assert server.url == url
        assert client.request_response(b"over unix", timeout=WAIT) == Payload(b"over unix")
        assert client.peer_address == f"unix:{tmp_path}/rs.sock"


def test_connecting_to_a_missing_socket_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        connect(f"unix://{tmp_path}/nobody.sock")
