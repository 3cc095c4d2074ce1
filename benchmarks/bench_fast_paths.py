"""The adapters' speed tricks against the plain construction they replace:
the figures ``adapters/rsocket/fast.py`` names (ns per object, medians of
--runs timed runs of --n objects, CPU time of this process).

    .venv/bin/python benchmarks/bench_fast_paths.py --runs 7

Rows (trick vs plain):
  payload_new_tuple / payload_call      tuple.__new__(Payload, (d, m)) vs Payload(d, m)
  request_builder / request_call        new_request(...) vs Request(d, m, peer)
  as_payload_bytes / payload_call_data  as_payload(b) (the common case) vs Payload(b)
  routed_builder / routed_call          new_routed_request(...) vs RoutedRequest(...)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from sansrs.adapters.rsocket import Payload, Request, RoutedRequest
from sansrs.adapters.rsocket.fast import as_payload, new_request, new_routed_request, new_tuple

from sansrs.rsocket.extensions import decode_metadata

DATA = b"x" * 16
META = b"m"
PEER = object()


def _payload_new_tuple(n: int) -> None:
    for _ in range(n):
        new_tuple(Payload, (DATA, META))


def _payload_call(n: int) -> None:
    for _ in range(n):
        Payload(DATA, META)


def _request_builder(n: int) -> None:
    for _ in range(n):
        new_request(DATA, META, PEER)


def _request_call(n: int) -> None:
    for _ in range(n):
        Request(DATA, META, PEER)


def _as_payload_bytes(n: int) -> None:
    for _ in range(n):
        as_payload(DATA)


def _payload_call_data(n: int) -> None:
    for _ in range(n):
        Payload(DATA)


REQUEST = Request(DATA, META, PEER)
VARIABLES = {"id": "42"}
COMPOSITE = decode_metadata(None)


def _routed_builder(n: int) -> None:
    for _ in range(n):
        new_routed_request(REQUEST, "users.42", VARIABLES, None, "text/plain", COMPOSITE)


def _routed_call(n: int) -> None:
    for _ in range(n):
        RoutedRequest(DATA, META, PEER, "users.42", VARIABLES, None, "text/plain", COMPOSITE)


def _empty(n: int) -> None:
    for _ in range(n):
        pass


ROWS: dict[str, Callable[[int], None]] = {
    "payload_new_tuple": _payload_new_tuple,
    "payload_call": _payload_call,
    "request_builder": _request_builder,
    "request_call": _request_call,
    "as_payload_bytes": _as_payload_bytes,
    "payload_call_data": _payload_call_data,
    "routed_builder": _routed_builder,
    "routed_call": _routed_call,
}
PAIRS = [
    ("payload_new_tuple", "payload_call"),
    ("request_builder", "request_call"),
    ("as_payload_bytes", "payload_call_data"),
    ("routed_builder", "routed_call"),
]


def ns_per_object(fn: Callable[[int], None], n: int, runs: int) -> float:
    """Median over ``runs`` (interleaving is the caller's), minus the empty loop."""
    times = []
    for _ in range(runs):
        start = time.process_time()
        fn(n)
        spent = time.process_time() - start
        start = time.process_time()
        _empty(n)
        times.append((spent - (time.process_time() - start)) / n * 1e9)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print("| trick | ns | plain | ns | saving |")
    print("| --- | ---: | --- | ---: | ---: |")
    for trick, plain in PAIRS:
        fast = ns_per_object(ROWS[trick], args.n, args.runs)
        slow = ns_per_object(ROWS[plain], args.n, args.runs)
        print(f"| {trick} | {fast:.0f} | {plain} | {slow:.0f} | {1 - fast / slow:.0%} |")


if __name__ == "__main__":
    main()
