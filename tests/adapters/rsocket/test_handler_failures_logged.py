"""A server handler that raises is logged on the server, once, at ERROR with
its traceback, naming the interaction, the stream and the route: the client
sees APPLICATION_ERROR, the operator sees why. An RSocketError the handler
raises on purpose is its answer, logged only at DEBUG."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from sansrs.adapters.rsocket import COMPOSITE_METADATA, Router, RSocketError, connect, serve
from sansrs.adapters.rsocket.types import Request, RoutedRequest

from sansrs.rsocket import ErrorCode

WAIT = 10.0
LOGGER = "sansrs.adapters.rsocket"


class Failing:
    def request_response(self, request: Request) -> bytes:
        if request.data == b"reject":
            raise RSocketError(ErrorCode.REJECTED, "not today")
        raise KeyError("missing-key")

    def request_stream(self, request: Request) -> Iterator[bytes]:
        if request.data == b"now":
            raise ZeroDivisionError("at once")

        def items() -> Iterator[bytes]:
            yield b"first"
            raise OSError("midway")

        return items()


def _errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


@pytest.mark.parametrize("loop", ["thread", "selector"])
def test_rsocket_handler_exception_is_logged_once_with_stream_and_traceback(
    loop: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    with serve("tcp://127.0.0.1:0", Failing(), loop=loop) as server, connect(server.url) as c:
        with pytest.raises(RSocketError, match="missing-key") as info:
            c.request_response(b"x", timeout=WAIT)
        assert info.value.error_code == ErrorCode.APPLICATION_ERROR
        (record,) = _errors(caplog)
        assert record.levelno == logging.ERROR
        assert "request_response on stream 1" in record.getMessage()
        assert record.exc_info is not None and isinstance(record.exc_info[1], KeyError)
        caplog.clear()

        with pytest.raises(RSocketError, match="at once"):
            list(c.request_stream(b"now", timeout=WAIT))
        (record,) = _errors(caplog)
        assert "request_stream on stream 3" in record.getMessage()
        assert record.exc_info is not None and isinstance(record.exc_info[1], ZeroDivisionError)
        caplog.clear()

        got: list[bytes] = []
        with pytest.raises(RSocketError, match="midway"):
            for p in c.request_stream(b"later", timeout=WAIT):
                got.append(p.data)
        assert got == [b"first"]
        (record,) = _errors(caplog)
        assert "stream 5" in record.getMessage()
        assert record.exc_info is not None and isinstance(record.exc_info[1], OSError)


def test_rsocket_handler_rsocket_error_is_an_answer_not_a_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    with (
        serve("tcp://127.0.0.1:0", Failing()) as server,
        connect(server.url) as c,
        pytest.raises(RSocketError, match="not today"),
    ):
        c.request_response(b"reject", timeout=WAIT)
    assert _errors(caplog) == []
    assert any("not today" in r.getMessage() for r in caplog.records)


def test_rsocket_routed_handler_exception_is_logged_with_its_route(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = Router()

    @router.response("users.{id}.get")
    def get_user(request: RoutedRequest) -> bytes:
        raise LookupError(f"no user {request.variables['id']}")

    caplog.set_level(logging.DEBUG, logger=LOGGER)
    with serve("tcp://127.0.0.1:0", router) as server, connect(
        server.url, metadata_mime_type=COMPOSITE_METADATA
    ) as c, pytest.raises(RSocketError, match="no user 42"):
        c.route("users.42.get").request_response(b"", timeout=WAIT)
    (record,) = _errors(caplog)
    assert "(route 'users.42.get')" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], LookupError)
