"""Shared plumbing of the fuzz targets (see docs/fuzzing.md).

A target is a file ``fuzz/fuzz_<name>.py`` that

- imports the code under test inside ``with instrumented(__name__):`` (so
  atheris instruments ``sansrs`` for coverage when the file runs as a fuzzer,
  and plain imports happen when a test imports the module),
- defines ``test_one_input(data: bytes) -> None``, which lets
  ``RemoteProtocolError`` through silently and checks its own invariants
  with plain ``assert`` / ``raise AssertionError`` (any other exception is
  a crash),
- ends with ``if __name__ == "__main__": run(test_one_input)``.

Its seeds live in ``fuzz/corpus/<name>/``. ``fuzz/run_all.py`` finds every
target by that file name pattern.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any


def instrumented(module_name: str) -> AbstractContextManager[Any]:
    """``atheris.instrument_imports`` for the ``sansrs`` package when fuzzing."""
    if module_name != "__main__":
        return contextlib.nullcontext()
    import atheris

    hook: AbstractContextManager[Any] = atheris.instrument_imports(include=["sansrs"])
    return hook


def run(test_one_input: Callable[[bytes], None]) -> None:
    """Hand ``test_one_input`` to libFuzzer with the command-line options."""
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


def last_prefixed_record(data: bytes) -> bytes | None:
    """The last complete record of a 24-bit length-prefixed byte stream (an
    RSocket connection's output): the frame a connection queued last."""
    last = None
    off = 0
    while off + 3 <= len(data):
        n = int.from_bytes(data[off : off + 3], "big")
        last = data[off + 3 : off + 3 + n]
        off += 3 + n
    return last


def write_corpus(name: str, seeds: list[bytes]) -> None:
    """Replace fuzz/corpus/<name>/ with ``seeds`` (files named by content hash)."""
    import hashlib
    from pathlib import Path

    folder = Path(__file__).resolve().parent / "corpus" / name
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {hashlib.sha1(s).hexdigest()[:16]: s for s in seeds}
    for old in folder.iterdir():
        if old.name not in wanted:
            old.unlink()
    for file_name, seed in wanted.items():
        (folder / file_name).write_bytes(seed)


def main(
    test_one_input: Callable[[bytes], None], name: str, seeds: Callable[[], list[bytes]]
) -> None:
    """A target's entry point: ``--make-corpus`` writes its seeds, else fuzz."""
    if sys.argv[1:] == ["--make-corpus"]:
        write_corpus(name, seeds())
    else:
        run(test_one_input)
