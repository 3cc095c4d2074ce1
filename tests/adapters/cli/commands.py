"""Running the ``sansrs`` command in the CLI tests: one command to its end
(:func:`sansrs`), or a server for the length of a ``with`` (:func:`served`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

WAIT = 30.0


def sansrs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sansrs", *args], capture_output=True, text=True, timeout=WAIT
    )


@contextmanager
def served(*argv: str) -> Iterator[str]:
    """``sansrs serve *argv`` in a process of its own: the address it printed
    READY with; stopped by SIGTERM at the end (a clean shutdown, exit 0)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sansrs", "serve", *argv], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        ready, address = proc.stdout.readline().split()
        assert ready == "READY"
        yield address
    finally:
        proc.terminate()
        assert proc.wait(WAIT) == 0
