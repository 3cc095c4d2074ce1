"""`make demo` runs examples/demo.py: it must pass its own checks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo.py"


def test_demo_runs_end_to_end_and_checks_pass(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("sansrs_demo", DEMO)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.main(["--items", "2000", "--channel", "300"]) == 0
    out = capsys.readouterr().out
    assert "lost: 0   extra: 0" in out
    assert "all checks passed" in out
