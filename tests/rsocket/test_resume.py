"""Resumption (spec: Resuming Operation, Implied Position, Resume Operation,
RESUME / RESUME_OK frames, Keepalive Position Field, Identification Token
Handling), on the sans-IO core. Each test names the rule it checks."""

from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sansrs import LocalProtocolError, RemoteProtocolError
from sansrs.rsocket import (
    Connection,
    ConnectionConfig,
    ConnectionState,
    ErrorCode,
    ErrorFrame,
    ExtFrame,
    Frame,
    Framing,
    KeepaliveFrame,
    LeaseFrame,
    MetadataPushFrame,
    PayloadFrame,
    ResumeFrame,
    ResumeOkFrame,
    Role,
    SessionStore,
    SetupFrame,
    decode_frame,
    encode_frame_prefixed,
)
from sansrs.rsocket.events import (
    ConnectionLost,
    ConnectionTerminated,
    Disconnected,
    LeaseReceived,
    PayloadReceived,
    RequestResponseReceived,
    ResumeAccepted,
    Resumed,
    SetupReceived,
)
from tests.rsocket import strategies
from tests.rsocket.resume_pair import ResumePair
from tests.rsocket.resume_workload import item, run
from tests.rsocket.strategies import positions


def frames_of(data: bytes) -> list[Frame]:
    out: list[Frame] = []
    off = 0
    while off < len(data):
        n = int.from_bytes(data[off : off + 3], "big")
        out.append(decode_frame(data[off + 3 : off + 3 + n]))
        off += 3 + n
    return out


def feed(conn: Connection, *frames: Frame) -> None:
    conn.receive_data(b"".join(encode_frame_prefixed(f) for f in frames))


def streaming(pair: ResumePair, n: int = 100) -> int:
    sid = pair.client.request_stream(b"q", initial_n=n)
    pair.pump()
    pair.take()
    return sid


# --- Implied Position ------------------------------------------------------


def test_rsocket_implied_position_counts_request_cancel_error_payload_frames() -> None:
    """Spec: Implied Position: REQUEST, CANCEL, ERROR and PAYLOAD frames have
    positions (REQUEST_N counted with the requests); both ends agree."""
    p = ResumePair()
    sizes = 0
    sid = p.client.request_stream(b"abc", initial_n=2)
    sizes += 3 + 10
    p.client.request_n(sid, 1)
    sizes += 10
    rr = p.client.request_response(b"x", b"m")
    sizes += 6 + 3 + 1 + 1
    p.client.cancel(sid)
    sizes += 6
    p.pump()
    p.server.send_error(rr, ErrorCode.APPLICATION_ERROR, "no")
    p.pump()
    assert p.client.sent_position == p.server.received_position == sizes
    assert p.server.sent_position == p.client.received_position == 10 + 2
    assert p.client.retained_bytes == sizes  # nothing acknowledged yet


def test_rsocket_implied_position_other_frames_have_no_position() -> None:
    """Spec: Implied Position: "Frame types outside REQUEST, CANCEL, ERROR,
    and PAYLOAD do not have assigned (nor implied) positions": KEEPALIVE,
    LEASE, METADATA_PUSH, EXT (also on a stream), and connection ERRORs."""
    p = ResumePair(lease=(10_000, 5))
    before = (p.client.sent_position, p.client.received_position)
    p.client.send_keepalive(b"k")
    p.client.metadata_push(b"md")
    p.client.send_extension(7, b"e", stream_id=3)
    p.server.send_lease(1000, 1)
    p.server.send_extension(7, b"e")
    p.pump()
    assert (p.client.sent_position, p.client.received_position) == before
    assert p.client.retained_bytes == 0
    feed(p.client, PayloadFrame(0, b"on stream 0", next=True))  # ignored, no position
    assert p.client.received_position == before[1]
    for frame in (ExtFrame(3, 7, b"x"), MetadataPushFrame(b"m"), LeaseFrame(1, 1)):
        feed(p.server, frame)
    assert p.server.received_position == before[0]


def test_rsocket_keepalive_position_field_trims_retained_frames() -> None:
    """Spec: Keepalive Position Field: a KEEPALIVE carries the sender's
    received position; frames up to it need not be kept."""
    p = ResumePair()
    sid = streaming(p)
    for i in range(10):
        p.server.send_payload(sid, item(b"i", i))
    p.pump()
    assert p.server.retained_bytes == p.server.sent_position - 0 > 0
    p.client.send_keepalive()
    p.pump()
    assert p.server.retained_bytes == 0
    keepalive = frames_of(p.client.data_to_send() or b"")
    assert keepalive == []


def test_rsocket_keepalive_answer_carries_received_position() -> None:
    """Spec: KEEPALIVE Frame: the answer to R carries the responder's
    received position, which trims the asker's retained frames."""
    p = ResumePair()
    sid = p.client.request_stream(b"q", initial_n=5)
    retained = p.client.retained_bytes
    assert retained > 0
    p.pump()
    p.client.send_keepalive()
    p.pump()
    assert p.client.retained_bytes == 0
    assert sid == 1


