"""The folder adapters/ installs as sansrs.adapters, editable and as a wheel."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from tests.adapters.transport.masking_paths import can_build_c

ROOT = Path(__file__).resolve().parent.parent
#: The optional C extension (RFC 6455 masking) in a wheel.
EXTENSION = re.compile(r"sansrs/adapters/transport/websocket/_speedups\..*(so|pyd)$")


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


def _wheel(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[set[str], Path]:
    """A wheel built from a copy of the tree (an in-tree build/ left by an
    earlier build could hold stale modules that would end up in the wheel
    and hide a packaging bug; an editable install's extension too): its
    file names and where it was unpacked."""
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".venv*", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
            ".hypothesis", "fuzz", "tests", "benchmarks", "*.so", "*.pyd", "node_modules",
        ),
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(wheels), str(src)],
        check=True,
        timeout=120,
        capture_output=True,
        env=env,
    )
    (wheel,) = wheels.glob("sansrs-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        site = tmp_path / "site"
        zf.extractall(site)
    return names, site


def _probe(site: Path, code: str) -> str:
    """What ``code`` prints in a fresh interpreter importing from ``site`` first."""
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
        check=True, timeout=60, capture_output=True, text=True,
    ).stdout.strip()


def test_built_wheel_contains_and_imports_core_and_adapters(tmp_path: Path) -> None:
    names, site = _wheel(tmp_path)
    for package in _source_packages():
        assert package.replace(".", "/") + "/__init__.py" in names
    assert "sansrs/py.typed" in names
    assert "sansrs/adapters/transport/websocket/_speedups.pyi" in names
    assert not any(n.startswith("adapters/") for n in names)
    out = _probe(site, "import sansrs, sansrs.adapters; print(sansrs.adapters.__file__)")
    assert Path(out).resolve().is_relative_to(site.resolve())
    if can_build_c():  # the masking extension, built and loaded from the wheel
        assert any(EXTENSION.match(n) for n in names), sorted(names)
        where = _probe(site, "from sansrs.adapters.transport.websocket import frames; "
                             "print(frames.C_MASKING.__file__)")
        assert Path(where).resolve().is_relative_to(site.resolve())


def test_a_wheel_built_without_a_c_compiler_masks_in_pure_python(tmp_path: Path) -> None:
    """The extension is optional: no compiler (``CC=false``), no extension,
    the same frames."""
    names, site = _wheel(tmp_path, env={**os.environ, "CC": "false", "LDSHARED": "false"})
    assert not any(EXTENSION.match(n) for n in names)
    out = _probe(site, (
        "from sansrs.adapters.transport.websocket import frames; "
        "print(frames.C_EXTENSION, frames.mask(b'abcd', b'hello').hex())"
    ))
    assert out == "None " + bytes(b ^ b"abcd"[i % 4] for i, b in enumerate(b"hello")).hex()


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
