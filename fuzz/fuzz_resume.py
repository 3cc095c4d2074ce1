"""Fuzz target: arbitrary bytes into resumable RSocket ends (resumption).

Server mode (byte 0 bit 0 = 1): a server with a ``SessionStore`` holds a
detached session (token ``TOKEN``, streams open, frames retained); a fresh
server connection receives the bytes (a RESUME naming the token, with any
positions, then anything). Client mode (bit 0 = 0): a resumable client whose
transport died sent RESUME and receives the bytes (RESUME_OK, errors,
anything). Both ends run a reacting application.

Rules: nothing but ``RemoteProtocolError`` escapes ``receive_data`` /
``handle_timeout``; when it does, the connection that raised is closed and
its last queued frame is ERROR on stream 0 with the exception's code; the
store never keeps a closed session, and holds no more than the detached
session and (server mode) the fresh connection's own from a SETUP with R;
retained frames never exceed ``resume_buffer_size``.

Input: byte 0: mode; byte 1: seed of the chunk sizes; the rest: the bytes
from the peer. Seeds: fuzz/corpus/resume/ (``--make-corpus``).
"""

from __future__ import annotations

import random
import sys

from fuzz._harness import instrumented, last_prefixed_record, run

with instrumented(__name__):
    from sansrs import LocalProtocolError, RemoteProtocolError
    from sansrs.rsocket import (
        Connection,
        ConnectionConfig,
        ConnectionState,
        ErrorFrame,
        Role,
        SessionStore,
        decode_frame,
    )
    from sansrs.rsocket import events as ev

TOKEN = b"fuzz-token"
CONFIG = ConnectionConfig(
    max_frame_size=4096,
    max_reassembly_size=8192,
    max_concurrent_streams=8,
    fragment_size=64,
    resume_buffer_size=2048,
    resume_token_source=lambda: TOKEN,
)


def react(conn: Connection, event: object) -> None:
    try:
        if isinstance(event, ev.RequestResponseReceived):
            conn.send_payload(event.stream_id, b"r" * 50)
        elif isinstance(event, (ev.RequestStreamReceived, ev.RequestNReceived)):
            conn.send_payload(event.stream_id, b"item")
        elif isinstance(event, ev.RequestChannelReceived):
            conn.request_n(event.stream_id, 2)
        elif isinstance(event, ev.PayloadReceived) and event.next:
            conn.request_n(event.stream_id, 1)
    except LocalProtocolError:
        pass


def detached_pair() -> tuple[Connection, Connection, SessionStore]:
    """A client and a server session, streams open, the transport just lost."""
    store = SessionStore(keep_detached=10.0)
    client = Connection(Role.CLIENT, CONFIG)
    server = Connection(Role.SERVER, CONFIG, sessions=store)
    client.setup(resume=True)
    server.receive_data(client.data_to_send(), 0.0)
    server.events()
    server.accept_setup()
    sid = client.request_stream(b"q", initial_n=5)
    client.request_channel(b"c", initial_n=5)
    server.receive_data(client.data_to_send(), 0.0)
    for event in server.events():
        react(server, event)
    server.send_payload(sid, b"unsent")
    client.receive_data(server.data_to_send()[:20], 0.0)
    client.connection_lost()
    server.connection_lost()
    client.events()
    server.events()
    return client, server, store


def last_frame(conn: Connection) -> object:
    last = last_prefixed_record(conn.data_to_send())
    return decode_frame(last) if last is not None else None


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    rng = random.Random(data[1])
    stream = data[2:]
    client, session, store = detached_pair()
    if data[0] & 1:
        conn = Connection(Role.SERVER, CONFIG, sessions=store)
    else:
        client.resume()
        client.data_to_send()
        conn = client
    ends = [conn]
    now = 1.0
    offset = 0
    try:
        while offset < len(stream):
            size = rng.choice((1, 2, 3, 7, 16, 64, 1000))
            chunk = stream[offset : offset + size]
            offset += size
            now += 0.01
            conn.receive_data(chunk, now=now)
            for event in conn.events():
                if isinstance(event, ev.ResumeAccepted):
                    conn = event.session
                    ends.append(conn)
                react(conn, event)
            conn.handle_timeout(now)
            assert conn.retained_bytes <= CONFIG.resume_buffer_size
            if conn.state is ConnectionState.CLOSED:
                break
    except RemoteProtocolError as exc:
        failed = [c for c in ends if c.state is ConnectionState.CLOSED]
        assert failed, "a RemoteProtocolError left every connection open"
        frame = last_frame(failed[-1])
        assert isinstance(frame, ErrorFrame), frame
        assert frame.stream_id == 0 and frame.error_code == exc.error_code, (frame, exc)
    for c in (session, *ends):
        if c.state is ConnectionState.CLOSED:
            assert store.lookup(TOKEN, None) is not c
    # The store holds the detached session and, in server mode, the fresh
    # connection's own when its SETUP asked for resumption (the token is
    # reserved at SETUP with R, whatever it is: tokens are opaque): never a
    # closed session, under any token (read from the store's table).
    stored = list(store._sessions.values())
    assert all(s.state is not ConnectionState.CLOSED for s in stored), stored
    assert len(stored) <= (2 if data[0] & 1 else 1)


def make_corpus() -> None:
    """Seeds: a valid RESUME (+ a few frames) for the server, RESUME_OK
    variants and a REJECTED_RESUME for the client."""
    import hashlib
    from pathlib import Path

    from sansrs.rsocket import (
        ErrorCode,
        PayloadFrame,
        RequestNFrame,
        ResumeFrame,
        ResumeOkFrame,
        encode_frames_prefixed,
    )

    folder = Path(__file__).resolve().parent / "corpus" / "resume"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    client, server, _ = detached_pair()
    seeds = [
        b"\x01\x00"
        + encode_frames_prefixed(
            [ResumeFrame(TOKEN, client.received_position, 0), RequestNFrame(1, 3)]
        ),
        b"\x01\x05" + encode_frames_prefixed([ResumeFrame(TOKEN, 0, 0)]),
        b"\x01\x00" + encode_frames_prefixed([ResumeFrame(b"other", 0, 0)]),
        b"\x00\x00"
        + encode_frames_prefixed(
            [ResumeOkFrame(server.received_position), PayloadFrame(1, b"x", next=True)]
        ),
        b"\x00\x03" + encode_frames_prefixed([ResumeOkFrame(1)]),
        b"\x00\x00" + encode_frames_prefixed([ErrorFrame(0, ErrorCode.REJECTED_RESUME, b"no")]),
        # Regression: a RESUME, then a zero-length frame (bytes behind the
        # RESUME belong to the session; its error was raised by the fresh
        # connection before the fix).
        bytes.fromhex(
            "010000002600000000340000010000000a66757a7a2d746f6b656e000000000000000a000000"
            "000000000a00000000000001200000000003"
        ),
        # Found by a 60 s run: a SETUP with R (an empty token: tokens are
        # opaque) to a fresh server while another session waits detached:
        # both are stored (the invariant once said at most one).
        bytes.fromhex(
            "0100000021000000000480000100000000060000040000000000000006000000000005ffff00"
        ),
    ]
    for seed in seeds:
        (folder / hashlib.sha1(seed).hexdigest()[:16]).write_bytes(seed)


if __name__ == "__main__":
    if sys.argv[1:] == ["--make-corpus"]:
        make_corpus()
    else:
        run(test_one_input)
