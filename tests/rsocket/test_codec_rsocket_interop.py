"""Cross-check the codec against an independent implementation: rsocket-py.

Both directions, every frame type both support (rsocket-py has no concrete
EXT frame): frames we encode parse with rsocket-py's parser to the same
fields, and frames rsocket-py serializes decode with ours to the same fields.

rsocket-py's own quirks, allowed for below: it cannot tell "no metadata" from
"empty metadata" (it sets M only for non-empty metadata), sets N on any
PAYLOAD with content, packs MIME lengths as a signed byte (<= 127), knows
only its own ErrorCode members, and drops METADATA_PUSH on a non-0 stream.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rsocket import error_codes as rs_errors  # rsocket-py, a pinned test extra
from rsocket import frame as rs_frame
from rsocket import frame_parser as rs_parser

from sansrs.rsocket import (
    MAX_POSITION,
    MAX_REQUEST_N,
    MAX_STREAM_ID,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    Frame,
    FrameReader,
    KeepaliveFrame,
    LeaseFrame,
    MetadataPushFrame,
    PayloadFrame,
    RemoteProtocolError,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    decode_frame,
    encode_frame,
    encode_frames_prefixed,
)
from tests.rsocket.strategies import FRAME_STRATEGIES, frames

pytestmark = pytest.mark.interop

RS_ERROR_CODES = [int(c) for c in rs_errors.ErrorCode]


def _meta(metadata: bytes | None) -> bytes:
    return metadata or b""


def _same_fields(ours: Any, theirs: Any) -> None:
    """Assert an rsocket-py frame carries the same fields as one of ours."""
    assert int(theirs.frame_type) == int(ours.frame_type)
    assert theirs.stream_id == ours.stream_id
    assert bool(theirs.flags_ignore) == ours.ignore
    if isinstance(ours, SetupFrame):
        assert (theirs.major_version, theirs.minor_version) == (
            ours.major_version,
            ours.minor_version,
        )
        assert theirs.keep_alive_milliseconds == ours.keepalive_interval
        assert theirs.max_lifetime_milliseconds == ours.max_lifetime
        assert theirs.flags_resume == (ours.resume_token is not None)
        if ours.resume_token is not None:
            assert theirs.resume_identification_token == ours.resume_token
        assert theirs.flags_lease == ours.lease
        assert theirs.metadata_encoding == ours.metadata_mime_type.encode()
        assert theirs.data_encoding == ours.data_mime_type.encode()
    elif isinstance(ours, LeaseFrame):
        assert theirs.time_to_live == ours.ttl
        assert theirs.number_of_requests == ours.number_of_requests
    elif isinstance(ours, KeepaliveFrame):
        assert theirs.flags_respond == ours.respond
        assert theirs.last_received_position == ours.last_received_position
    elif isinstance(ours, (RequestStreamFrame, RequestChannelFrame)):
        assert theirs.initial_request_n == ours.initial_request_n
        assert theirs.flags_follows == ours.follows
        if isinstance(ours, RequestChannelFrame):
            assert theirs.flags_complete == ours.complete
    elif isinstance(ours, (RequestResponseFrame, RequestFnfFrame)):
        assert theirs.flags_follows == ours.follows
    elif isinstance(ours, RequestNFrame):
        assert theirs.request_n == ours.request_n
    elif isinstance(ours, PayloadFrame):
        assert (theirs.flags_follows, theirs.flags_complete, theirs.flags_next) == (
            ours.follows,
            ours.complete,
            ours.next,
        )
    elif isinstance(ours, ErrorFrame):
        assert int(theirs.error_code) == int(ours.error_code)
    elif isinstance(ours, ResumeFrame):
        assert (theirs.major_version, theirs.minor_version) == (
            ours.major_version,
            ours.minor_version,
        )
        assert theirs.resume_identification_token == ours.resume_token
        assert theirs.last_server_position == ours.last_received_server_position
        assert theirs.first_client_position == ours.first_available_client_position
    elif isinstance(ours, ResumeOkFrame):
        assert theirs.last_received_client_position == ours.last_received_client_position
    else:
        assert isinstance(ours, (CancelFrame, MetadataPushFrame))
    if hasattr(ours, "metadata"):
        assert bool(theirs.flags_metadata) == (ours.metadata is not None)
        assert theirs.metadata == _meta(ours.metadata)
    if hasattr(ours, "data") and not isinstance(ours, (ResumeFrame,)):
        assert theirs.data == ours.data


# -- ours -> rsocket-py ------------------------------------------------------

_rs_mime = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=127)

#: Our strategies, narrowed to what rsocket-py can represent.
OURS_FOR_RSOCKET_PY: dict[type, st.SearchStrategy[Any]] = {
    **{
        cls: FRAME_STRATEGIES[cls]
        for cls in (
            LeaseFrame,
            KeepaliveFrame,
            RequestResponseFrame,
            RequestFnfFrame,
            RequestStreamFrame,
            RequestChannelFrame,
            RequestNFrame,
            CancelFrame,
            PayloadFrame,
            ResumeFrame,
            ResumeOkFrame,
        )
    },
    SetupFrame: st.builds(
        SetupFrame,
        keepalive_interval=st.integers(1, MAX_REQUEST_N),
        max_lifetime=st.integers(1, MAX_REQUEST_N),
        metadata_mime_type=_rs_mime,
        data_mime_type=_rs_mime,
        metadata=st.none() | st.binary(max_size=20),
        data=st.binary(max_size=20),
        resume_token=st.none() | st.binary(max_size=20),
        lease=st.booleans(),
        major_version=st.integers(0, 0xFFFF),
        minor_version=st.integers(0, 0xFFFF),
        ignore=st.booleans(),
    ),
    ErrorFrame: st.builds(
        ErrorFrame,
        stream_id=st.integers(0, MAX_STREAM_ID),
        error_code=st.sampled_from(RS_ERROR_CODES),
        data=st.binary(max_size=20),
        ignore=st.booleans(),
    ),
    MetadataPushFrame: st.builds(
        MetadataPushFrame, metadata=st.binary(max_size=20), ignore=st.booleans()
    ),
}


@pytest.mark.parametrize("cls", list(OURS_FOR_RSOCKET_PY), ids=lambda c: c.__name__)
@given(data=st.data())
def test_rsocket_py_parses_what_we_encode(cls: type, data: Any) -> None:
    ours = data.draw(OURS_FOR_RSOCKET_PY[cls])
    theirs = rs_frame.parse_or_ignore(encode_frame(ours))
    assert theirs is not None
    _same_fields(ours, theirs)


def _drain(agen: Any) -> list[Any]:
    """Run rsocket-py's async-generator parser to completion without a loop
    (it never awaits anything)."""
    out = []
    while True:
        try:
            agen.__anext__().send(None)
        except StopIteration as item:
            out.append(item.value)
        except StopAsyncIteration:
            return out


@given(st.lists(frames(PayloadFrame, RequestNFrame, CancelFrame, KeepaliveFrame), max_size=8))
def test_rsocket_py_stream_parser_reads_our_prefixed_stream(ours: list[Frame]) -> None:
    parser = rs_parser.FrameParser()
    theirs = _drain(parser.receive_data(encode_frames_prefixed(ours)))
    assert len(theirs) == len(ours)
    for mine, other in zip(ours, theirs, strict=True):
        _same_fields(mine, other)


# -- rsocket-py -> ours ------------------------------------------------------


def _rs(cls_name: str, **fields: Any) -> Any:
    frame = getattr(rs_frame, cls_name)()
    for name, value in fields.items():
        setattr(frame, name, value)
    return frame


_bin = st.binary(max_size=20)
_sid = st.integers(0, MAX_STREAM_ID)
_req_sid = st.integers(1, MAX_STREAM_ID)
_n = st.integers(1, MAX_REQUEST_N)
_pos = st.integers(0, MAX_POSITION)
_ver = st.integers(0, 0xFFFF)
_bool = st.booleans()


@st.composite
def rsocket_py_frames(draw: st.DrawFn) -> Any:
    kind = draw(
        st.sampled_from(
            [
                "setup",
                "lease",
                "keepalive",
                "request_response",
                "request_fnf",
                "request_stream",
                "request_channel",
                "request_n",
                "cancel",
                "payload",
                "error",
                "metadata_push",
                "resume",
                "resume_ok",
            ]
        )
    )
    common = {"flags_ignore": draw(_bool)}
    if kind == "setup":
        token = draw(st.none() | _bin)
        return _rs(
            "SetupFrame",
            major_version=draw(_ver),
            minor_version=draw(_ver),
            keep_alive_milliseconds=draw(_n),
            max_lifetime_milliseconds=draw(_n),
            flags_resume=token is not None,
            token_length=len(token or b""),
            resume_identification_token=token or b"",
            flags_lease=draw(_bool),
            metadata_encoding=draw(_rs_mime).encode(),
            data_encoding=draw(_rs_mime).encode(),
            metadata=draw(_bin),
            data=draw(_bin),
            **common,
        )
    if kind == "lease":
        return _rs(
            "LeaseFrame",
            time_to_live=draw(st.integers(0, MAX_REQUEST_N)),
            number_of_requests=draw(st.integers(0, MAX_REQUEST_N)),
            metadata=draw(_bin),
            **common,
        )
    if kind == "keepalive":
        return _rs(
            "KeepAliveFrame",
            flags_respond=draw(_bool),
            last_received_position=draw(_pos),
            data=draw(_bin),
            **common,
        )
    if kind in ("request_response", "request_fnf"):
        cls = "RequestResponseFrame" if kind == "request_response" else "RequestFireAndForgetFrame"
        return _rs(
            cls,
            stream_id=draw(_req_sid),
            flags_follows=draw(_bool),
            metadata=draw(_bin),
            data=draw(_bin),
            **common,
        )
    if kind == "request_stream":
        return _rs(
            "RequestStreamFrame",
            stream_id=draw(_req_sid),
            initial_request_n=draw(_n),
            flags_follows=draw(_bool),
            metadata=draw(_bin),
            data=draw(_bin),
            **common,
        )
    if kind == "request_channel":
        return _rs(
            "RequestChannelFrame",
            stream_id=draw(_req_sid),
            initial_request_n=draw(_n),
            flags_follows=draw(_bool),
            flags_complete=draw(_bool),
            metadata=draw(_bin),
            data=draw(_bin),
            **common,
        )
    if kind == "request_n":
        return _rs("RequestNFrame", stream_id=draw(_sid), request_n=draw(_n), **common)
    if kind == "cancel":
        return _rs("CancelFrame", stream_id=draw(_sid), **common)
    if kind == "payload":
        return _rs(
            "PayloadFrame",
            stream_id=draw(_sid),
            flags_follows=draw(_bool),
            flags_complete=draw(_bool),
            flags_next=draw(_bool),
            metadata=draw(_bin),
            data=draw(_bin),
            **common,
        )
    if kind == "error":
        return _rs(
            "ErrorFrame",
            stream_id=draw(_sid),
            error_code=rs_errors.ErrorCode(draw(st.sampled_from(RS_ERROR_CODES))),
            data=draw(_bin),
            **common,
        )
    if kind == "metadata_push":
        # Non-empty: see test_rsocket_py_empty_metadata_push_lacks_the_m_flag.
        return _rs("MetadataPushFrame", metadata=draw(_bin.filter(bool)), **common)
    if kind == "resume":
        return _rs(
            "ResumeFrame",
            major_version=draw(_ver),
            minor_version=draw(_ver),
            resume_identification_token=draw(_bin),
            last_server_position=draw(_pos),
            first_client_position=draw(_pos),
            **common,
        )
    return _rs("ResumeOKFrame", last_received_client_position=draw(_pos), **common)


def _expected_metadata(theirs: Any) -> bytes | None:
    # rsocket-py sets M only for non-empty metadata.
    return theirs.metadata or None


def _check_decoded(theirs: Any, ours: Frame) -> None:
    assert int(ours.frame_type) == int(theirs.frame_type)
    assert ours.stream_id == theirs.stream_id
    assert ours.ignore == theirs.flags_ignore
    if isinstance(ours, SetupFrame):
        assert (ours.major_version, ours.minor_version) == (
            theirs.major_version,
            theirs.minor_version,
        )
        assert ours.keepalive_interval == theirs.keep_alive_milliseconds
        assert ours.max_lifetime == theirs.max_lifetime_milliseconds
        assert ours.resume_token == (
            theirs.resume_identification_token if theirs.flags_resume else None
        )
        assert ours.lease == theirs.flags_lease
        assert ours.metadata_mime_type.encode() == theirs.metadata_encoding
        assert ours.data_mime_type.encode() == theirs.data_encoding
        assert ours.metadata == _expected_metadata(theirs)
        assert ours.data == theirs.data
    elif isinstance(ours, LeaseFrame):
        assert (ours.ttl, ours.number_of_requests) == (
            theirs.time_to_live,
            theirs.number_of_requests,
        )
        assert ours.metadata == _expected_metadata(theirs)
    elif isinstance(ours, KeepaliveFrame):
        assert ours.respond == theirs.flags_respond
        assert ours.last_received_position == theirs.last_received_position
        assert ours.data == theirs.data
    elif isinstance(ours, (RequestResponseFrame, RequestFnfFrame)):
        assert ours.follows == theirs.flags_follows
        assert (ours.metadata, ours.data) == (_expected_metadata(theirs), theirs.data)
    elif isinstance(ours, (RequestStreamFrame, RequestChannelFrame)):
        assert ours.initial_request_n == theirs.initial_request_n
        assert ours.follows == theirs.flags_follows
        if isinstance(ours, RequestChannelFrame):
            assert ours.complete == theirs.flags_complete
        assert (ours.metadata, ours.data) == (_expected_metadata(theirs), theirs.data)
    elif isinstance(ours, RequestNFrame):
        assert ours.request_n == theirs.request_n
    elif isinstance(ours, PayloadFrame):
        assert (ours.follows, ours.complete) == (theirs.flags_follows, theirs.flags_complete)
        # rsocket-py sets N whenever there is data or metadata.
        assert ours.next == bool(theirs.flags_next or theirs.data or theirs.metadata)
        assert (ours.metadata, ours.data) == (_expected_metadata(theirs), theirs.data)
    elif isinstance(ours, ErrorFrame):
        assert ours.error_code == int(theirs.error_code)
        assert ours.data == theirs.data
    elif isinstance(ours, MetadataPushFrame):
        assert ours.metadata == theirs.metadata
    elif isinstance(ours, ResumeFrame):
        assert ours.resume_token == theirs.resume_identification_token
        assert ours.last_received_server_position == theirs.last_server_position
        assert ours.first_available_client_position == theirs.first_client_position
    elif isinstance(ours, ResumeOkFrame):
        assert ours.last_received_client_position == theirs.last_received_client_position
    else:
        assert isinstance(ours, CancelFrame)


@given(rsocket_py_frames())
def test_we_decode_what_rsocket_py_serializes(theirs: Any) -> None:
    ours = decode_frame(theirs.serialize())
    _check_decoded(theirs, ours)


@given(st.lists(rsocket_py_frames(), max_size=8), st.integers(1, 64))
def test_our_reader_reads_rsocket_py_prefixed_stream(theirs: list[Any], chunk: int) -> None:
    stream = b"".join(rs_frame.serialize_with_frame_size_header(f) for f in theirs)
    reader = FrameReader()
    ours: list[Frame] = []
    for i in range(0, len(stream), chunk):
        ours += reader.feed(stream[i : i + chunk])
    assert len(ours) == len(theirs)
    for other, mine in zip(theirs, ours, strict=True):
        _check_decoded(other, mine)


def test_rsocket_py_empty_metadata_push_lacks_the_m_flag() -> None:
    """rsocket-py sets M only for non-empty metadata, so its empty METADATA_PUSH
    has no M flag, which the spec's layout (|0|1|) forbids: we reject it with
    CONNECTION_ERROR, as for any METADATA_PUSH without M."""
    data = _rs("MetadataPushFrame", metadata=b"").serialize()
    assert data == bytes.fromhex("00000000 3000")
    with pytest.raises(RemoteProtocolError) as info:
        decode_frame(data)
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
