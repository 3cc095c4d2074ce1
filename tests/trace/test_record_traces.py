"""tests/tools/record_traces.py still records valid traces (rsocket-py through
the capture proxy), so the committed traces can be re-recorded at any time."""

from __future__ import annotations

from pathlib import Path

import pytest

from sansrs.rsocket import FrameReader, FrameType, PayloadFrame
from sansrs.trace import Direction, EndReason, EndRecord, read_trace
from tests.tools import record_traces


@pytest.mark.interop
def test_record_traces_script_records_decodable_traces(tmp_path: Path) -> None:
    args = ["--out", str(tmp_path), "--only", "request_stream", "fragmented"]
    assert record_traces.main(args) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "fragmented.rstrace",
        "request_stream.rstrace",
    ]
    trace = read_trace(tmp_path / "fragmented.rstrace")
    assert trace.metadata["exchange"] == "fragmented" and trace.metadata["fragment_size"] == 64
    ends = [r for r in trace.records if isinstance(r, EndRecord)]
    assert {e.reason for e in ends} == {EndReason.EOF} and len(ends) == 2
    for direction in Direction:
        frames = FrameReader().feed(trace.data(direction))
        assert any(isinstance(f, PayloadFrame) and f.follows for f in frames)
    frames = FrameReader().feed(
        read_trace(tmp_path / "request_stream.rstrace").data(Direction.SERVER_TO_CLIENT)
    )
    assert [f.frame_type for f in frames] == [FrameType.PAYLOAD] * 5