def test_rsocket_retained_frames_ask_peer_position_when_half_full() -> None:
    """Choice: past half of ``resume_buffer_size`` an end sends KEEPALIVE(R)
    to learn the peer's position, so a busy one-way stream stays trimmed."""
    cfg = ConnectionConfig(resume_buffer_size=4096)
    p = ResumePair(cfg, cfg)
    sid = streaming(p, 10_000)
    for i in range(2000):
        p.server.send_payload(sid, item(b"x", i))
        if i % 50 == 0:
            p.pump()
    p.pump()
    assert p.server.resumable
    assert p.server.retained_bytes <= 4096


def test_rsocket_retained_buffer_limit_makes_session_unresumable() -> None:
    """Choice: frames beyond ``resume_buffer_size`` unacknowledged: the
    retained frames are dropped (bounded memory) and a later transport loss
    ends the session with a clear reason."""
    cfg = ConnectionConfig(resume_buffer_size=1000)
    p = ResumePair(cfg, cfg)
    sid = p.client.request_channel(b"c", initial_n=1)
    p.pump()
    p.server.request_n(sid, 1000)
    p.pump()
    for i in range(200):  # never delivered: no acknowledgement possible
        p.client.send_payload(sid, item(b"x", i))
    assert not p.client.resumable
    assert p.client.retained_bytes == 0
    p.cut(0, 0)
    client_events, _ = p.take()
    lost = client_events[-1]
    assert isinstance(lost, ConnectionLost)
    assert "resume_buffer_size" in lost.reason
    assert p.client.state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError):
        p.client.resume()


def test_rsocket_resume_server_beyond_limit_rejected_resume() -> None:
    """The server dropped its retained frames: the client's RESUME gets
    ERROR[REJECTED_RESUME] and the application a clear error."""
    cfg = ConnectionConfig(resume_buffer_size=1000)
    p = ResumePair(None, cfg)
    sid = streaming(p, 10_000)
    for i in range(200):
        p.server.send_payload(sid, item(b"x", i))
    p.cut(0, 0)
    events = p.resume()
    assert isinstance(events[-1], ConnectionTerminated)
    assert events[-1].error_code == ErrorCode.REJECTED_RESUME
    client_events, _ = p.take()
    closed = client_events[-1]
    assert isinstance(closed, ConnectionTerminated)
    assert closed.error_code == ErrorCode.REJECTED_RESUME
    assert closed.by_peer
    assert "resume_buffer_size" in closed.message
    assert p.client.state is ConnectionState.CLOSED
    assert len(p.store) == 0


# --- SETUP with R, Identification Token Handling -----------------------------


def test_rsocket_setup_resume_flag_carries_token_from_injected_source() -> None:
    tokens = iter([b"T" * 16])
    client = Connection(Role.CLIENT, ConnectionConfig(resume_token_source=lambda: next(tokens)))
    client.setup(resume=True)
    (setup,) = frames_of(client.data_to_send())
    assert isinstance(setup, SetupFrame)
    assert setup.resume_token == b"T" * 16
    assert client.resumable


def test_rsocket_identification_token_default_is_128_random_bits() -> None:
    """Spec: Identification Token Handling: tokens should uniquely identify a
    connection; the default is ``secrets.token_bytes(16)``."""
    seen = set()
    for _ in range(50):
        client = Connection(Role.CLIENT)
        client.setup(resume=True)
        token = client.resume_token
        assert token is not None and len(token) == 16
        seen.add(token)
    assert len(seen) == 50


def test_rsocket_identification_token_never_shown_in_repr() -> None:
    token = b"\x01secret-token\x02"
    config = ConnectionConfig(resume_token_source=lambda: token)
    p = ResumePair(config)
    texts = [
        repr(SetupFrame(1, 1, "a", "b", resume_token=token)),
        repr(ResumeFrame(token, 1, 2)),
        repr(config),
        repr(p.store),
        repr(p.client),
        repr(p.server),
    ]
    p.cut(0, 0)
    texts += [repr(e) for e in p.resume()]
    texts += [repr(e) for pair_events in p.take() for e in pair_events]
    for text in texts:
        assert repr(token)[2:-1] not in text
        assert token.hex() not in text


