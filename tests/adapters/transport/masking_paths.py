"""Running the WebSocket masking's C or pure-Python paths in a test."""

from __future__ import annotations

import shutil
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sansrs.adapters.transport.websocket import frames


@contextmanager
def masking(path: str) -> Iterator[None]:
    """Run the ``"python"`` or the ``"c"`` masking paths meanwhile."""
    before = frames.C_MASKING
    frames.C_MASKING = frames.C_EXTENSION if path == "c" else None
    try:
        yield
    finally:
        frames.C_MASKING = before


#: Both masking paths, as the parameter ``path`` (the C one where the
#: extension was built: test_websocket_c_masking.py fails on a machine that
#: could have built it and did not).
BOTH = pytest.mark.parametrize("path", [
    "python",
    pytest.param("c", marks=pytest.mark.skipif(
        frames.C_EXTENSION is None, reason="the C extension was not built")),
])


def can_build_c() -> bool:
    """A C compiler and the Python headers: what setup.py's optional build needs."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    include = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(cc) is not None and include.is_file()
