"""The WebSocket data-frame fast paths (adapters/ws_frames.py) against
wsproto: the same bytes out, and the same messages in, whatever the mix of
frames and however the bytes are chunked; anything unusual goes to wsproto."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st
from sansrs.adapters.transport.websocket.frames import (
    FrameSplitter,
    KeySource,
    encode_data_frame,
    mask,
)
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, Event, Message, Ping, TextMessage
from wsproto.frame_protocol import FrameProtocol


def wsproto_messages(role: ConnectionType, data: bytes) -> list[tuple[int, bytes]]:
    """What wsproto alone makes of ``data``: whole messages, (opcode, payload)."""
    conn = Connection(role)
    conn.receive_data(data)
    return _messages(list(conn.events()))


def _messages(events: list[Event]) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    parts: list[bytes] = []
    for ev in events:
        if isinstance(ev, Message):
            chunk = ev.data.encode() if isinstance(ev.data, str) else bytes(ev.data)
            parts.append(chunk)
            if ev.message_finished:
                out.append((1 if isinstance(ev, TextMessage) else 2, b"".join(parts)))
                parts = []
        elif isinstance(ev, Ping):
            out.append((9, bytes(ev.payload)))
    return out


class Collector:
    """A splitter whose wsproto side is a real wsproto connection."""

    def __init__(self, role: ConnectionType, max_payload: int = 1 << 20) -> None:
        self.conn = Connection(role)
        self.got: list[tuple[int, bytes]] = []
        self.handed: list[bytes] = []
        self.splitter = FrameSplitter(
            masked=role is ConnectionType.SERVER,
            max_payload=max_payload,
            on_message=lambda op, p: self.got.append((op, p)),
            to_wsproto=self._to_wsproto,
        )

    def _to_wsproto(self, data: bytes) -> None:
        self.handed.append(data)
        self.conn.receive_data(data)
        self.got += _messages(list(self.conn.events()))


def frames_from(role_sending: ConnectionType, events: list[Event]) -> bytes:
    proto = FrameProtocol(client=role_sending is ConnectionType.CLIENT, extensions=[])
    out = bytearray()
    for ev in events:
        if isinstance(ev, BytesMessage | TextMessage):
            out += proto.send_data(ev.data, ev.message_finished)
        elif isinstance(ev, Ping):
            out += proto.ping(ev.payload)
    return bytes(out)


EVENTS = st.lists(
    st.one_of(
        st.builds(BytesMessage, data=st.binary(max_size=300)),
        # 64-bit lengths: one big message, cheap to draw
        st.integers(65536, 65600).map(lambda n: BytesMessage(data=b"\xa5" * n)),
        st.builds(TextMessage, data=st.text(max_size=50)),
        st.builds(Ping, payload=st.binary(max_size=125)),
    ),
    max_size=12,
)


@settings(max_examples=80, deadline=None)
@given(EVENTS, st.data(), st.sampled_from([ConnectionType.CLIENT, ConnectionType.SERVER]))
def test_splitter_gives_the_messages_wsproto_gives_in_any_chunking(
    events: list[Event], data: st.DataObject, receiver: ConnectionType
) -> None:
    sender = ConnectionType.SERVER if receiver is ConnectionType.CLIENT else ConnectionType.CLIENT
    wire = frames_from(sender, events)
    expected = wsproto_messages(receiver, wire)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=6), label="cuts"))
    collector = Collector(receiver)
    last = 0
    for cut in [*cuts, len(wire)]:
        collector.splitter.feed(wire[last:cut])
        last = cut
    assert collector.got == expected
    assert not collector.splitter.passthrough  # nothing unusual in there
    # wsproto saw only the control frames, each one whole
    assert all(chunk[0] & 0x0F == 0x9 for chunk in collector.handed)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(BytesMessage, data=st.binary(max_size=50), message_finished=st.booleans()),
            st.builds(Ping, payload=st.binary(max_size=10)),
        ),
        max_size=10,
    ),
)
def test_fragmented_messages_pass_through_to_wsproto_unchanged(events: list[Event]) -> None:
    if events and isinstance(events[-1], BytesMessage):
        events[-1] = BytesMessage(data=events[-1].data, message_finished=True)
    wire = frames_from(ConnectionType.CLIENT, events)
    collector = Collector(ConnectionType.SERVER)
    collector.splitter.feed(wire)
    assert collector.got == wsproto_messages(ConnectionType.SERVER, wire)


def test_unusual_frames_switch_to_passthrough() -> None:
    cases = {
        "rsv bit": b"\xc2\x00",
        "continuation": b"\x80\x00",
        "reserved opcode": b"\x83\x00",
        "unmasked from a client": b"\x82\x00",
        "non-minimal length": b"\x82\xfe\x00\x05" + b"k" * 4 + b"x" * 5,
        "control too long": b"\x89\xfe\x00\x80" + b"k" * 4 + b"x" * 128,
        "bad utf-8": b"\x81\x82" + b"\x00" * 4 + b"\xff\xfe",
    }
    for name, frame in cases.items():
        collector = Collector(ConnectionType.SERVER)
        collector.splitter.feed(frame)
        assert collector.splitter.passthrough, name
        assert collector.handed == [frame], name
        collector.splitter.feed(b"more")  # everything after goes to wsproto too
        assert collector.handed == [frame, b"more"], name


def test_frame_over_the_limit_goes_to_wsproto_at_once() -> None:
    collector = Collector(ConnectionType.CLIENT, max_payload=100)
    header = b"\x82\x7f" + (1 << 40).to_bytes(8, "big")  # a 1 TiB frame, announced
    collector.splitter.feed(header)
    assert collector.splitter.passthrough and collector.handed == [header]


def test_incomplete_frames_wait_and_buffer_only_what_arrived() -> None:
    collector = Collector(ConnectionType.CLIENT)
    frame = encode_data_frame(2, b"z" * 70000, None)
    for i in range(0, len(frame), 1000):
        collector.splitter.feed(frame[i : i + 1000])
    assert collector.got == [(2, b"z" * 70000)]
    assert collector.handed == []


def test_encoded_frames_are_what_wsproto_sends_and_reads() -> None:
    server = FrameProtocol(client=False, extensions=[])
    for size in (0, 1, 125, 126, 65535, 65536, 70000):
        payload = os.urandom(size)
        assert encode_data_frame(2, payload, None) == bytes(server.send_data(payload))
        text = "\u00e9" * (size // 2)
        assert encode_data_frame(1, text.encode(), None) == bytes(server.send_data(text))
    keys = KeySource()
    wire = b"".join(encode_data_frame(2, b"m%d" % i, keys.next()) for i in range(2000))
    assert wsproto_messages(ConnectionType.SERVER, wire) == [(2, b"m%d" % i) for i in range(2000)]


def test_mask_is_its_own_inverse() -> None:
    payload = os.urandom(1001)
    key = b"\x01\x02\x03\x04"
    assert mask(key, mask(key, payload)) == payload
    assert mask(key, b"\x00\x00\x00\x00\x00") == b"\x01\x02\x03\x04\x01"
    assert mask(key, b"") == b""
    keys = KeySource()
    assert len({keys.next() for _ in range(3000)}) > 2990  # fresh keys, beyond one batch
