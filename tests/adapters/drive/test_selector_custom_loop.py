"""examples/custom_loop.py (the core driven by a hand-written select loop) runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "custom_loop.py"


def test_custom_loop_example_runs_to_completion() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=50, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "request-response echo: b'hello from a custom loop'" in result.stdout
    assert "stream: 1000 items, first b'0', last b'999'" in result.stdout
