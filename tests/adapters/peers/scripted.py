"""A scripted peer: a plain socket server that plays the other side of one
connection byte for byte, as a misbehaving RSocket or rsio server would
(an ERROR and the socket kept open, silence, a reset inside a frame, HTTP
where frames were expected...). Never sansrs: the bytes are written here,
RSocket frames by hand (spec: Frame Header Format), WebSocket frames with
wsproto (RFC 6455 server side)."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from collections.abc import Callable, Iterator

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Message, Request

WAIT = 10.0

# RSocket frame types (spec: Frame Types) and flags.
SETUP, KEEPALIVE, REQUEST_RESPONSE, REQUEST_FNF = 0x01, 0x03, 0x04, 0x05
REQUEST_STREAM, REQUEST_CHANNEL, REQUEST_N, CANCEL = 0x06, 0x07, 0x08, 0x09
PAYLOAD, ERROR = 0x0A, 0x0B
REQUESTS = frozenset({REQUEST_RESPONSE, REQUEST_FNF, REQUEST_STREAM, REQUEST_CHANNEL})
FLAG_NEXT, FLAG_COMPLETE = 0x20, 0x40

# rsio messages (docs/protocols/rsio.md): a type byte, then varints.
RSIO_SERVER_HELLO = b"\x02\x00\x00"  # version 0, no extension
RSIO_SUBSCRIBE, RSIO_ON_SUBSCRIBE, RSIO_ON_NEXT, RSIO_ON_NEXT_PACKED = 0x10, 0x20, 0x21, 0x22


def error_frame(stream_id: int, code: int, message: str) -> bytes:
    """An RSocket ERROR frame (no length prefix)."""
    return struct.pack(">IHI", stream_id, ERROR << 10, code) + message.encode()


def payload_frame(stream_id: int, data: bytes, *, complete: bool = False) -> bytes:
    flags = FLAG_NEXT | (FLAG_COMPLETE if complete else 0)
    return struct.pack(">IH", stream_id, PAYLOAD << 10 | flags) + data


def frame_type(frame: bytes) -> int:
    return int(struct.unpack_from(">H", frame, 4)[0]) >> 10


def stream_id(frame: bytes) -> int:
    return int(struct.unpack_from(">I", frame, 0)[0])


class Wire:
    """The peer's end of one connection: RSocket frames, rsio bytes, raw
    bytes, over TCP or inside WebSocket messages."""

    def __init__(self, sock: socket.socket, websocket: bool, stop: socket.socket) -> None:
        self.sock = sock
        self._stop = stop
        self._ws = WSConnection(ConnectionType.SERVER) if websocket else None
        self._buffer = bytearray()  # TCP bytes, or WebSocket message bytes, not taken yet
        self._messages: list[bytes] = []  # whole WebSocket messages not taken yet
        self._partial = bytearray()
        self.closed = False

    # -- reading ---------------------------------------------------------------
    def _recv(self) -> bool:
        """One read into the buffers; False at the end (or the test is over)."""
        ready, _, _ = select.select([self.sock, self._stop], [], [], WAIT)
        if not ready or self._stop in ready:
            return False
        try:
            data = self.sock.recv(65536)
        except OSError:
            return False
        if self._ws is None:
            self._buffer += data
            return bool(data)
        self._ws.receive_data(data or None)
        for event in self._ws.events():
            if isinstance(event, Request):
                self.sock.sendall(self._ws.send(AcceptConnection()))
            elif isinstance(event, BytesMessage):
                self._partial += event.data
                if event.message_finished:
                    self._messages.append(bytes(self._partial))
                    self._buffer += self._partial
                    self._partial.clear()
            elif isinstance(event, CloseConnection):
                return False
        return bool(data)

    def accept_websocket(self) -> None:
        """WebSocket: take the client's upgrade (wsproto answers 101)."""
        assert self._ws is not None
        while self._ws.state.name == "CONNECTING":
            if not self._recv():
                raise ConnectionError("the client left during the upgrade")

    def read_bytes(self, n: int) -> bytes:
        """``n`` bytes of the byte stream (rsio; over WebSocket, inside messages)."""
        while len(self._buffer) < n:
            if not self._recv():
                raise ConnectionError("the client closed")
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        self._messages.clear()
        return data

    def read_frame(self) -> bytes:
        """One RSocket frame, without its length (TCP: length-prefixed;
        WebSocket: one binary message)."""
        if self._ws is not None:
            while not self._messages:
                if not self._recv():
                    raise ConnectionError("the client closed")
            frame = self._messages.pop(0)
            del self._buffer[: len(frame)]
            return frame
        length = int.from_bytes(self.read_bytes(3), "big")
        return self.read_bytes(length)

    def read_request(self) -> tuple[int, int]:
        """Frames until the client's first request: its (stream id, type)."""
        while True:
            frame = self.read_frame()
            if frame_type(frame) in REQUESTS:
                return stream_id(frame), frame_type(frame)

    def read_rsio_subscribe(self) -> int:
        """rsio: the client's hello, then its first subscribe: the subscriber id."""
        assert self.read_bytes(3)[0] == 0x01  # client hello, no extension
        assert self.read_bytes(1)[0] == RSIO_SUBSCRIBE
        name_length = self._varint()
        self.read_bytes(name_length)
        sid = self._varint()
        self._varint()  # initial demand
        return sid

    def _varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.read_bytes(1)[0]
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    # -- writing -----------------------------------------------------------------
    def send(self, data: bytes) -> None:
        """Bytes of the stream (over WebSocket: one binary message)."""
        if self._ws is not None:
            data = self._ws.send(Message(data=data))
        self.sock.sendall(data)

    def send_frame(self, frame: bytes) -> None:
        """An RSocket frame (TCP: with its length; WebSocket: a message)."""
        self.send(frame if self._ws is not None else len(frame).to_bytes(3, "big") + frame)

    def send_partial_frame(self, frame: bytes) -> None:
        """The first bytes of ``frame`` as it goes on the wire (TCP: its
        length and 4 bytes; WebSocket: 4 bytes of its message's frame)."""
        if self._ws is not None:
            self.sock.sendall(self._ws.send(Message(data=frame))[:4])
        else:
            self.sock.sendall(len(frame).to_bytes(3, "big") + frame[:4])

    def send_partial_message(self, message: bytes) -> None:
        """The first bytes of an rsio ``message`` (TCP: 3 of its bytes;
        WebSocket: 4 bytes of the frame that carries it)."""
        if self._ws is not None:
            self.sock.sendall(self._ws.send(Message(data=message))[:4])
        else:
            self.sock.sendall(message[:3])

    def send_raw(self, data: bytes) -> None:
        """Bytes on the socket as they are (no WebSocket framing)."""
        self.sock.sendall(data)

    def ws_close(self, code: int = 1000, reason: str = "") -> None:
        assert self._ws is not None
        self.sock.sendall(self._ws.send(CloseConnection(code=code, reason=reason)))

    # -- endings ---------------------------------------------------------------------
    def hold(self) -> None:
        """Keep the socket open, reading and ignoring everything, until the
        client closes or the test ends."""
        with contextlib.suppress(OSError):
            while True:
                ready, _, _ = select.select([self.sock, self._stop], [], [], WAIT)
                if not ready or self._stop in ready or not self.sock.recv(65536):
                    return

    def half_close(self) -> None:
        """FIN from this side, still reading (half-open), until the end."""
        self.sock.shutdown(socket.SHUT_WR)
        self.hold()

    def close(self) -> None:
        self.closed = True
        self.sock.close()

    def reset(self) -> None:
        """RST: close with a zero linger."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close()


Script = Callable[[Wire], None]


class ScriptedPeer:
    """A server on 127.0.0.1 that accepts one connection and plays ``script``
    on its own thread (``websocket``: after taking the upgrade). ``url`` is
    what a client connects to; closing ends the script's waits."""

    def __init__(self, script: Script, *, websocket: bool = False) -> None:
        self._script = script
        self._websocket = websocket
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop_r, self._stop_w = socket.socketpair()
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="scripted-peer", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        port = self._listener.getsockname()[1]
        return f"ws://127.0.0.1:{port}/" if self._websocket else f"tcp://127.0.0.1:{port}"

    def _run(self) -> None:
        ready, _, _ = select.select([self._listener, self._stop_r], [], [], WAIT)
        if self._listener not in ready:
            return
        sock, _ = self._listener.accept()
        wire = Wire(sock, self._websocket, self._stop_r)
        try:
            if self._websocket:
                wire.accept_websocket()
            self._script(wire)
        except ConnectionError:
            pass  # the client went away first: the script has nothing left to do
        except BaseException as exc:
            self.failure = exc
        finally:
            if not wire.closed:
                wire.close()

    def close(self) -> None:
        self._stop_w.send(b"\0")
        self._thread.join(WAIT)
        self._listener.close()
        self._stop_r.close()
        self._stop_w.close()


@contextlib.contextmanager
def scripted_peer(script: Script, *, websocket: bool = False) -> Iterator[ScriptedPeer]:
    peer = ScriptedPeer(script, websocket=websocket)
    try:
        yield peer
    finally:
        peer.close()
