"""The folder adapters/ installs as sansrs.adapters, editable and as a wheel."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _source_packages() -> set[str]:
    found = set()
    for top, name in (
        (ROOT / "sansrs", "sansrs"),
        (ROOT / "adapters", "sansrs.adapters"),
        (ROOT / "tck", "sansrs.tck"),
    ):
        for init in top.rglob("__init__.py"):
            rel = init.parent.relative_to(top).parts
            found.add(".".join((name, *rel)))
    return found


def test_every_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert set(config["tool"]["setuptools"]["packages"]) == _source_packages()


def test_adapters_import_as_subpackage() -> None:
    import sansrs.adapters

    assert Path(sansrs.adapters.__file__).resolve().parent == ROOT / "adapters"


def test_py_typed_marker_present() -> None:
    assert (ROOT / "sansrs" / "py.typed").is_file()


def test_built_wheel_contains_and_imports_core_and_adapters(tmp_path: Path) -> None:
    # Build from a copy: an in-tree build/ left by an earlier build could hold
    # stale modules that would end up in the wheel and hide a packaging bug.
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".venv*", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
            ".hypothesis", "fuzz", "tests", "benchmarks",
        ),
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(wheels), str(src)],
        check=True,
        timeout=120,
        capture_output=True,
    )
    (wheel,) = wheels.glob("sansrs-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        site = tmp_path / "site"
        zf.extractall(site)
    for package in _source_packages():
        assert package.replace(".", "/") + "/__init__.py" in names
    assert "sansrs/py.typed" in names
    assert not any(n.startswith("adapters/") for n in names)
    probe = (
        f"import sys; sys.path.insert(0, {str(site)!r}); "
        "import sansrs, sansrs.adapters; print(sansrs.adapters.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, timeout=60, capture_output=True, text=True
    ).stdout.strip()
    assert Path(out).resolve().is_relative_to(site.resolve())


def test_supported_pythons_are_declared_alike_and_ci_runs_the_oldest_and_newest() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    minors = sorted(
        int(m[1])
        for c in config["project"]["classifiers"]
        if (m := re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c))
    )
    oldest, newest = minors[0], minors[-1]
    assert minors == list(range(oldest, newest + 1))
    assert config["project"]["requires-python"] == f">=3.{oldest}"
    assert config["tool"]["mypy"]["python_version"] == f"3.{oldest}"
    tox = configparser.ConfigParser()
    tox.read(ROOT / "tox.ini")
    envs = {e.strip() for e in tox["tox"]["envlist"].split(",")}
    assert {e for e in envs if e.startswith("py")} == {f"py3{m}" for m in minors}
    # CI: `make test` (.venv, the oldest) and the newest's own target.
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    target = f"test-py3{newest}"
    assert "make test" in ci and f"make {target}" in ci
    assert f"\n{target}:" in (ROOT / "Makefile").read_text()
