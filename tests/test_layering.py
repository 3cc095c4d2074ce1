"""DESIGN.md layering rule 1: the core never imports I/O, threads or clocks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "sansrs"
FORBIDDEN = {
    "socket",
    "ssl",
    "selectors",
    "threading",
    "asyncio",
    "time",
    "queue",
    "subprocess",
    "pyspark",
}


def _imported_roots(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


CORE_FILES = sorted(CORE.rglob("*.py"))


def test_core_has_modules() -> None:
    assert CORE_FILES, "no core modules found"


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_layering_rule_1_core_imports_no_io(path: Path) -> None:
    bad = [(line, mod) for line, mod in _imported_roots(path) if mod in FORBIDDEN]
    assert not bad, f"{path} imports I/O, threads or clocks: {bad}"


def test_layering_checker_catches_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text("import os\nfrom socket import socket\nimport time as t\n")
    roots = {mod for _, mod in _imported_roots(sample)}
    assert {"socket", "time"} <= roots
