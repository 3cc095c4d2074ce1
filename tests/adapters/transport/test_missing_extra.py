"""Without the ``ws`` extra (h11, wsproto), ``ws://`` and ``wss://`` fail
with :class:`MissingExtraError` naming the extra to install, for clients,
servers and Ditto alike; other schemes never need it."""

from __future__ import annotations

import sys

import pytest
from sansrs.adapters.transport import MissingExtraError, listen, open_transport


@pytest.fixture(params=["h11", "wsproto"])
def without(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    # None in sys.modules: "import h11" raises ModuleNotFoundError(name="h11"),
    # as it does where the package is not installed.
    monkeypatch.setitem(sys.modules, str(request.param), None)
    return str(request.param)


def test_transport_ws_client_without_the_extra_names_it(without: str) -> None:
    with pytest.raises(MissingExtraError) as info:
        open_transport("ws://127.0.0.1:1/rsocket", timeout=1)
    message = str(info.value)
    assert f"ws:// needs the 'ws' extra ({without} is not installed)" in message
    assert "pip install 'sansrs[ws]'" in message
    assert isinstance(info.value, ImportError) and info.value.extra == "ws"


def test_transport_wss_server_without_the_extra_names_it(without: str) -> None:
    with pytest.raises(MissingExtraError, match=r"wss:// needs the 'ws' extra.*sansrs\[ws\]"):
        listen("wss://127.0.0.1:0/rsocket")


def test_transport_ditto_without_the_extra_names_it(without: str) -> None:
    from sansrs.adapters.ditto import connect

    with pytest.raises(MissingExtraError, match=r"pip install 'sansrs\[ws\]'"):
        connect("ws://127.0.0.1:1/ws/2", connect_timeout=1)


def test_transport_tcp_does_not_need_the_extra(without: str) -> None:
    listener = listen("tcp://127.0.0.1:0")
    try:
        assert listener.endpoint.port != 0
    finally:
        listener.close()
