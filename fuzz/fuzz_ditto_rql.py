"""Fuzz target: arbitrary filter text into ``sansrs.adapters.ditto.rql.parse_rql``
(the RQL a Ditto client sends in ``filter``, evaluated by the history sources).

Rule: ``parse_rql`` raises nothing but ``RqlError``; a predicate it returns
evaluates every sample object (things, events, odd JSON) to a ``bool`` without
raising.

Input: UTF-8 text (invalid bytes become lone surrogates). Seeds:
fuzz/corpus/ditto_rql/ (``python fuzz/fuzz_ditto_rql.py --make-corpus``).
"""

from __future__ import annotations

import sys
from typing import Any

from fuzz._harness import instrumented, run

with instrumented(__name__):
    from sansrs.adapters.ditto.rql import RqlError, parse_rql

SAMPLES: list[Any] = [
    {},
    {"thingId": "ns:t", "attributes": {"n": 5, "s": "Kitchen", "b": True, "z": None},
     "features": {"f": {"properties": {"v": [1, 2]}}}, "_revision": 3},
    {"a": {"b": {"c": "x" * 64}}, "n": -1.5e300},
    [],
    "text",
]


def test_one_input(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    try:
        predicate = parse_rql(text)
    except RqlError:
        return
    for sample in SAMPLES:
        result = predicate(sample)
        if type(result) is not bool:
            raise AssertionError(f"predicate returned {result!r} for {text!r}")


def make_corpus() -> None:
    import hashlib
    from pathlib import Path

    folder = Path(__file__).resolve().parent / "corpus" / "ditto_rql"
    folder.mkdir(parents=True, exist_ok=True)
    seeds = [
        'eq(attributes/s,"Kitchen")',
        "and(gt(attributes/n,1),lt(/attributes/n,9),not(exists(features)))",
        'or(in(thingId,"a","b"),like(attributes/s,"K?t*"),ilike(attributes/s,"*EN"))',
        "ge(_revision,2)",
        'eq(a,"esc\\"aped")',
        "ne(attributes/z,null)",
        "le(n,-1.5e300)",
    ]
    for seed in seeds:
        raw = seed.encode("utf-8")
        (folder / hashlib.sha1(raw).hexdigest()[:16]).write_bytes(raw)


if __name__ == "__main__":
    if sys.argv[1:] == ["--make-corpus"]:
        make_corpus()
    else:
        run(test_one_input)
