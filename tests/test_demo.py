"""`make demo-rsocket` runs examples/demo.py: it must pass its own checks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

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


# -- `make demo`: the Spark pipeline (examples/pipeline.py) -------------------
# The pipeline itself runs end to end in tests/adapters/spark/test_jobs.py on the
# shared SparkSession (a second JVM here would double the start-up cost).

PIPELINE = DEMO.parent / "pipeline.py"
MAKEFILE = DEMO.parent.parent / "Makefile"


def _load_pipeline() -> Any:
    spec = importlib.util.spec_from_file_location("sansrs_pipeline_cli", PIPELINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_make_demo_runs_the_pipeline_and_demo_rsocket_the_old_demo() -> None:
    text = MAKEFILE.read_text()
    assert "demo: $(STAMP)\n\t$(PY) examples/pipeline.py\n" in text
    assert "demo-rsocket: $(STAMP)\n\t$(PY) examples/demo.py\n" in text
    extras = next(line for line in text.splitlines() if line.startswith("EXTRAS"))
    assert "spark" in extras.split("=", 1)[1].split(",")


class _Started(Exception):
    pass


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], None, "local[2]"),
        ([], "spark://cluster:7077", "spark://cluster:7077"),
        (["--master", "local[3]"], "spark://cluster:7077", "local[3]"),
    ],
)
def test_pipeline_master_from_option_or_environment(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], env: str | None, expected: str
) -> None:
    if env is None:
        monkeypatch.delenv("SANSRS_SPARK_MASTER", raising=False)
    else:
        monkeypatch.setenv("SANSRS_SPARK_MASTER", env)
    pipeline = _load_pipeline()
    seen: list[str] = []

    def fake_session(name: str, master: str) -> None:
        seen.append(master)
        raise _Started

    monkeypatch.setattr(pipeline, "local_session", fake_session)
    with pytest.raises(_Started):
        pipeline.main(argv)
    assert seen == [expected]


class _FakeSpark:
    version = "test"

    def stop(self) -> None:
        pass


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], "ditto"), (["--source", "ditto"], "ditto"), (["--source", "rsocket"], "rsocket")],
)
def test_pipeline_source_is_ditto_by_default_rsocket_on_request(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: str
) -> None:
    pipeline = _load_pipeline()
    runs: list[dict[str, Any]] = []

    def fake_run(spark: Any, **kwargs: Any) -> int:
        runs.append(kwargs)
        return 0

    monkeypatch.setattr(pipeline, "local_session", lambda name, master: _FakeSpark())
    monkeypatch.setattr(pipeline, "run", fake_run)
    assert pipeline.main(argv) == 0
    assert [r["source_kind"] for r in runs] == [expected]


def test_pipeline_refuses_an_unknown_source(capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = _load_pipeline()
    with pytest.raises(SystemExit) as exited:
        pipeline.main(["--source", "kafka"])
    assert exited.value.code == 2
    assert "invalid choice: 'kafka'" in capsys.readouterr().err
