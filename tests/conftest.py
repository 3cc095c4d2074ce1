"""Session-wide test settings.

``SANSRS_TEST_MASKING=python`` runs the whole suite with the WebSocket
masking's pure-Python paths instead of the C extension (``make test-py313``
does, so CI runs every WebSocket test both ways: docs/adapters.md, "Masking
in C"). Anything else, or nothing, leaves the masking as installed.
"""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("SANSRS_TEST_MASKING") == "python":
        from sansrs.adapters.transport.websocket import frames

        frames.C_MASKING = None


def pytest_report_header(config: pytest.Config) -> str:
    try:
        from sansrs.adapters.transport.websocket import frames
    except ImportError:  # (the ws extra missing)
        return "websocket masking: not importable"
    if frames.C_MASKING is not None:
        return "websocket masking: C extension"
    built = "built" if frames.C_EXTENSION is not None else "not built"
    return f"websocket masking: pure Python (the C extension {built})"