def test_rsocket_setup_reusing_live_token_rejected() -> None:
    """Spec: Identification Token Handling: tokens identify one connection;
    a SETUP naming a live session's token is rejected (REJECTED_SETUP)."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"same-token"))
    other = Connection(Role.SERVER, sessions=p.store)
    feed(other, SetupFrame(100, 1000, "a", "b", resume_token=b"same-token"))
    (error,) = frames_of(other.data_to_send())
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_SETUP
    assert other.state is ConnectionState.CLOSED
    assert p.store.lookup(b"same-token", None) is p.server


def test_rsocket_identification_token_is_opaque_even_empty_beside_a_detached_session() -> None:
    """Spec: Identification Token Handling: the token's requirements are the
    implementation's and the server treats it as opaque: a SETUP with R and
    an empty token, while another session waits detached, is stored beside
    it; ending it frees only it (found by fuzz/fuzz_resume.py)."""
    p = ResumePair()
    streaming(p)
    p.cut(0, 0)
    assert len(p.store) == 1 and p.server.state is ConnectionState.DISCONNECTED
    fresh = Connection(Role.SERVER, sessions=p.store)
    feed(fresh, SetupFrame(1536, 262144, "", "", resume_token=b""))
    assert isinstance(fresh.events()[0], SetupReceived)
    assert len(p.store) == 2 and p.store.lookup(b"", None) is fresh
    fresh.close("bye")
    assert len(p.store) == 1 and p.store.lookup(b"", None) is None


def test_rsocket_setup_resume_accepted_with_session_store() -> None:
    """With a ``SessionStore`` the server accepts R (without one it must
    reject it: test_connection.py)."""
    store = SessionStore()
    server = Connection(Role.SERVER, sessions=store)
    feed(server, SetupFrame(100, 1000, "a", "b", resume_token=b"tok"))
    assert isinstance(server.events()[0], SetupReceived)
    server.accept_setup()
    assert server.resumable and len(store) == 1
    server.close("bye")
    assert len(store) == 0


def test_rsocket_session_store_bounded() -> None:
    store = SessionStore(max_sessions=1)
    first = Connection(Role.SERVER, sessions=store)
    feed(first, SetupFrame(100, 1000, "a", "b", resume_token=b"one"))
    second = Connection(Role.SERVER, sessions=store)
    feed(second, SetupFrame(100, 1000, "a", "b", resume_token=b"two"))
    (error,) = frames_of(second.data_to_send())
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_SETUP
    with pytest.raises(ValueError):
        SessionStore(keep_detached=0)
    with pytest.raises(LocalProtocolError):
        Connection(Role.CLIENT, sessions=store)


# --- Resume Operation: client ------------------------------------------------


def test_rsocket_resume_operation_transport_loss_detaches_instead_of_closing() -> None:
    p = ResumePair()
    streaming(p)
    p.cut(0, 0)
    client_events, server_events = p.take()
    assert client_events == [Disconnected(reason="the transport closed", timed_out=False)]
    assert server_events == [Disconnected(reason="the transport closed", timed_out=False)]
    assert p.client.state is ConnectionState.DISCONNECTED
    assert p.client.open_streams == [1]
    assert p.client.data_to_send() == b""
    assert p.client.next_deadline() is None


def test_rsocket_resume_frame_carries_last_received_and_first_available_positions() -> None:
    """Spec: RESUME: last received server position, first available client
    position; the token of the original SETUP."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    sid = streaming(p)
    p.client.send_keepalive()  # the server learns the client's position
    p.pump()
    p.server.send_payload(sid, b"a")
    p.client.request_n(sid, 3)  # retained by the client, never delivered
    p.pump()
    p.client.request_n(sid, 4)
    p.cut(0, 0)
    p.client.resume()
    (resume,) = frames_of(p.client.data_to_send())
    assert resume == ResumeFrame(b"tk", p.client.received_position, p.client.sent_position - 20)
    assert resume.last_received_server_position == p.server.sent_position


def test_rsocket_resume_operation_client_sends_nothing_before_resume_ok() -> None:
    """Spec: Resume Operation: "The client MUST NOT send any other frame
    types until resumption succeeds"; intents made meanwhile go after it."""
    p = ResumePair()
    sid = streaming(p)
    p.cut(0, 0)
    p.client.request_n(sid, 5)  # while disconnected
    assert p.client.data_to_send() == b""
    p.client.resume()
    rr = p.client.request_response(b"during")  # while resuming
    (resume,) = frames_of(p.client.data_to_send())
    assert isinstance(resume, ResumeFrame)
    p.client.request_n(sid, 1)
    p.client.handle_timeout(1000.0)
    assert p.client.data_to_send() == b""
    fresh = Connection(Role.SERVER, sessions=p.store)
    feed(fresh, resume)
    p.server = fresh.events()[0].session  # type: ignore[union-attr]
    p.pump()
    _, server_events = p.take()
    assert RequestResponseReceived(stream_id=rr, data=b"during", metadata=None) in server_events
    assert p.server.send_credit(sid) == 100 + 5 + 1


def test_rsocket_resume_ok_retransmits_from_server_position() -> None:
    """Spec: on RESUME_OK each end retransmits from the position the other
    received; every item arrives exactly once."""
    p = ResumePair()
    sid = streaming(p)
    for i in range(10):
        p.server.send_payload(sid, item(b"i", i))
    _, to_client = p.in_flight()
    p.cut(0, to_client // 2)  # a frame broken in the middle
    p.resume()
    client_events, server_events = p.take()
    received = [e.data for e in client_events if isinstance(e, PayloadReceived)]
    assert received == [item(b"i", i) for i in range(10)]
    resumed = [e for e in client_events if isinstance(e, Resumed)]
    assert resumed and resumed[0].retransmitted == 0
    (server_resumed,) = [e for e in server_events if isinstance(e, Resumed)]
    assert server_resumed.retransmitted > 0
    assert p.client.received_position == p.server.sent_position


def test_rsocket_resume_operation_rejected_resume_ends_session_for_good() -> None:
    """Spec: "On receiving an ERROR[REJECTED_RESUME] frame, the client MUST
    NOT attempt resumption again"."""
    p = ResumePair()
    streaming(p)
    p.cut(0, 0)
    p.client.resume()
    p.client.data_to_send()
    feed(p.client, ErrorFrame(0, ErrorCode.REJECTED_RESUME, b"gone"))
    (closed,) = p.client.events()
    assert closed == ConnectionTerminated(
        error_code=ErrorCode.REJECTED_RESUME, message="resumption rejected: gone", by_peer=True
    )
    assert p.client.state is ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError):
        p.client.resume()
    assert p.client.data_to_send() == b""


