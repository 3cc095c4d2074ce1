"""Writes of a :class:`~.connection.LoopConnection` (its methods, bound in
its class; they run on the owner thread): the engine's output written as
the socket takes it, joined or as the engine's pieces (``GATHER_AT``);
what a short send leaves waits in order, the cut piece's tail copied
(``_out``) and the pieces after it kept as they are (``_rest``); a failed
write kept for the turn to finish the connection with."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate
from typing import Protocol

from ..transport import Transport
from ..transport.tcp import MAX_PIECES
from .engine import Engine

__all__ = [
    "GATHER_AT",
    "Writer",
    "after_send",
    "write",
    "write_bytes",
    "write_now",
    "write_pieces",
    "write_rest",
]

#: Queued output from which ``write_now`` writes the engine's pieces with
#: one ``sendmsg`` rather than joined (``Engine.pieces_to_send``): below it
#: a join costs less than a buffer per piece (bench_tcp.py rr64), above it
#: the copy of a join costs more, and its fresh memory (a server writes up
#: to ``max_queued_output`` at once) page faults (stream1k, stream1kb).
GATHER_AT = 64 * 1024


class Writer(Protocol):
    """The connection as its writes see it (each attribute documented where
    :class:`~.connection.LoopConnection` defines it)."""

    engine: Engine
    transport: Transport
    _out: bytearray
    _rest: list[bytes]
    _rest_size: int
    _held: Callable[[], int] | None
    _gather: Callable[[int], list[bytes] | None] | None
    _wrote: bool
    _done: bool
    _abort: bool
    _send_error: OSError | None

    def _write(self, data: bytes) -> None: ...

    def _write_pieces(self, pieces: list[bytes]) -> None: ...

    def _after_send(self, pieces: list[bytes], sent: int, carried: int) -> list[bytes] | None: ...

    def _write_rest(self) -> None: ...


def write_now(self: Writer, *, pieces: bool = False) -> None:
    """Owner: take the engine's output and write what the socket accepts.
    The turn ends with it (``pieces``: a large output, a stream's pumped
    items, as the engine's pieces, see ``GATHER_AT``); an engine calls it
    mid-turn to write the output queued so far (answers), so the peer
    can start on it while the rest of the input is handled (see
    ``RSocketEngine``). A failed write is kept for the turn's service to
    finish the connection."""
    if self._done or self._abort or self._send_error is not None:
        return
    gather = self._gather
    if pieces and gather is not None:
        held = self._held
        if self._out or (held is not None and held()):
            # The older bytes first (a WebSocket transport's own too). A
            # socket that takes them all (a turn its room woke) takes the
            # engine's output as pieces next; one still full leaves that
            # output in the engine (bounded there by max_queued_output,
            # which stops the pump) until it has room, rather than joined
            # and copied in after them (bench_tcp.py stream1k, stream1kb
            # while the reader is behind).
            self._write(b"")
            if self._out or self._send_error is not None or (held is not None and held()):
                return
        output = gather(GATHER_AT)
        if output is not None:
            self._write_pieces(output)
            return
    self._write(self.engine.data_to_send())


def write_pieces(self: Writer, pieces: list[bytes]) -> None:
    """Owner, nothing older waiting: write the engine's output as
    ``pieces`` (the transport's ``send_pieces``, a batch of them per
    call) while the socket takes them whole. What it does not take
    waits: the tail of the piece it cut in ``_out`` (a copy of one
    piece at most), the pieces after it in ``_rest`` as they are."""
    send = self.transport.send_pieces  # type: ignore[attr-defined]
    left: list[bytes] | None = pieces
    while left:
        try:
            sent: int = send(left)
        except OSError as exc:
            self._send_error = exc
            return
        if sent:
            self._wrote = True  # the turn stamps the time (idle_timeout)
        left = self._after_send(left, sent, MAX_PIECES)


def after_send(self: Writer, pieces: list[bytes], sent: int, carried: int) -> list[bytes] | None:
    """After a ``send_pieces`` that offered the first ``carried`` of
    ``pieces`` and took ``sent`` bytes: the pieces after those when it
    took them all; else None, what it did not take kept (``_out``,
    ``_rest``)."""
    # Bytes at the end of each piece the call could have taken.
    ends = list(accumulate(map(len, pieces[:carried])))
    if sent == ends[-1]:
        return pieces[carried:]
    whole = bisect_right(ends, sent)  # pieces written whole; the next is cut
    self._out += memoryview(pieces[whole])[sent - (ends[whole - 1] if whole else 0) :]
    rest = self._rest = pieces[whole + 1 :]
    self._rest_size = sum(map(len, rest))
    return None


def write_bytes(self: Writer, data: bytes) -> None:
    """Owner: write ``data``, output the engine handed over itself (the
    express latency path under asyncio), after anything older; what the
    socket does not take now waits for the reactor."""
    if self._done or self._abort or self._send_error is not None:
        return
    self._write(data)


def write(self: Writer, data: bytes) -> None:
    out = self._out
    if data:
        if not out:
            # Nothing older waits: the bytes go as they are (no copy into
            # the buffer and out again; the common case). A transport
            # holding bytes of its own (WebSocket) writes those first.
            try:
                sent = self.transport.send(data)
            except OSError as exc:
                self._send_error = exc
                return
            if sent < len(data):
                out += memoryview(data)[sent:]
            if sent:
                self._wrote = True  # the turn stamps the time (idle_timeout)
            return
        if self._rest:  # after the pieces waiting: kept as they are
            self._rest.append(data)
            self._rest_size += len(data)
        else:
            out += data
    if self._rest:
        self._write_rest()
        return
    if out or (self._held is not None and self._held()):
        try:
            sent = self.transport.send(out)
        except OSError as exc:
            self._send_error = exc
            return
        if sent:
            del out[:sent]
            self._wrote = True  # the turn stamps the time (idle_timeout)


def write_rest(self: Writer) -> None:
    """Owner: ``_out`` (a cut piece's tail), then the pieces waiting
    after it (``_rest``): one ``send_pieces`` offering all of them (a
    TLS write retried after WANT_WRITE is offered the same bytes again,
    as OpenSSL requires), then on as :meth:`_write_pieces`."""
    out = self._out
    n = len(out)
    try:
        sent: int = self.transport.send_pieces([out, *self._rest])  # type: ignore[attr-defined]
    except OSError as exc:
        self._send_error = exc
        return
    if sent:
        self._wrote = True  # the turn stamps the time (idle_timeout)
    if sent < n:
        del out[:sent]
        return
    del out[:]
    rest, self._rest, self._rest_size = self._rest, [], 0
    left = self._after_send(rest, sent - n, MAX_PIECES - 1)
    if left:
        self._write_pieces(left)
