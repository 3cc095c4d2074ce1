"""The kit is a test-support layer: nothing in the sans-IO core imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import sansrs.tck

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_core_never_imports_the_kit() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "sansrs").rglob("*.py"))
        if any(name == "sansrs.tck" or name.startswith("sansrs.tck.") for name in _imports(path))
    ]
    assert offenders == []


def test_kit_is_installed_from_the_tck_folder() -> None:
    assert Path(sansrs.tck.__file__).resolve().parent == ROOT / "tck"