def test_rsocket_resume_operation_connection_error_ends_resumption() -> None:
    p = ResumePair()
    p.cut(0, 0)
    p.client.resume()
    p.client.data_to_send()
    feed(p.client, ErrorFrame(0, ErrorCode.CONNECTION_ERROR, b"no"))
    (closed,) = p.client.events()
    assert isinstance(closed, ConnectionTerminated)
    assert closed.error_code == ErrorCode.CONNECTION_ERROR


def test_rsocket_resume_operation_other_frame_before_resume_ok_is_connection_error() -> None:
    p = ResumePair()
    sid = streaming(p)
    p.cut(0, 0)
    p.client.resume()
    p.client.data_to_send()
    with pytest.raises(RemoteProtocolError):
        feed(p.client, PayloadFrame(sid, b"early", next=True))
    (error,) = frames_of(p.client.data_to_send())
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.CONNECTION_ERROR


def test_rsocket_resume_ok_position_client_cannot_resume_from_is_connection_error() -> None:
    """Spec: the client MAY send ERROR[CONNECTION_ERROR] and MUST NOT try again."""
    p = ResumePair()
    p.client.request_stream(b"q", initial_n=1)
    p.cut(0, 0)
    p.client.resume()
    p.client.data_to_send()
    with pytest.raises(RemoteProtocolError):
        feed(p.client, ResumeOkFrame(p.client.sent_position + 1))
    assert p.client.state is ConnectionState.CLOSED
    assert [type(f) for f in frames_of(p.client.data_to_send())] == [ErrorFrame]


def test_rsocket_resume_transport_lost_while_resuming_can_resume_again() -> None:
    p = ResumePair()
    sid = streaming(p)
    for i in range(5):
        p.server.send_payload(sid, item(b"i", i))
    p.cut(0, 0)
    p.resume(pump=False)
    _, to_client = p.in_flight()
    p.cut(0, to_client - 1)  # RESUME_OK and retransmission, all but one byte
    assert p.client.state is ConnectionState.DISCONNECTED
    p.resume()
    client_events, _ = p.take()
    received = [e.data for e in client_events if isinstance(e, PayloadReceived)]
    assert received == [item(b"i", i) for i in range(5)]


def test_rsocket_resume_keepalive_timeout_detaches() -> None:
    """Spec: Resuming Operation: resumption is for loss of connectivity; a
    peer silent past the max lifetime is such a loss."""
    p = ResumePair()
    p.client.handle_timeout(0.0)
    p.client.handle_timeout(200.0)
    assert p.client.events() == [
        Disconnected(reason="no frame from the peer for more than 90 s", timed_out=True)
    ]
    assert p.client.state is ConnectionState.DISCONNECTED


def test_rsocket_resume_close_while_disconnected_ends_session() -> None:
    p = ResumePair()
    p.cut(0, 0)
    p.take()
    p.client.close("bye")
    assert isinstance(p.client.events()[-1], ConnectionTerminated)
    p.server.close("bye")
    assert isinstance(p.server.events()[-1], ConnectionTerminated)
    assert len(p.store) == 0


# --- Resume Operation: server ------------------------------------------------


def test_rsocket_resume_unknown_token_rejected_resume() -> None:
    """Spec: not identified: MUST send ERROR[REJECTED_RESUME]."""
    server = Connection(Role.SERVER, sessions=SessionStore())
    feed(server, ResumeFrame(b"who", 0, 0))
    (error,) = frames_of(server.data_to_send())
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_RESUME
    assert server.state is ConnectionState.CLOSED


def test_rsocket_resume_accepted_hands_session_over() -> None:
    p = ResumePair()
    old = p.server
    p.cut(0, 0)
    events = p.resume()
    assert events == [ResumeAccepted(session=old)]
    assert p.server is old and old.state is ConnectionState.ESTABLISHED


