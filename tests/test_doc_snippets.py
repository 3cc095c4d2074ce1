"""Every ```python block of README.md and docs/ runs, against live servers,
so the docs cannot go stale.

A block runs in a namespace shared by the blocks before it on the same page
(a page may define a handler in one block and use it in the next), with
``tcp://127.0.0.1:PORT`` replaced by the URL of a live demo responder (what
``sansrs serve tcp://127.0.0.1:0`` runs) started here. Top-level ``await``,
``async with`` and ``async for`` are allowed (as in ``python -m asyncio``):
such a block runs on a fresh event loop. A block that cannot
run here (a Spark session, an external host, a fragment of a sans-IO loop
with no socket) carries the marker ``<!-- snippet: skip REASON -->`` on the
line before its fence: it is reported as skipped with that reason, so the
count of blocks not run is in every test summary. A marker with no reason,
or on anything but a python block, fails."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import os
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SKIP = re.compile(r"<!-- snippet: skip (?P<reason>\S.*?) -->")
MARKER = re.compile(r"<!-- snippet:")


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int  # of the opening fence, 1-based
    code: str
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def snippets(page: Path) -> Iterator[Snippet]:
    lines = page.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            before = lines[i - 1].strip() if i else ""
            skip = SKIP.fullmatch(before)
            code = textwrap.dedent("\n".join(lines[i + 1 : end]))  # a block in a list
            yield Snippet(page, i + 1, code, skip.group("reason") if skip else None)
            i = end
        i += 1


ALL = [s for page in PAGES for s in snippets(page)]


def test_doc_snippets_markers_are_well_formed() -> None:
    """A skip marker says why, and stands right before a python block."""
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").split("\n")
        for n, line in enumerate(lines):
            if MARKER.search(line):
                where = f"{page.relative_to(ROOT)}:{n + 1}"
                assert SKIP.fullmatch(line.strip()), f"{where}: a skip marker needs a reason"
                assert n + 1 < len(lines) and lines[n + 1].strip() == "```python", (
                    f"{where}: a skip marker must precede a ```python fence"
                )


def test_doc_snippets_most_blocks_run() -> None:
    """Skipping is the exception: the user-facing pages' blocks run."""
    ran = [s for s in ALL if s.skip is None]
    assert len(ran) >= 14, [s.id for s in ran]
    for page in ("README.md", "docs/adapters.md", "docs/protocols/rsio.md"):
        assert any(s.id.startswith(page + ":") for s in ran), page


@pytest.fixture(scope="module")
def demo_url() -> Iterator[str]:
    """A live demo responder, as ``sansrs serve tcp://127.0.0.1:0`` runs it."""
    from sansrs.adapters.rsocket import serve
    from sansrs.adapters.rsocket.demo_routes import demo_router_factory

    with serve("tcp://127.0.0.1:0", handler_factory=demo_router_factory([])) as server:
        yield server.url


_NAMESPACES: dict[Path, dict[str, Any]] = {}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("snippet", ALL, ids=[s.id for s in ALL])
def test_doc_snippet_runs(snippet: Snippet, demo_url: str, tmp_path: Path) -> None:
    if snippet.skip is not None:
        pytest.skip(f"marked in the docs: {snippet.skip}")
    code = snippet.code.replace("tcp://127.0.0.1:PORT", demo_url)
    namespace = _NAMESPACES.setdefault(snippet.page, {"__name__": "__snippet__"})
    # Top-level await / async with / async for, as in the asyncio REPL: the
    # block is then a coroutine, run on a fresh event loop.
    compiled = compile(code, snippet.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    out = io.StringIO()
    with contextlib.chdir(tmp_path), contextlib.redirect_stdout(out):
        result = eval(compiled, namespace)
        if inspect.iscoroutine(result):
            asyncio.run(asyncio.wait_for(result, 20))


def test_docs_index_links_every_page() -> None:
    """docs/README.md, the index by task, links every page in docs/."""
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#]+\.md)\)", index))
    pages = {
        str(p.relative_to(ROOT / "docs"))
        for p in (ROOT / "docs").rglob("*.md")
        if p.name != "README.md"
    }
    assert pages - linked == set(), "pages the index does not link"
    assert linked - pages == set(), "links to pages that do not exist"


def _sh_blocks(page: Path) -> list[list[str]]:
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks: list[list[str]] = []
    for i, line in enumerate(lines):
        if line.strip() == "```sh":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            blocks.append([x.split("#", 1)[0].strip() for x in lines[i + 1 : end]])
    return blocks


SERVED = [
    b for b in _sh_blocks(ROOT / "README.md") if b[0].startswith("sansrs ") and " serve " in b[0]
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("block", SERVED, ids=[b[0] for b in SERVED])
def test_readme_commands_run_against_the_server_they_start(block: list[str]) -> None:
    """The README's command blocks, as typed in a shell where sansrs is
    installed: the first line starts a server (its READY line gives the
    port), the others run against it with PORT replaced, and exit 0."""
    import shlex
    import subprocess
    import sys

    command = str(Path(sys.executable).parent / "sansrs")
    server = subprocess.Popen(
        [command, *shlex.split(block[0])[1:]], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert len(SERVED) >= 2  # the quick start and Ditto's
    try:
        assert server.stdout is not None
        ready, url = server.stdout.readline().split()
        assert ready == "READY"
        port = url.rsplit(":", 1)[1].split("/", 1)[0]
        for line in filter(None, block[1:]):
            argv = shlex.split(line.replace("PORT", port))
            assert argv[0] == "sansrs", line
            result = subprocess.run(
                [command, *argv[1:]], capture_output=True, text=True, timeout=30, cwd=ROOT
            )
            assert result.returncode == 0, (line, result.stderr)
            assert result.stdout, line
    finally:
        server.terminate()
        server.wait(30)


def test_readme_editable_strict_mode_reaches_pip(tmp_path: Path) -> None:
    """README, "Install": ``make venv EDITABLE_MODE=strict`` installs in
    setuptools' strict editable mode (a link tree mypy and help() read);
    without it, the default mode. Checked on make's plan (``-n``), in a
    directory without a venv so that everything is planned."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("no make")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    # (what the venv is built from: the project, and the optional C extension's build)
    for name in ("pyproject.toml", "setup.py", "adapters/transport/websocket/_speedups.c"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()

    # Not the variables of a make this test runs under (test-py313 passes VENV=).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}

    def plan(*args: str) -> str:
        return subprocess.run(
            ["make", "-n", "venv", *args], cwd=tmp_path, capture_output=True, text=True,
            timeout=30, check=True, env=env,
        ).stdout

    assert "--config-settings editable_mode=strict" in plan("EDITABLE_MODE=strict")
    assert "touch .venv/.installed-strict" in plan("EDITABLE_MODE=strict")
    assert "editable_mode" not in plan()
