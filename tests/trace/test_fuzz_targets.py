"""The fuzz targets in fuzz/ run over their seed corpora without atheris.

Catches a target broken by an API change, and a seed that already violates
a target's invariants, in the normal test run (the coverage-guided runs are
``make fuzz`` / ``make fuzz-ci``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

FUZZ = Path(__file__).resolve().parent.parent.parent / "fuzz"
TARGETS = sorted(FUZZ.glob("fuzz_*.py"))


def _load(path: Path) -> ModuleType:
    return importlib.import_module(f"fuzz.{path.stem}")


def test_fuzz_targets_exist() -> None:
    assert {p.stem for p in TARGETS} >= {"fuzz_frame", "fuzz_stream", "fuzz_trace"}


@pytest.mark.parametrize("path", TARGETS, ids=lambda p: p.stem)
def test_fuzz_target_passes_its_seed_corpus(path: Path) -> None:
    module = _load(path)
    test_one_input: Callable[[bytes], None] = module.test_one_input
    seeds = sorted((FUZZ / "corpus" / path.stem.removeprefix("fuzz_")).iterdir())
    assert seeds, f"{path.name} has no seeds"
    for seed in seeds:
        test_one_input(seed.read_bytes())
    # Degenerate inputs as well.
    for data in (b"", b"\x00", b"\x01", b"\xff" * 64):
        test_one_input(data)


def test_fuzz_run_all_discovers_every_target() -> None:
    run_all = _load(FUZZ / "run_all.py")
    assert sorted(run_all.targets()) == sorted(p.stem.removeprefix("fuzz_") for p in TARGETS)
    with pytest.raises(SystemExit):
        run_all.main(["--only", "no_such_target"])


def test_fuzz_stream_reference_agrees_on_an_invalid_stream() -> None:
    fuzz_stream = _load(FUZZ / "fuzz_stream.py")
    good = b"\x00\x00\x09\x00\x00\x00\x01\x28\x20abc"
    bad = b"\x00\x00\x0a\x00\x00\x00\x01\x20\x00\x00\x00\x00\x00"  # REQUEST_N n=0
    frames, code = fuzz_stream.reference(good + bad + good, 0xFFFFFF)
    assert len(frames) == 1 and code == 0x101
    assert fuzz_stream.chunked(good + bad + good, 0xFFFFFF, [1] * 40) == (frames, code)
