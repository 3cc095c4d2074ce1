"""``make bench``'s data path: benchmarks/run_all.py --json writes what the
scripts print as tables (with command, date and load), benchmarks/charts.py
draws docs/performance.md's SVG charts from it, and the checked-in
benchmarks/results/latest.json holds the figures the page states."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "latest.json"
PAGE = ROOT / "docs" / "performance.md"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


run_all = _module("run_all")
charts = _module("charts")

PRINTED = """bench_x: 3 runs, medians
| scenario | sansrs | raw |
| --- | ---: | ---: |
| stream16 | 650,113 | 3,461,627 |
| rr64 | 125,893 | - |

memory: 12 MiB
| op | frames/s |
|---|---|
| decode | 1.9M |
"""


def test_run_all_parses_every_table_a_benchmark_prints() -> None:
    assert run_all.parse_tables(PRINTED) == [
        {
            "columns": ["scenario", "sansrs", "raw"],
            "rows": [["stream16", "650,113", "3,461,627"], ["rr64", "125,893", "-"]],
        },
        {"columns": ["op", "frames/s"], "rows": [["decode", "1.9M"]]},
    ]


def test_run_all_json_records_command_date_load_and_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "bench_fake.py"
    script.write_text(f"print({PRINTED!r})\n")
    monkeypatch.setattr(run_all, "benchmarks", lambda: {"fake": script})
    out = tmp_path / "results" / "latest.json"
    assert run_all.main(["--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["schema"] == run_all.SCHEMA and document["source"].startswith("measured")
    run = document["benchmarks"]["fake"]
    assert run["command"] == f".venv/bin/python {script}"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", run["date"])
    assert re.fullmatch(r"\d+\.\d-\d+\.\d", run["load"]) and run["exit"] == 0
    assert run["tables"] == run_all.parse_tables(PRINTED)


def test_checked_in_results_have_the_schema_run_all_writes() -> None:
    document = json.loads(RESULTS.read_text())
    assert document["schema"] == run_all.SCHEMA
    for name, run in document["benchmarks"].items():
        assert f"benchmarks/bench_{name}.py" in run["command"], name
        assert {"command", "date", "load", "exit", "tables"} <= set(run), name
        assert all(len(row) == len(t["columns"]) for t in run["tables"] for row in t["rows"])


def test_transcribed_results_are_the_figures_docs_performance_states() -> None:
    document = json.loads(RESULTS.read_text())
    if not document["source"].startswith("transcribed"):
        pytest.skip("latest.json holds fresh runs (make bench): the page is updated by hand")
    page = PAGE.read_text()
    for name, run in document["benchmarks"].items():
        assert run["command"] in page, name
        for table in run["tables"]:
            for row in table["rows"]:
                for cell in row[1:]:
                    if charts.number(cell) is not None and "," in cell:
                        assert cell in page, (name, row[0], cell)


def test_every_chart_is_checked_in_and_shown_in_docs_performance() -> None:
    page = PAGE.read_text()
    for chart in charts.CHARTS:
        assert (ROOT / "docs" / "images" / chart.file).is_file(), chart.file
        assert f"](images/{chart.file})" in page, chart.file


def test_charts_draw_an_svg_of_real_figures_per_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    assert charts.main([str(RESULTS), str(tmp_path)]) == 0
    document = json.loads(RESULTS.read_text())
    for chart in charts.CHARTS:
        svg = (tmp_path / chart.file).read_text()
        assert svg.startswith("<?xml") and "<svg" in svg
        run = document["benchmarks"][chart.benchmark]
        assert run["date"] in svg  # the caption names the run
        first = run["tables"][0]["rows"][0]
        column = run["tables"][0]["columns"].index(chart.bars[0][0])
        assert first[column] in svg  # a bar's figure, as measured


def test_charts_skip_a_benchmark_the_results_lack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"schema": 1, "source": "measured", "benchmarks": {}}))
    assert charts.main([str(partial), str(tmp_path / "out")]) == 0
    assert "bench-tcp.svg: no figures for 'tcp'" in capsys.readouterr().out
    assert not list((tmp_path / "out").iterdir())