def test_rsocket_resume_rejected_when_client_lacks_frames() -> None:
    """Spec: the server checks that the client retained every frame past the
    server's received position."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    p.client.request_stream(b"q", initial_n=1)
    p.cut(0, 0)
    fresh = Connection(Role.SERVER, sessions=p.store)
    feed(fresh, ResumeFrame(b"tk", 0, p.client.sent_position))
    (error,) = frames_of(fresh.data_to_send())
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_RESUME
    assert "client retains" in error.message
    assert p.server.state is ConnectionState.CLOSED
    assert len(p.store) == 0


def test_rsocket_resume_rejected_when_server_lacks_frames() -> None:
    """Spec: "have all frames past the client's last-received position been
    retained?" (here: trimmed by a KEEPALIVE position, or never sent)."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    sid = streaming(p)
    p.server.send_payload(sid, b"abc")
    p.server.send_payload(sid, b"def")
    for claimed in (p.server.sent_position + 1, 3):  # beyond, and mid-frame
        q = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
        s2 = streaming(q)
        q.server.send_payload(s2, b"abc")
        q.cut(0, 0)
        fresh = Connection(Role.SERVER, sessions=q.store)
        feed(fresh, ResumeFrame(b"tk", claimed, 0))
        (error,) = frames_of(fresh.data_to_send())
        assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_RESUME
        assert "cannot send again" in error.message


def test_rsocket_resume_after_setup_is_connection_error_with_store() -> None:
    """Spec: "A Server that receives a RESUME frame after a SETUP frame,
    SHOULD send an ERROR[CONNECTION_ERROR]"."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    with pytest.raises(RemoteProtocolError) as info:
        feed(p.server, ResumeFrame(b"tk", 0, 0))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    assert "after SETUP" in info.value.message


def test_rsocket_resume_after_previous_resume_is_connection_error() -> None:
    """Spec: "A Server that receives a RESUME frame after a previous RESUME
    frame, SHOULD send an ERROR[CONNECTION_ERROR]"."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    p.cut(0, 0)
    p.client.resume()
    again = p.client.data_to_send() * 2  # two RESUMEs on one transport
    fresh = Connection(Role.SERVER, sessions=p.store)
    fresh.receive_data(again)
    assert isinstance(fresh.events()[0], ResumeAccepted)
    # The bytes behind the first RESUME are the session's, parsed with its
    # next input (so the error is the session's, its ERROR in its output).
    with pytest.raises(RemoteProtocolError) as info:
        p.server.receive_data(encode_frame_prefixed(KeepaliveFrame(False, 0)))
    assert info.value.error_code == ErrorCode.CONNECTION_ERROR
    assert "previous RESUME" in info.value.message
    assert p.server.state is ConnectionState.CLOSED
    error = frames_of(p.server.data_to_send())[-1]
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.CONNECTION_ERROR


def test_rsocket_resume_bytes_behind_a_resume_cut_across_reads_go_to_the_session() -> None:
    """A RESUME completed by the next read (its frame parsed alone, the rest
    of that read behind it): the bytes behind it are still the session's."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    p.cut(0, 0)
    p.client.resume()
    again = p.client.data_to_send() * 2  # two RESUMEs on one transport
    fresh = Connection(Role.SERVER, sessions=p.store)
    fresh.receive_data(again[:7])  # the first RESUME's prefix and header, cut
    fresh.receive_data(again[7:])
    assert isinstance(fresh.events()[0], ResumeAccepted)
    with pytest.raises(RemoteProtocolError) as info:
        p.server.receive_data(encode_frame_prefixed(KeepaliveFrame(False, 0)))
    assert "previous RESUME" in info.value.message


def test_rsocket_resume_supersedes_half_open_old_transport() -> None:
    """The server has not seen the old transport die yet: the RESUME on the
    new one detaches the old and continues."""
    p = ResumePair()
    sid = streaming(p)
    p.server.send_payload(sid, b"x")
    p.client.connection_lost()  # only the client noticed
    p.take()
    p.resume()
    client_events, server_events = p.take()
    assert (
        Disconnected(reason="superseded by a RESUME on a new transport", timed_out=False)
        in server_events
    )
    assert [e.data for e in client_events if isinstance(e, PayloadReceived)] == [b"x"]


def test_rsocket_resume_session_store_expiry_frees_session() -> None:
    """Spec: Resuming Operation: client lifetime management extended for the
    time a client may resume; then the session is freed, and replaying its
    token fails."""
    store = SessionStore(keep_detached=5.0)
    p = ResumePair(store=store, client_config=ConnectionConfig(resume_token_source=lambda: b"t"))
    p.server.handle_timeout(10.0)
    p.cut(0, 0)
    p.take()
    assert p.server.next_deadline() == 15.0
    assert store.next_deadline() == 15.0
    assert store.expire(14.9) == []
    assert store.expire(15.0) == [p.server]
    lost = p.server.events()[-1]
    assert isinstance(lost, ConnectionLost) and lost.timed_out
    assert len(store) == 0 and store.next_deadline() is None
    p.resume()
    closed = p.client_events[-1]
    assert isinstance(closed, ConnectionTerminated)
    assert closed.error_code == ErrorCode.REJECTED_RESUME


def test_rsocket_resume_expired_token_rejected_without_sweep() -> None:
    store = SessionStore(keep_detached=5.0)
    p = ResumePair(store=store, client_config=ConnectionConfig(resume_token_source=lambda: b"t"))
    p.server.handle_timeout(1.0)
    p.cut(0, 0)
    p.client.resume()
    fresh = Connection(Role.SERVER, sessions=store)
    fresh.receive_data(p.client.data_to_send(), 100.0)
    (error,) = frames_of(fresh.data_to_send())
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_RESUME
    assert p.server.state is ConnectionState.CLOSED


def test_rsocket_resume_detached_session_expires_by_its_own_timer() -> None:
    store = SessionStore(keep_detached=2.0)
    p = ResumePair(store=store)
    p.server.handle_timeout(0.0)
    p.cut(0, 0)
    p.server.handle_timeout(1.0)
    assert p.server.state is ConnectionState.DISCONNECTED
    p.server.handle_timeout(2.5)
    assert p.server.state is ConnectionState.CLOSED  # type: ignore[comparison-overlap]
    assert len(store) == 0


def test_rsocket_resume_lease_restarts_with_new_lease() -> None:
    """Spec: "LEASE semantics MUST be restarted upon a new connection by
    sending a LEASE frame from the server"."""
    p = ResumePair(lease=(30_000, 10))
    assert p.client.lease_available() == 10
    p.cut(0, 0)
    assert p.client.lease_available() == 0
    with pytest.raises(LocalProtocolError):
        p.client.request_response(b"no lease while disconnected")
    p.resume()
    client_events, _ = p.take()
    assert LeaseReceived(ttl=30_000, number_of_requests=10, metadata=None) in client_events
    assert p.client.lease_available() == 10


