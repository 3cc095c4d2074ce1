"""The cores' speed tricks against the plain code they replace: the figures
``sansrs/rsocket/_fast.py`` and ``sansrs/rsio/_fast.py`` name (ns per
operation, CPU time of this process, the empty loop subtracted; the trick and
the plain code run alternately, each figure the median of --runs runs of --n
operations).

    .venv/bin/python benchmarks/bench_core_fast_paths.py --runs 7

Rows (trick vs plain):
  rsocket_event_builder / rsocket_event_call   _fast.payload_event(...) vs PayloadReceived(...)
  rsocket_frame_new / rsocket_frame_call       _fast.payload_frame(...) vs PayloadFrame(...)
  rsocket_pack_bound / rsocket_pack_imported   a Struct's bound pack imported by name vs
                                               ``S.pack`` on a Struct imported by name
  enum_identity_hash / enum_default_hash       a state-table lookup, members hashed by
                                               identity vs by Enum's own __hash__
  rsio_next_event / rsio_next_call             _fast.next_event(...) vs NextReceived(...)
  rsio_varint1 / rsio_varint_encode            _fast.VARINT1[n] vs encode_varint(n), n < 128
"""

from __future__ import annotations

import argparse
import enum
import statistics
import time
from collections.abc import Callable

from sansrs.rsio import encode_varint
from sansrs.rsio import events as rsio_events
from sansrs.rsio._fast import VARINT1, next_event
from sansrs.rsocket import CONNECTION_TRANSITIONS, ConnectionInput, ConnectionState, PayloadFrame
from sansrs.rsocket._fast import (
    _PREFIX_HEADER,
    PAYLOAD_ITEM,
    pack_prefix_header,
    payload_event,
    payload_frame,
)
from sansrs.rsocket.events import PayloadReceived

DATA = b"0123456789abcdef"
_State = enum.Enum("_State", [(s.name, s.value) for s in ConnectionState])  # type: ignore[misc]
_Input = enum.Enum("_Input", [(i.name, i.value) for i in ConnectionInput])  # type: ignore[misc]
_PLAIN_TABLE = {
    (_State[s.name], _Input[i.name]): _State[n.name] for (s, i), n in CONNECTION_TRANSITIONS.items()
}
_KEY = (ConnectionState.ESTABLISHED, ConnectionInput.CLOSE)
_PLAIN_KEY = (_State["ESTABLISHED"], _Input["CLOSE"])


def _rsocket_event_builder(n: int) -> None:
    for _ in range(n):
        payload_event(1, DATA, None, False, True)


def _rsocket_event_call(n: int) -> None:
    for _ in range(n):
        PayloadReceived(stream_id=1, data=DATA, metadata=None, complete=False, next=True)


def _rsocket_frame_new(n: int) -> None:
    for _ in range(n):
        payload_frame(1, DATA, PAYLOAD_ITEM)


def _rsocket_frame_call(n: int) -> None:
    for _ in range(n):
        PayloadFrame(1, DATA, None, False, False, True, False)


def _rsocket_pack_bound(n: int) -> None:
    for _ in range(n):
        pack_prefix_header(0, 22, 1, PAYLOAD_ITEM)


def _rsocket_pack_imported(n: int) -> None:
    for _ in range(n):
        _PREFIX_HEADER.pack(0, 22, 1, PAYLOAD_ITEM)


def _enum_identity_hash(n: int) -> None:
    table, key = CONNECTION_TRANSITIONS, _KEY
    for _ in range(n):
        table.get(key)


def _enum_default_hash(n: int) -> None:
    table, key = _PLAIN_TABLE, _PLAIN_KEY
    for _ in range(n):
        table.get(key)


def _rsio_next_event(n: int) -> None:
    for _ in range(n):
        next_event(1, DATA)


def _rsio_next_call(n: int) -> None:
    for _ in range(n):
        rsio_events.NextReceived(subscriber_id=1, element=DATA)


def _rsio_varint1(n: int) -> None:
    for _ in range(n):
        VARINT1[100]


def _rsio_varint_encode(n: int) -> None:
    for _ in range(n):
        encode_varint(100)


def _empty(n: int) -> None:
    for _ in range(n):
        pass


PAIRS: list[tuple[str, Callable[[int], None], str, Callable[[int], None]]] = [
    ("rsocket_event_builder", _rsocket_event_builder, "rsocket_event_call", _rsocket_event_call),
    ("rsocket_frame_new", _rsocket_frame_new, "rsocket_frame_call", _rsocket_frame_call),
    ("rsocket_pack_bound", _rsocket_pack_bound, "rsocket_pack_imported", _rsocket_pack_imported),
    ("enum_identity_hash", _enum_identity_hash, "enum_default_hash", _enum_default_hash),
    ("rsio_next_event", _rsio_next_event, "rsio_next_call", _rsio_next_call),
    ("rsio_varint1", _rsio_varint1, "rsio_varint_encode", _rsio_varint_encode),
]


def _ns(fn: Callable[[int], None], n: int) -> float:
    start = time.process_time()
    fn(n)
    spent = time.process_time() - start
    start = time.process_time()
    _empty(n)
    return (spent - (time.process_time() - start)) / n * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300_000, help="operations per run")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--only", nargs="*", default=[], help="trick names (default: all)")
    args = parser.parse_args()
    rows = [pair for pair in PAIRS if not args.only or pair[0] in args.only]
    print("| trick | ns | plain | ns | saving |\n| --- | ---: | --- | ---: | ---: |")
    for trick, fast_fn, plain, plain_fn in rows:
        fast: list[float] = []
        slow: list[float] = []
        for _ in range(args.runs):  # alternate, so load hits both alike
            fast.append(_ns(fast_fn, args.n))
            slow.append(_ns(plain_fn, args.n))
        f, s = statistics.median(fast), statistics.median(slow)
        print(f"| {trick} | {f:.0f} | {plain} | {s:.0f} | {1 - f / s:.0%} |")


if __name__ == "__main__":
    main()
