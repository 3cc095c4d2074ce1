"""A seeded chaos proxy for resumption tests: a TCP proxy on 127.0.0.1 that
breaks the links it carries the ways real networks do.

Independent of ``sansrs.adapters.tools.faults`` on purpose (a second
opinion on the same guarantees), but for the WebSocket framing follower it
borrows to place message cuts (below). One thread runs a ``selectors`` loop over
every link; other threads control it through queued commands. Faults
(:class:`Fault`):

- ``RESET``: both sides get a TCP reset;
- ``FIN_TO_CLIENT`` / ``FIN_TO_SERVER``: one side gets a FIN (end of
  stream), the other stays open and hears nothing more (one-way close);
- ``HALF_OPEN_CLIENT`` / ``HALF_OPEN_SERVER``: the client's (server's) side
  is reset, the other stays open and silent (a half-open connection);
- ``STALL``: nothing is forwarded for a while, then everything is;
- ``MID_FRAME``: a few more bytes go through, then both sides are reset (a
  cut inside a frame, almost always); recorded when the link is reset;
- ``TRICKLE``: for a while, a few bytes at a time;
- ``SILENT_ACCEPT``: the next link is accepted and never answered (a RESUME
  into the void), and the current one is reset.
- ``MID_MESSAGE`` / ``AFTER_MESSAGE`` (``ChaosProxy(..., websocket=True)``
  only, :data:`WEBSOCKET_ONLY`): both sides are reset inside the next
  WebSocket data message either way (its header and half its payload
  forwarded: the peer holds a partial message) or right after one (a clean
  cut at a message boundary). The proxy follows each direction's HTTP
  upgrade and framing with the scanner of ``sansrs.adapters.tools.faults``
  (it only finds the place; cutting is this proxy's own); the fault is
  recorded when the link is reset, a few bytes after it was injected.
  Over TCP or TLS (``wss://``) a byte cut such as ``MID_FRAME`` falls
  inside a message almost always, but nothing says where.

Which links carried the session (:meth:`ChaosProxy.session_cuts`): the
proxy follows what the client says on each link. A link carried the session
once the client sent SETUP on it, or anything after its RESUME: the client
sends nothing after a RESUME until RESUME_OK (docs/resumption.md), so those
bytes prove it resumed there. A cut of a link that never carried it (its
RESUME unanswered, a WebSocket upgrade not done) needs no resume of its
own: the client was already reconnecting, and one resume covers both. The
count errs low, never high: a link cut right after RESUME_OK, before the
client said more, is not counted.

``schedule(kinds, every=(lo, hi), limit=n)`` injects a fault drawn from the
seeded ``rng`` each time ``lo..hi`` more bytes were forwarded (both ways),
at that exact byte: so cuts fall anywhere in the stream. Every fault is
recorded with its time (``faults``) for the figures of
``benchmarks/bench_resume.py``. ``gate()`` holds new links (accepted, not
forwarded) until ``release()``; ``wait_for`` waits on a condition, never
sleeping.
"""

from __future__ import annotations

import contextlib
import enum
import random
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sansrs.adapters.tools.faults import MessageCut, _Plan, _WsScanner

from sansrs.rsocket import FrameType

__all__ = ["CUTTING", "WEBSOCKET_ONLY", "ChaosProxy", "Fault", "FaultRecord", "kinds_for"]

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
#: Bytes buffered per direction before the proxy stops reading that side.
_CAP = 256 * 1024
_TICK = 0.002  # trickle: one small write per direction per tick


class Fault(enum.Enum):
    RESET = "reset"
    FIN_TO_CLIENT = "fin-to-client"
    FIN_TO_SERVER = "fin-to-server"
    HALF_OPEN_CLIENT = "half-open-client"
    HALF_OPEN_SERVER = "half-open-server"
    STALL = "stall"
    MID_FRAME = "mid-frame"
    TRICKLE = "trickle"
    SILENT_ACCEPT = "silent-accept"
    MID_MESSAGE = "mid-message"
    AFTER_MESSAGE = "after-message"


#: Faults after which the client must reconnect (the others only slow a link down).
CUTTING = frozenset(Fault) - {Fault.STALL, Fault.TRICKLE}
#: Faults that need a proxy following the WebSocket framing (``websocket=True``).
WEBSOCKET_ONLY = frozenset({Fault.MID_MESSAGE, Fault.AFTER_MESSAGE})
_WHERE = {Fault.MID_MESSAGE: "inside", Fault.AFTER_MESSAGE: "after"}


