from __future__ import annotations

import json

import pytest
from sansrs.adapters.rsocket.demo_contract import (
    DemoRejected,
    DemoState,
    parse_stream_request,
    request_response,
    stream_items,
)


def test_anything_else_is_echoed_with_metadata() -> None:
    assert request_response(DemoState(), b"hello", b"md") == (b"hello", b"md")
    assert request_response(DemoState(), b"", None) == (b"", None)


def test_fnf_count_counts_this_connection_only() -> None:
    state, other = DemoState(), DemoState()
    for _ in range(3):
        state.record_fire_and_forget()
    assert request_response(state, b"fnf-count", None) == (b"3", None)
    assert request_response(other, b"fnf-count", None) == (b"0", None)


def test_metadata_push_count_and_last() -> None:
    state = DemoState()
    assert request_response(state, b"mp-last", None) == (b"last=", None)
    state.record_metadata_push(b"one")
    state.record_metadata_push(b"two")
    assert request_response(state, b"mp-count", None) == (b"2", None)
    assert request_response(state, b"mp-last", b"ignored") == (b"last=two", None)


def test_error_prefix_is_rejected_with_the_data_in_the_message() -> None:
    with pytest.raises(DemoRejected) as info:
        request_response(DemoState(), b"error: please", b"m")
    assert str(info.value) == "rejected: error: please"


def test_stats_is_json_of_every_counter() -> None:
    state = DemoState()
    state.record_fire_and_forget()
    state.record_metadata_push(b"x")
    request_response(state, b"echo", None)
    data, metadata = request_response(state, b"stats", None)
    assert metadata is None
    assert json.loads(data) == {
        "fire_and_forget": 1,
        "metadata_push": 1,
        "request_channel": 0,
        "request_response": 2,
        "request_stream": 0,
    }


def test_stream_items_are_zero_padded_decimals() -> None:
    assert list(stream_items(3, 4)) == [b"0000", b"0001", b"0002"]
    assert list(stream_items(0, 4)) == []
    assert list(stream_items(12, 1))[-1] == b"11"  # wider than size: not truncated


def test_stream_items_are_lazy() -> None:
    items = stream_items(10**12, 16)
    assert next(items) == b"0" * 16


def test_parse_stream_request() -> None:
    assert parse_stream_request(b'{"n": 1000, "size": 16}') == (1000, 16)


@pytest.mark.parametrize(
    "data",
    [b"", b"nope", b"[1]", b'{"n": 1}', b'{"n": "1", "size": 2}', b'{"n": -1, "size": 2}',
     b'{"n": true, "size": 2}', b'{"n": 1, "size": 999999999}'],
)
def test_parse_stream_request_rejects_malformed(data: bytes) -> None:
    with pytest.raises(DemoRejected):
        parse_stream_request(data)
