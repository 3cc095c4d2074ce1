"""A fault-injecting TCP proxy for tests and benchmarks.

    rng = random.Random(7)
    with FaultProxy(("127.0.0.1", server_port), rng=rng) as proxy:
        proxy.cut_at_random(10_000, 200_000, cuts=50)   # each link dies mid-stream
        client = connect(f"tcp://127.0.0.1:{proxy.port}", ...)

Every accepted connection is a *link* to ``target``. The proxy forwards bytes
both ways on one thread (``selectors``) and injects faults:

- **cut** (``cut_at_random`` / ``cut_after`` / ``cut_now``): a link is reset
  (RST, both sides) after a number of bytes forwarded (both directions
  together), drawn from the injected ``random.Random``; the chunk crossing
  the offset is forwarded only up to it, so frames break anywhere.
  ``cut_now(half_open=True)`` resets only the client's side (the target's
  stays open and silent: a drop only one end notices).
- **WebSocket cuts** (``FaultProxy(..., websocket=True)``; ``cut_message``,
  ``cut_messages_at_random``): the proxy follows each direction of a link
  through its HTTP upgrade and then frame by frame, and resets the link
  *inside* a data message (its header and half its payload forwarded, the
  rest never: the peer holds a partial message) or right *after* one (every
  byte of it forwarded, nothing of the next: a clean cut at a message
  boundary), optionally ``half_open``.
- **delay** (``delay``): every chunk is forwarded no sooner than ``seconds``
  after it arrived (order kept).
- **blackhole** (``blackhole``): bytes are read and dropped while on; the
  links stay open (a silent network, for keepalive timeouts).

``stats`` counts links, cuts and bytes. ``close()`` ends everything; no
method sleeps.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import random
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FaultProxy", "FaultStats", "MessageCut"]

_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


@dataclass(frozen=True, slots=True)
class MessageCut:
    """Where to cut a WebSocket link: ``where`` is ``"inside"`` or ``"after"``
    the data frame reached once ``skip`` data frames went by (counted in
    ``direction``: ``"to-server"``, ``"to-client"`` or ``"any"``)."""

    where: str = "inside"
    skip: int = 0
    direction: str = "any"

    def __post_init__(self) -> None:
        if self.where not in ("inside", "after"):
            raise ValueError('where must be "inside" or "after"')
        if self.direction not in ("to-server", "to-client", "any"):
            raise ValueError('direction must be "to-server", "to-client" or "any"')
        if self.skip < 0:
            raise ValueError("skip must be >= 0")


class _Plan:
    """A :class:`MessageCut` under way on one link: data frames still to let by."""

    __slots__ = ("cut", "left")

    def __init__(self, cut: MessageCut) -> None:
        self.cut = cut
        self.left = cut.skip

    def counts(self, to_server: bool) -> bool:
        d = self.cut.direction
        return d == "any" or (d == "to-server") == to_server


class _WsScanner:
    """Follows one direction of a WebSocket link: the HTTP head (up to its
    blank line), then each frame's header and payload, so that a cut can
    fall at a chosen place of a chosen data frame."""

    __slots__ = ("head", "header", "in_head", "in_payload", "left", "size")

    def __init__(self) -> None:
        self.in_head = True
        self.head = b""  # the last bytes of the head read so far (to find its end)
        self.header = bytearray()  # the current frame's header, as far as read
        self.in_payload = False
        self.left = 0  # payload bytes of the current frame still to come
        self.size = 0  # the current frame's payload length

    def scan(self, data: bytes, plan: _Plan | None) -> int | None:
        """Advance over ``data``; with ``plan`` (it counts this direction),
        the offset in ``data`` to reset at, or None: not in this chunk."""
        i, n = 0, len(data)
        while i < n:
            if self.in_head:
                seen = self.head + data[i:]
                end = seen.find(b"\r\n\r\n")
                if end < 0:
                    self.head = seen[-3:]
                    return None
                i += end + 4 - len(self.head)
                self.in_head = False
                continue
            if not self.in_payload:
                self.header.append(data[i])
                i += 1
                if not self._header_done():
                    continue
                self.in_payload = True
                self.left = self.size
            data_frame = self.header[0] & 0x0F < 0x8
            target = plan is not None and data_frame and plan.left == 0
            take = min(self.left, n - i)
            if target:
                assert plan is not None
                if plan.cut.where == "after" and take == self.left:
                    return i + take
                at = self.size // 2 - (self.size - self.left)  # bytes to its middle
                if plan.cut.where == "inside" and self.size >= 2 and 0 <= at < take:
                    return i + at
            i += take
            self.left -= take
            if self.left == 0:
                self.in_payload = False
                self.header.clear()
                if data_frame and plan is not None and plan.left > 0:
                    plan.left -= 1
        return None

    def _header_done(self) -> bool:
        h = self.header
        if len(h) < 2:
            return False
        length = h[1] & 0x7F
        need = 2 + (2 if length == 126 else 8 if length == 127 else 0) + (4 if h[1] & 0x80 else 0)
        if len(h) < need:
            return False
        if length == 126:
            length = int.from_bytes(h[2:4], "big")
        elif length == 127:
            length = int.from_bytes(h[2:10], "big")
        self.size = length
        return True


@dataclass
class FaultStats:
    links: int = 0  # connections accepted
    cuts: int = 0  # links reset by a cut
    forwarded: int = 0  # bytes passed on (both directions)
    dropped: int = 0  # bytes swallowed (blackhole, beyond a cut)


class _Link:
    __slots__ = ("budget", "client", "closed", "out", "plan", "scanners", "upstream")

    def __init__(
        self,
        client: socket.socket,
        upstream: socket.socket,
        budget: int | None,
        *,
        websocket: bool = False,
    ) -> None:
        self.client = client
        self.upstream = upstream
        self.budget = budget  # bytes left before the cut (None: no cut planned)
        self.out: dict[socket.socket, bytearray] = {client: bytearray(), upstream: bytearray()}
        self.closed = False
        #: WebSocket links: a scanner per destination (what goes to it).
        self.scanners: dict[socket.socket, _WsScanner] | None = (
            {client: _WsScanner(), upstream: _WsScanner()} if websocket else None
        )
        self.plan: _Plan | None = None  # a message cut under way

    def peer(self, sock: socket.socket) -> socket.socket:
        return self.upstream if sock is self.client else self.client


class FaultProxy:
    """Forward TCP connections to ``target`` with injected faults; see the module docstring."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        rng: random.Random | None = None,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        connect_timeout: float = 5.0,
        recv_size: int = 65536,
        websocket: bool = False,
    ) -> None:
        self.target = target
        #: Links carry WebSocket (``ws://``): message cuts can be planned.
        self.websocket = websocket
        self._msg_range: tuple[int, int] | None = None
        self._msg_where: tuple[str, ...] = ()
        self._next_plan: MessageCut | None = None
        self.rng = rng if rng is not None else random.Random()
        self.connect_timeout = connect_timeout
        self.recv_size = recv_size
        self.stats = FaultStats()
        self._lock = threading.Lock()  # (the condition below shares it)
        self._cut_range: tuple[int, int] | None = None
        self._cuts_left = 0
        self._next_cut: int | None = None  # cut_after: applies to the next/current link
        self._delay = 0.0
        self._blackhole = False
        self._half_open = False
        self._silent: list[socket.socket] = []  # target sides left open by half-open cuts
        self._links: list[_Link] = []
        self._delayed: list[tuple[float, int, _Link, socket.socket, bytes]] = []
        self._seq = itertools.count()
        self._listener = socket.create_server(listen)
        self._listener.setblocking(False)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._stop = False
        self._cut_event = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()

    # -- control (any thread) ----------------------------------------------

    @property
    def port(self) -> int:
        return self.address[1]

    def cut_at_random(self, low: int, high: int, *, cuts: int) -> None:
        """Reset each link after a uniform random number of bytes in
        ``low..high`` (both directions), ``cuts`` times in all."""
        if not 0 <= low <= high or cuts < 0:
            raise ValueError("need 0 <= low <= high and cuts >= 0")
        with self._lock:
            self._half_open = False
            self._cut_range = (low, high)
            self._cuts_left = cuts
            for link in self._links:
                if link.budget is None and self._cuts_left > 0:
                    link.budget = self.rng.randint(low, high)
        self._wake()

    def cut_after(self, nbytes: int) -> None:
        """Reset the current link (or the next one) after ``nbytes`` more bytes."""
        with self._lock:
            self._half_open = False
            live = [link for link in self._links if not link.closed]
            if live:
                live[-1].budget = nbytes
            else:
                self._next_cut = nbytes
        self._wake()

    def cut_message(
        self,
        where: str = "inside",
        *,
        skip: int = 0,
        direction: str = "any",
        half_open: bool = False,
    ) -> None:
        """WebSocket links: reset the current link (or the next one) inside
        (``where="inside"``: its header and half its payload forwarded) or
        right after (``"after"``) the data frame reached once ``skip`` more
        data frames went by in ``direction`` (``"to-server"``,
        ``"to-client"``, ``"any"``). ``half_open``: as :meth:`cut_now`."""
        cut = MessageCut(where=where, skip=skip, direction=direction)
        self._need_websocket()
        with self._lock:
            self._half_open = half_open
            live = [link for link in self._links if not link.closed]
            if live:
                live[-1].plan = _Plan(cut)
            else:
                self._next_plan = cut
        self._wake()

    def cut_messages_at_random(
        self, low: int, high: int, *, cuts: int, where: tuple[str, ...] = ("inside", "after")
    ) -> None:
        """WebSocket links: reset each link inside or after (drawn from
        ``where``) the data frame reached once a uniform random number of
        data frames in ``low..high`` went by (both directions), ``cuts``
        times in all."""
        if not 0 <= low <= high or cuts < 0:
            raise ValueError("need 0 <= low <= high and cuts >= 0")
        for w in where:
            MessageCut(where=w)  # checks it
        self._need_websocket()
        with self._lock:
            self._half_open = False
            self._msg_range = (low, high)
            self._msg_where = where
            self._cuts_left = cuts
            for link in self._links:
                if link.plan is None and not link.closed:
                    link.plan = self._random_plan()
        self._wake()

    def _need_websocket(self) -> None:
        if not self.websocket:
            raise ValueError("message cuts need FaultProxy(..., websocket=True)")

    def _random_plan(self) -> _Plan | None:
        """Under the lock: a random message cut for a link, if any are due."""
        if self._msg_range is None or self._cuts_left <= 0:
            return None
        where = self.rng.choice(self._msg_where)
        return _Plan(MessageCut(where=where, skip=self.rng.randint(*self._msg_range)))

    def cut_now(self, *, half_open: bool = False) -> None:
        """Reset every open link. ``half_open``: reset only the client's side;
        the target's side stays open and silent (as after a NAT or route
        loss that only one end notices), until ``close()``."""
        with self._lock:
            self._half_open = half_open
            for link in self._links:
                link.budget = 0
        self._wake()

    def delay(self, seconds: float) -> None:
        """Forward each chunk ``seconds`` after it arrived (0: no delay)."""
        if seconds < 0:
            raise ValueError("delay must be >= 0")
        with self._lock:
            self._delay = seconds
        self._wake()

    def blackhole(self, on: bool = True, *, cut: bool = False) -> None:
        """Swallow every byte while on (links stay open). ``cut``: reset every
        open link in the same step (the network comes back, its connections
        do not): turning the blackhole off and then calling :meth:`cut_now`
        would let a link forward the rest of a frame whose start was
        swallowed, which the peer reads as garbage."""
        with self._lock:
            self._blackhole = on
            if cut:
                for link in self._links:
                    link.budget = 0
        self._wake()

    def wait_cuts(self, n: int, timeout: float) -> bool:
        """Wait until ``n`` cuts happened in all; True if they did in time."""
        return self.wait_until(lambda stats: stats.cuts >= n, timeout)

    def wait_until(self, predicate: Callable[[FaultStats], bool], timeout: float) -> bool:
        """Wait until ``predicate(stats)`` holds (checked at every cut and
        every dropped chunk); True if it did in time."""
        with self._cut_event:
            return self._cut_event.wait_for(lambda: predicate(self.stats), timeout)

    def close(self) -> None:
        self._stop = True
        self._wake()
        if self._thread is not threading.current_thread():
            self._thread.join(10.0)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    # -- the proxy thread ----------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop:
                timeout = None
                if self._delayed:
                    timeout = max(0.0, self._delayed[0][0] - time.monotonic())
                for key, _ in self._sel.select(timeout):
                    sock = key.fileobj
                    if sock is self._listener:
                        self._accept()
                    elif sock is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                        self._apply_budgets()
                    else:
                        assert isinstance(sock, socket.socket)
                        self._service(key.data, sock)
                self._release_delayed()
        finally:
            for link in list(self._links):
                self._close_link(link, reset=True, count=False)
            self._sel.close()
            for s in (self._listener, self._wake_r, self._wake_w, *self._silent):
                s.close()

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        try:
            upstream = socket.create_connection(self.target, timeout=self.connect_timeout)
        except OSError:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            client.close()
            return
        for s in (client, upstream):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            budget = self._next_cut
            self._next_cut = None
            if budget is None and self._cut_range is not None and self._cuts_left > 0:
                budget = self.rng.randint(*self._cut_range)
            link = _Link(client, upstream, budget, websocket=self.websocket)
            cut, self._next_plan = self._next_plan, None
            link.plan = _Plan(cut) if cut is not None else self._random_plan()
            self._links.append(link)
            self.stats.links += 1
        self._sel.register(client, selectors.EVENT_READ, link)
        self._sel.register(upstream, selectors.EVENT_READ, link)

    def _apply_budgets(self) -> None:
        for link in list(self._links):
            if not link.closed and link.budget is not None and link.budget <= 0:
                self._close_link(link, reset=True, count=True)

    def _service(self, link: _Link, sock: socket.socket) -> None:
        if link.closed:
            return
        try:
            data = sock.recv(self.recv_size)
        except (BlockingIOError, InterruptedError):
            data = None
        except OSError:
            self._close_link(link, reset=True, count=False)
            return
        if data == b"":
            # One side ended: end the other the same way (then forget the link).
            self._flush(link, link.peer(sock))
            self._close_link(link, reset=False, count=False)
            return
        if data:
            self._forward(link, link.peer(sock), data)
        self._flush(link, link.client)
        self._flush(link, link.upstream)

    def _forward(self, link: _Link, dst: socket.socket, data: bytes) -> None:
        with self._lock:
            if self._blackhole:
                self.stats.dropped += len(data)
                self._cut_event.notify_all()
                return
            budget = link.budget
            if link.scanners is not None:
                plan = link.plan
                if plan is not None and not plan.counts(dst is link.upstream):
                    plan = None
                at = link.scanners[dst].scan(data, plan)
                if at is not None:
                    link.plan = None
                    budget = at if budget is None else min(budget, at)
            cut = budget is not None and len(data) >= budget
            if cut:
                assert budget is not None
                self.stats.dropped += len(data) - budget
                data = data[:budget]
                link.budget = 0
            elif budget is not None:
                link.budget = budget - len(data)
            delay = self._delay
        if delay > 0 and not cut:
            heapq.heappush(
                self._delayed, (time.monotonic() + delay, next(self._seq), link, dst, data)
            )
            return
        link.out[dst] += data
        self.stats.forwarded += len(data)
        if cut:
            self._flush(link, dst)
            self._close_link(link, reset=True, count=True)

    def _release_delayed(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, link, dst, data = heapq.heappop(self._delayed)
            if link.closed:
                continue
            link.out[dst] += data
            self.stats.forwarded += len(data)
            self._flush(link, dst)

    def _flush(self, link: _Link, dst: socket.socket) -> None:
        buf = link.out[dst]
        if link.closed or not buf:
            return
        try:
            sent = dst.send(buf)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close_link(link, reset=True, count=False)
            return
        del buf[:sent]
        want = selectors.EVENT_READ | (selectors.EVENT_WRITE if buf else 0)
        self._sel.modify(dst, want, link)

    def _close_link(self, link: _Link, *, reset: bool, count: bool) -> None:
        if link.closed:
            return
        link.closed = True
        for s in (link.client, link.upstream):
            with contextlib.suppress(Exception):
                self._sel.unregister(s)
            if count and self._half_open and s is link.upstream:
                self._silent.append(s)  # never read, never written, never closed (yet)
                continue
            if reset:
                with contextlib.suppress(OSError):
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            else:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            s.close()
        with self._cut_event:
            self._links.remove(link)
            if count:
                self.stats.cuts += 1
                planned = self._cut_range is not None or self._msg_range is not None
                if planned and self._cuts_left > 0:
                    self._cuts_left -= 1
            self._cut_event.notify_all()