# --- exactly once, in order, through arbitrary cuts ---------------------------


def test_rsocket_resume_request_response_in_flight_completes_exactly_once() -> None:
    p = ResumePair()
    rr = p.client.request_response(b"q")
    p.pump()
    p.take()
    p.server.send_payload(rr, b"answer")
    p.cut(0, 0)
    p.resume()
    client_events, server_events = p.take()
    assert [e for e in client_events if isinstance(e, PayloadReceived)] == [
        PayloadReceived(stream_id=rr, data=b"answer", metadata=None, complete=True, next=True)
    ]
    assert not [e for e in server_events if isinstance(e, RequestResponseReceived)]


def test_rsocket_resume_fragmented_payload_across_cut() -> None:
    cfg = ConnectionConfig(fragment_size=64)
    p = ResumePair(cfg, cfg)
    sid = streaming(p)
    big = bytes(range(256)) * 4
    p.server.send_payload(sid, big, b"m" * 100)
    _, to_client = p.in_flight()
    p.cut(0, to_client // 2)
    p.resume()
    client_events, _ = p.take()
    payloads = [e for e in client_events if isinstance(e, PayloadReceived)]
    assert [(e.data, e.metadata) for e in payloads] == [(big, b"m" * 100)]


def test_rsocket_resume_message_framing() -> None:
    """WebSocket-style framing resumes the same way (one frame per message)."""
    cfg = ConnectionConfig(framing=Framing.MESSAGES)
    store = SessionStore()
    client = Connection(Role.CLIENT, cfg)
    server = Connection(Role.SERVER, cfg, sessions=store)
    client.setup(resume=True)
    for f in client.frames_to_send():
        server.receive_frame(f)
    server.accept_setup()
    sid = client.request_stream(b"q", initial_n=10)
    for f in client.frames_to_send():
        server.receive_frame(f)
    server.send_payload(sid, b"a")
    server.send_payload(sid, b"b")
    first, _second = server.frames_to_send()
    client.receive_frame(first)
    client.connection_lost()
    server.connection_lost()
    client.events()
    client.resume()
    (resume,) = client.frames_to_send()
    fresh = Connection(Role.SERVER, cfg, sessions=store)
    fresh.receive_frame(resume)
    assert fresh.events() == [ResumeAccepted(session=server)]
    for f in server.frames_to_send():
        client.receive_frame(f)
    assert [e.data for e in client.events() if isinstance(e, PayloadReceived)] == [b"b"]
    assert decode_frame(resume) == ResumeFrame(client.resume_token or b"", 6 + 1, 0)


@pytest.mark.parametrize("seed", range(4))
def test_rsocket_resume_cuts_at_random_offsets_deliver_exactly_once_in_order(seed: int) -> None:
    """A stream, a channel both ways and request-responses through many cuts
    at random byte offsets: every item exactly once, in order."""
    cfg = ConnectionConfig(resume_buffer_size=16 * 1024)
    p = ResumePair(cfg, cfg, chunk=1 + seed * 7)
    out = run(random.Random(seed), p, stream_items=2000, channel_items=500, requests=20, cuts=20)
    check(out, 2000, 500, 20)


def check(out: object, stream_items: int, channel_items: int, requests: int) -> None:
    from tests.rsocket.resume_workload import Outcome

    assert isinstance(out, Outcome)
    assert out.terminal == []
    assert out.stream == [item(b"s", i) for i in range(stream_items)]
    assert out.channel_in == [item(b"d", i) for i in range(channel_items)]
    assert out.channel_out == [item(b"u", i) for i in range(channel_items)]
    assert out.stream_done and out.channel_in_done and out.channel_out_done
    assert out.requests_sent == requests
    assert all(len(v) == 1 for v in out.responses.values())
    assert len(out.responses) == requests


@settings(max_examples=40, deadline=None)
@given(
    rng=st.randoms(use_true_random=False),
    chunk=st.integers(min_value=1, max_value=80),
    cuts=st.integers(min_value=0, max_value=10),
    buffer=st.sampled_from([2048, 1 << 20]),
)
def test_rsocket_resume_arbitrary_cut_points_property(
    rng: random.Random, chunk: int, cuts: int, buffer: int
) -> None:
    """Back to back, any chunking, cuts at arbitrary byte offsets: exactly
    once, in order, every request-response answered once."""
    cfg = ConnectionConfig(resume_buffer_size=buffer)
    p = ResumePair(cfg, cfg, chunk=chunk)
    out = run(rng, p, stream_items=300, channel_items=80, requests=6, cuts=cuts, batch=8)
    assert out.cuts == cuts
    check(out, 300, 80, 6)


def test_rsocket_resume_100k_stream_10k_channel_50_cuts() -> None:
    """The issue's workload on the core: a 100k-item stream and a 10k-item
    channel each way through 50 random cuts (the socket version is in
    tests/adapters)."""
    cfg = ConnectionConfig(resume_buffer_size=64 * 1024)
    p = ResumePair(cfg, cfg)
    out = run(
        random.Random(2026), p, stream_items=100_000, channel_items=10_000, requests=50, cuts=50
    )
    assert out.cuts == 50
    check(out, 100_000, 10_000, 50)
    assert p.client.retained_bytes <= 64 * 1024 and p.server.retained_bytes <= 64 * 1024


def test_rsocket_keepalive_frame_position_is_received_position() -> None:
    p = ResumePair()
    sid = streaming(p)
    p.server.send_payload(sid, b"x")
    p.pump()
    p.client.handle_timeout(0.0)
    p.client.handle_timeout(25.0)
    (keepalive,) = frames_of(p.client.data_to_send())
    assert keepalive == KeepaliveFrame(True, p.client.received_position)


# --- bad input never crashes a resumable end ---------------------------------


@settings(max_examples=150, deadline=None)
@given(
    frames=st.lists(
        strategies.frames() | st.builds(ResumeFrame, st.just(b"tk"), positions, positions),
        max_size=8,
    ),
    first_resume=st.booleans(),
)
def test_rsocket_resume_server_any_frames_only_typed_errors(
    frames: list[Frame], first_resume: bool
) -> None:
    """A server with a session store, fed any valid frames (RESUMEs with any
    positions among them) after a detached session's token: nothing but
    ``RemoteProtocolError`` escapes, and the store only holds live sessions."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    p.client.request_stream(b"q", initial_n=3)
    p.pump()
    p.cut(0, 0)
    fresh = Connection(Role.SERVER, sessions=p.store)
    if first_resume:
        frames = [ResumeFrame(b"tk", 0, 0), *frames]
    with contextlib.suppress(RemoteProtocolError):
        fresh.receive_data(b"".join(encode_frame_prefixed(f) for f in frames), 1.0)
    for session in (fresh, p.server):
        if session.state is ConnectionState.CLOSED:
            assert p.store.lookup(b"tk", None) is not session
    # At most the detached session, plus the fresh connection if one of the
    # frames was a SETUP with a new resume token that it accepted.
    new_tokens = {
        f.resume_token
        for f in frames
        if isinstance(f, SetupFrame) and f.resume_token not in (None, b"tk")
    }
    assert len(p.store) <= 1 + min(1, len(new_tokens))
    if len(p.store) == 2:
        assert fresh.state is not ConnectionState.CLOSED


@settings(max_examples=150, deadline=None)
@given(frames=st.lists(strategies.frames(), min_size=1, max_size=8))
def test_rsocket_resume_client_resuming_any_frames_only_typed_errors(frames: list[Frame]) -> None:
    p = ResumePair()
    p.client.request_stream(b"q", initial_n=3)
    p.cut(0, 0)
    p.client.resume()
    p.client.data_to_send()
    try:
        p.client.receive_data(b"".join(encode_frame_prefixed(f) for f in frames), 1.0)
    except RemoteProtocolError:
        assert p.client.state is ConnectionState.CLOSED
    assert p.client.state in (
        ConnectionState.RESUMING,
        ConnectionState.ESTABLISHED,
        ConnectionState.CLOSED,
    )


def test_rsocket_resume_detached_positionless_intents_raise() -> None:
    """While detached, frames without a position (METADATA_PUSH, EXT,
    KEEPALIVE) would be lost: they raise instead."""
    p = ResumePair()
    p.cut(0, 0)
    for intent in (
        lambda: p.client.metadata_push(b"m"),
        lambda: p.client.send_extension(1),
        lambda: p.client.send_keepalive(),
    ):
        with pytest.raises(LocalProtocolError):
            intent()
    with pytest.raises(LocalProtocolError):
        p.server.resume()  # only a client resumes


def test_rsocket_resume_disconnected_ignores_input_and_second_loss() -> None:
    """Spec 9 (Handling the Unexpected): with no transport nothing should
    arrive; what does is ignored, and a second transport loss is no event."""
    p = ResumePair()
    sid = streaming(p)
    p.cut(0, 0)
    p.take()
    before = p.client.received_position
    feed(p.client, PayloadFrame(sid, b"ghost", next=True))
    p.client.connection_lost()
    assert p.client.events() == []
    assert p.client.received_position == before
    assert p.client.state is ConnectionState.DISCONNECTED


def test_rsocket_resume_unsupported_version_rejected_resume() -> None:
    """Spec: Resume Operation: every ERROR there MUST be CONNECTION_ERROR or
    REJECTED_RESUME; a RESUME of another major version gets REJECTED_RESUME."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    p.cut(0, 0)
    fresh = Connection(Role.SERVER, sessions=p.store)
    feed(fresh, ResumeFrame(b"tk", 0, 0, major_version=2))
    (error,) = frames_of(fresh.data_to_send())
    assert isinstance(error, ErrorFrame) and error.error_code == ErrorCode.REJECTED_RESUME
    assert p.server.state is ConnectionState.DISCONNECTED  # still resumable


def test_rsocket_resume_version_written_swapped_by_rsocket_js_is_1_0() -> None:
    """rsocket-js 1.0 (alpha) sends its RESUME with the version fields
    swapped (0.1 for 1.0): the session resumes (rsocket-java does not look
    at the RESUME's version at all); another major version is still refused."""
    p = ResumePair(ConnectionConfig(resume_token_source=lambda: b"tk"))
    p.cut(0, 0)
    fresh = Connection(Role.SERVER, sessions=p.store)
    feed(fresh, ResumeFrame(b"tk", 0, 0, major_version=0, minor_version=1))
    accepted = [e for e in fresh.events() if isinstance(e, ResumeAccepted)]
    assert accepted and accepted[0].session is p.server
    ok, *_ = frames_of(p.server.data_to_send())
    assert isinstance(ok, ResumeOkFrame)


def test_rsocket_resume_client_ignores_resume_frame() -> None:
    """Spec 9: a RESUME reaching a client is unexpected and ignored."""
    p = ResumePair()
    feed(p.client, ResumeFrame(b"x", 0, 0))
    assert p.client.events() == [] and p.client.state is ConnectionState.ESTABLISHED


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=6, max_value=300), max_size=30),
    trims=st.lists(st.integers(min_value=0, max_value=9000), max_size=4),
    probe=st.integers(min_value=0, max_value=9000),
    prefixed=st.booleans(),
)
def test_rsocket_retained_frames_trim_and_replay_match_a_model(
    sizes: list[int], trims: list[int], probe: int, prefixed: bool
) -> None:
    """The retained buffer against a plain model: trimming keeps exactly the
    frames ending after the position; replay is possible exactly from a
    retained frame boundary."""
    from sansrs.rsocket._retained import RetainedFrames

    r = RetainedFrames(1 << 30, prefixed)
    end = 0
    bounds = [0]
    for i, n in enumerate(sizes):
        body = bytes([i % 256]) * n
        pieces = (n.to_bytes(3, "big") + body[:6], body[6:]) if prefixed else (body,)
        r.frames.extend(pieces)
        end += n
        bounds.append(end)
    start = 0
    for t in trims:
        r.trim(t)
        start = max([b for b in bounds if b <= max(t, start)])
        assert r.start == start
    assert r.can_replay(probe, end) == (probe in bounds and probe >= start)
    if r.can_replay(probe, end):
        replay = b"".join(r.replay(probe))
        kept = [n for b, n in zip(bounds, sizes, strict=False) if b >= probe]
        assert len(replay) == sum(kept) + (3 * len(kept) if prefixed else 0)