def kinds_for(websocket: bool) -> list[Fault]:
    """Every fault a proxy can inject: all of them for ``websocket=True``,
    the byte-level ones otherwise (TCP, TLS, ``wss://``)."""
    return [f for f in Fault if websocket or f not in WEBSOCKET_ONLY]


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultRecord:
    kind: Fault
    at: float  # time.monotonic() when injected
    link: int


@dataclass(eq=False)
class _Link:
    id: int
    c: socket.socket | None  # the client's side
    u: socket.socket | None  # the target's side
    to_u: bytearray = field(default_factory=bytearray)
    to_c: bytearray = field(default_factory=bytearray)
    silent: bool = False  # forwards nothing (half-open, one-way closed, swallowed)
    cut_in: int | None = None  # bytes left before a reset (MID_FRAME)
    stalled_until: float = 0.0
    trickle_until: float = 0.0
    trickle_max: int = 1
    trickle_next: float = 0.0  # no write before this (one per tick)
    #: Sides that sent FIN (their bytes are forwarded, then FIN to the other side).
    eof: set[str] = field(default_factory=set)
    fin_sent: set[str] = field(default_factory=set)
    #: WebSocket links: a scanner per side, over what that side sends.
    scanners: dict[str, _WsScanner] | None = None
    plan: _Plan | None = None  # a message cut looked for
    plan_kind: Fault | None = None
    #: The side whose buffer ends where a message cut falls: once it is
    #: written out, the link is reset (nothing more is read meanwhile).
    cut_to: str | None = None
    #: What the client sent, kept until it shows the link carried the session.
    said: bytearray = field(default_factory=bytearray)


#: Bytes of what a client said kept at most (a RESUME and the next frame's
#: head, behind a WebSocket upgrade, fit many times over).
_SAID_CAP = 16 * 1024


def _carried(said: bytes | bytearray, websocket: bool) -> bool:
    """Whether ``said`` (all a client sent on a link so far) shows that the
    link carried the session: its first frame a SETUP, or more after its
    first frame (a RESUME). Over TCP frames are length-prefixed; over
    WebSocket each is one data message (masked), after the HTTP upgrade."""
    if not websocket:
        if len(said) < 8:
            return False
        size = int.from_bytes(said[:3], "big")
        return said[7] >> 2 != FrameType.RESUME or len(said) > 3 + size
    i = said.find(b"\r\n\r\n")
    if i < 0:
        return False
    i += 4
    first_done = False
    while len(said) >= i + 2:
        op, size = said[i] & 0x0F, said[i + 1] & 0x7F
        j = i + 2 + (2 if size == 126 else 8 if size == 127 else 0)
        if len(said) < j:
            return False
        if size >= 126:
            size = int.from_bytes(said[i + 2 : j], "big")
        mask = said[j : j + 4] if said[i + 1] & 0x80 else b"\0\0\0\0"
        j += 4 if said[i + 1] & 0x80 else 0
        if op < 0x8:  # a data frame (control frames say nothing here)
            if first_done:
                return True  # a second message: the client had RESUME_OK
            if op != 0:  # a message's first frame: its frame type
                if size < 5 or len(said) < j + 5:
                    return False
                if (said[j + 4] ^ mask[0]) >> 2 != FrameType.RESUME:
                    return True
            first_done = bool(said[i] & 0x80)
        i = j + size
    return False