@pytest.mark.parametrize("delivered", [0, 1, 17, 40, 70])
def test_rsocket_resume_operation_metadata_requests_retransmitted_whole(delivered: int) -> None:
    """Spec: Resume Operation: requests sent on the fast path with metadata
    (routed requests) are retained frame by frame like any other, so a cut at
    any byte and a resumption deliver each exactly once, metadata intact."""
    p = ResumePair()
    p.client.send_keepalive()  # the server has a clock-free view of our position
    p.pump()
    p.take()
    sent = [
        (p.client.request_response(b"data-%d" % i, b"\xfe\x00\x00\x05route%d" % i), i)
        for i in range(3)
    ]
    fnf = p.client.request_fnf(b"", b"only-metadata")
    p.cut(delivered, 0)
    p.resume()
    requests = [e for e in p.server_events if isinstance(e, RequestResponseReceived)]
    assert [(e.stream_id, e.data, e.metadata) for e in requests] == [
        (sid, b"data-%d" % i, b"\xfe\x00\x00\x05route%d" % i) for sid, i in sent
    ]
    fnfs = [e for e in p.server_events if type(e).__name__ == "FireAndForgetReceived"]
    assert [(e.stream_id, e.metadata) for e in fnfs] == [(fnf, b"only-metadata")]
    assert p.client.sent_position == p.server.received_position