def _reset(sock: socket.socket | None) -> None:
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class ChaosProxy:
    """See the module notes. ``target``: (host, port) the links go to;
    ``websocket``: the links carry ``ws://`` (message cuts can be injected)."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        rng: random.Random | None = None,
        websocket: bool = False,
    ) -> None:
        self.target = target
        self.websocket = websocket
        self.rng = rng if rng is not None else random.Random()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port: int = self._listener.getsockname()[1]
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, _READ, None)
        self._waker_r, self._waker_w = socket.socketpair()
        self._waker_r.setblocking(False)
        self._sel.register(self._waker_r, _READ, None)
        self._calls: deque[Callable[[], None]] = deque()
        self._links: dict[int, _Link] = {}
        self._ids = 0
        self._held: list[socket.socket] = []
        self._gated = False
        self._silent_next = 0
        self._cond = threading.Condition()
        #: Every fault injected, in order.
        self.faults: list[FaultRecord] = []
        #: Links that carried the session (see the module notes).
        self.carried: set[int] = set()
        self.links = 0
        self.forwarded = 0
        self._kinds: Sequence[Fault] = ()
        self._every = (0, 0)
        self._left = 0
        self._next_at: int | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="chaos-proxy", daemon=True)
        self._thread.start()

    # -- any thread ----------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _call(self, fn: Callable[[], None]) -> None:
        self._calls.append(fn)
        with contextlib.suppress(OSError):
            self._waker_w.send(b"x")

    def inject(self, kind: Fault) -> None:
        """Inject ``kind`` into the newest live link now."""
        self._check([kind])
        self._call(lambda: self._inject(kind))

    def _check(self, kinds: Iterable[Fault]) -> None:
        wrong = sorted(k.value for k in kinds if k in WEBSOCKET_ONLY and not self.websocket)
        if wrong:
            raise ValueError(f"{', '.join(wrong)} need ChaosProxy(..., websocket=True)")

    def schedule(self, kinds: Iterable[Fault], *, every: tuple[int, int], limit: int) -> None:
        """Inject a fault drawn from ``kinds`` every ``every`` bytes (drawn
        between the bounds), ``limit`` times in all."""
        kinds = list(kinds)
        self._check(kinds)

        def start() -> None:
            self._kinds, self._every, self._left = kinds, every, limit
            self._next_at = self.forwarded + self.rng.randint(*every)

        self._call(start)

    def stop_faults(self) -> None:
        """No more scheduled faults (the links go on); a message cut or a
        ``MID_FRAME`` injected and not yet placed is dropped too (it would
        fall on whatever comes next, a goodbye included: a cut no resume
        could follow)."""

        def stop() -> None:
            self._next_at = None
            self._left = 0
            for link in self._links.values():
                link.plan = None
                link.cut_in = None

        self._call(stop)

    def silence(self, links: int) -> None:
        """The next ``links`` links are accepted and never answered (a server
        that went silent: a SETUP or RESUME into the void)."""
        self._call(lambda: setattr(self, "_silent_next", self._silent_next + links))

    def stall(self, seconds: float) -> None:
        """The newest live link forwards nothing either way for ``seconds``
        (it still reads each side, up to its buffer: then that side's
        sender is held), e.g. until a fault cuts it."""

        def stall() -> None:
            link = self._newest()
            if link is not None:
                link.stalled_until = time.monotonic() + seconds

        self._call(stall)

    def gate(self) -> None:
        """Hold new links (accepted, nothing forwarded) until :meth:`release`."""
        self._call(lambda: setattr(self, "_gated", True))

    def release(self) -> None:
        self._call(self._release)

    def wait_for(self, predicate: Callable[[ChaosProxy], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self), timeout)

    def cuts(self) -> int:
        with self._cond:
            return sum(1 for f in self.faults if f.kind in CUTTING)

    def session_cuts(self) -> int:
        """Links cut that had carried the session: each one needs a resume
        of its own (a cut of a link still waiting for RESUME_OK does not)."""
        with self._cond:
            return len({f.link for f in self.faults if f.kind in CUTTING} & self.carried)

    def close(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._waker_w.send(b"x")
        self._thread.join(5.0)

    def __enter__(self) -> ChaosProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the proxy thread ------------------------------------------------------------
    def _notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _run(self) -> None:
        try:
            while not self._stopped:
                self._turn()
        finally:
            for link in list(self._links.values()):
                self._drop(link, reset=True)
            for sock in self._held:
                _reset(sock)
            self._sel.close()
            self._listener.close()
            self._waker_r.close()
            self._waker_w.close()

    def _turn(self) -> None:
        now = time.monotonic()
        wait = 0.5
        for link in self._links.values():
            if link.stalled_until > now:
                wait = min(wait, link.stalled_until - now)
            if link.trickle_until > now:
                wait = min(wait, _TICK)
            self._watch(link, now)
        ready = self._sel.select(wait)
        # Commands first: one queued before a client connects applies to its link.
        while self._calls:
            self._calls.popleft()()
        for key, mask in ready:
            data = key.data
            if key.fileobj is self._listener:
                self._accept()
            elif key.fileobj is self._waker_r:
                with contextlib.suppress(OSError):
                    self._waker_r.recv(4096)
            elif isinstance(data, tuple):
                link, side = data
                if link.id in self._links:
                    self._io(link, side, mask)

    def _watch(self, link: _Link, now: float) -> None:
        writable = link.stalled_until <= now and (
            link.trickle_until <= now or link.trickle_next <= now
        )
        for sock, inbuf, outbuf in ((link.c, link.to_u, link.to_c), (link.u, link.to_c, link.to_u)):
            if sock is None:
                continue
            side = "c" if sock is link.c else "u"
            events = _READ if len(inbuf) < _CAP and side not in link.eof else 0
            if outbuf and writable and not link.silent:
                events |= _WRITE
            try:
                key = self._sel.get_key(sock)
            except KeyError:
                if events:
                    self._sel.register(sock, events, (link, side))
                continue
            if not events:
                self._sel.unregister(sock)
            elif key.events != events:
                self._sel.modify(sock, events, (link, side))

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        if self._gated:
            self._held.append(sock)
            return
        self._open(sock)

    def _release(self) -> None:
        self._gated = False
        held, self._held = self._held, []
        for sock in held:
            self._open(sock)

    def _open(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._ids += 1
        self.links += 1
        if self._silent_next:
            self._silent_next -= 1
            self._links[self._ids] = _Link(self._ids, sock, None, silent=True)
            self._notify()
            return
        try:
            up = socket.create_connection(self.target, timeout=5)
        except OSError:
            _reset(sock)
            return
        up.setblocking(False)
        for s in (sock, up):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = _Link(self._ids, sock, up)
        if self.websocket:
            link.scanners = {"c": _WsScanner(), "u": _WsScanner()}
        self._links[self._ids] = link
        self._notify()

    def _io(self, link: _Link, side: str, mask: int) -> None:
        sock = link.c if side == "c" else link.u
        if sock is None:
            return
        if mask & _READ:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:  # reset: the link is gone
                self._side_ended(link, side)
                return
            if data and side == "c" and link.id not in self.carried:
                self._follow(link, data)
            if data == b"":
                if link.silent:
                    self._side_ended(link, side)
                    return
                link.eof.add(side)  # forward what it sent, then its FIN
                self._forward_fins(link)
                return
            if data and not link.silent and link.cut_to is None:
                data = self._scan(link, side, data)
                (link.to_u if side == "c" else link.to_c).extend(data)
                if link.cut_to is not None and not (link.to_c if link.cut_to == "c" else link.to_u):
                    self._message_cut(link)  # nothing before the cut left to write
                    return
        if mask & _WRITE and link.id in self._links:
            self._flush(link, side)

    def _follow(self, link: _Link, data: bytes) -> None:
        """What the client said on ``link``: did it carry the session?"""
        if len(link.said) < _SAID_CAP:
            link.said += data
        if _carried(link.said, self.websocket):
            link.said = bytearray()
            with self._cond:
                self.carried.add(link.id)
                self._cond.notify_all()

    def _forward_fins(self, link: _Link) -> None:
        """A side that sent FIN: once its bytes went through, FIN to the
        other side; both done: the link ends (closed, not reset)."""
        for side, other, buf in (("c", link.u, link.to_u), ("u", link.c, link.to_c)):
            if side in link.eof and side not in link.fin_sent and not buf and other is not None:
                with contextlib.suppress(OSError):
                    other.shutdown(socket.SHUT_WR)
                link.fin_sent.add(side)
        if link.fin_sent >= {"c", "u"}:
            self._drop(link, reset=False)

    def _side_ended(self, link: _Link, side: str) -> None:
        """EOF or an error on one side: a live link ends (both sides reset, as
        a middlebox would); a silent one just loses that side."""
        if not link.silent:
            self._drop(link, reset=True)
            return
        self._reset_side(link, side)
        if link.c is None and link.u is None:
            self._links.pop(link.id, None)

    def _flush(self, link: _Link, side: str) -> None:
        sock = link.c if side == "c" else link.u
        buf = link.to_c if side == "c" else link.to_u
        if sock is None or not buf or link.silent:
            return
        now = time.monotonic()
        if link.stalled_until > now:
            return
        n = len(buf)
        if link.trickle_until > now:
            if link.trickle_next > now:
                return
            link.trickle_next = now + _TICK
            n = min(n, link.trickle_max)
        if link.cut_in is not None:
            n = min(n, link.cut_in)
        if self._next_at is not None:
            n = min(n, max(1, self._next_at - self.forwarded))
        try:
            sent = sock.send(bytes(buf[:n]))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            # That side closed (its kernel resets what arrives now): what is
            # for it is lost, what it sent still goes to the other side.
            buf.clear()
            link.eof.add(side)
            self._forward_fins(link)
            return
        del buf[:sent]
        self.forwarded += sent
        if link.cut_to == side and not buf:
            self._message_cut(link)
            return
        if link.eof and not buf:
            self._forward_fins(link)
            if link.id not in self._links:
                return
        if link.cut_in is not None:
            link.cut_in -= sent
            if link.cut_in <= 0:
                self._drop(link, reset=True)
                self._record(Fault.MID_FRAME, time.monotonic(), link)
                return
        if self._next_at is not None and self.forwarded >= self._next_at:
            self._scheduled_fault()

    def _scheduled_fault(self) -> None:
        self._left -= 1
        self._next_at = None
        if self._left > 0:
            self._next_at = self.forwarded + self.rng.randint(*self._every)
        self._inject(self.rng.choice(self._kinds))

    def _newest(self) -> _Link | None:
        live = [link for link in self._links.values() if not link.silent and link.u is not None]
        return max(live, key=lambda link: link.id) if live else None

    def _inject(self, kind: Fault) -> None:
        link = self._newest()
        if link is None:
            return
        rng = self.rng
        now = time.monotonic()
        if kind is Fault.RESET:
            self._drop(link, reset=True)
        elif kind is Fault.FIN_TO_CLIENT:
            self._one_way(link, fin="c")
        elif kind is Fault.FIN_TO_SERVER:
            self._one_way(link, fin="u")
        elif kind is Fault.HALF_OPEN_CLIENT:
            self._one_way(link, reset="c")
        elif kind is Fault.HALF_OPEN_SERVER:
            self._one_way(link, reset="u")
        elif kind is Fault.STALL:
            link.stalled_until = now + rng.uniform(0.05, 0.4)
        elif kind is Fault.MID_FRAME:
            link.cut_in = rng.randint(1, 40)  # recorded when it cuts (_flush)
            return
        elif kind is Fault.TRICKLE:
            link.trickle_until = now + rng.uniform(0.05, 0.25)
            link.trickle_max = rng.randint(1, 16)
        elif kind is Fault.SILENT_ACCEPT:
            self._silent_next += 1
            self._drop(link, reset=True)
        elif kind in WEBSOCKET_ONLY:
            # Recorded when the cut happens (_message_cut), at the next message.
            link.plan = _Plan(MessageCut(where=_WHERE[kind]))
            link.plan_kind = kind
            return
        self._record(kind, now, link)

    def _record(self, kind: Fault, at: float, link: _Link) -> None:
        with self._cond:
            self.faults.append(FaultRecord(kind=kind, at=at, link=link.id))
            self._cond.notify_all()

    def _scan(self, link: _Link, side: str, data: bytes) -> bytes:
        """``data`` read from ``side`` of a WebSocket link, up to where a
        planned message cut falls (then the link's ``cut_to`` is set)."""
        if link.scanners is None:
            return data
        at = link.scanners[side].scan(data, link.plan)
        if at is None:
            return data
        link.plan = None
        link.cut_to = "u" if side == "c" else "c"
        return data[:at]

    def _message_cut(self, link: _Link) -> None:
        kind = link.plan_kind
        assert kind is not None
        self._drop(link, reset=True)
        self._record(kind, time.monotonic(), link)

    def _one_way(self, link: _Link, *, fin: str = "", reset: str = "") -> None:
        """One side ends (FIN or reset); the other stays open and hears nothing more."""
        link.silent = True
        link.to_c.clear()
        link.to_u.clear()
        side = fin or reset
        sock = link.c if side == "c" else link.u
        if sock is None:
            return
        if fin:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            return  # kept open: what it sends is swallowed
        self._reset_side(link, side)

    def _reset_side(self, link: _Link, side: str) -> None:
        sock = link.c if side == "c" else link.u
        self._forget(sock)
        _reset(sock)
        if side == "c":
            link.c = None
        else:
            link.u = None

    def _forget(self, sock: socket.socket | None) -> None:
        if sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)

    def _drop(self, link: _Link, *, reset: bool) -> None:
        self._links.pop(link.id, None)
        for sock in (link.c, link.u):
            self._forget(sock)
            if reset:
                _reset(sock)
            elif sock is not None:
                sock.close()
        link.c = link.u = None
        self._notify()
