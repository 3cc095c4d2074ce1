"""The architecture is a set of import rules (docs/architecture.md); these
tests enforce them on the source tree, imports under ``TYPE_CHECKING``
included:

- no import cycle anywhere (core, adapters, verification kit);
- the core (``sansrs/``) never imports I/O, threads or clocks, nor the adapters;
- drivers (``adapters/drive``) and transports (``adapters/transport``)
  import no protocol package, core or adapter;
- protocol packages do not import one another (``rsocket``, ``rsio``,
  ``ditto``: in the core and in the adapters); ``spark`` and ``cli`` may
  import all of them;
- code and docs cite nothing outside the repository.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Import name -> folder (adapters/ is installed as sansrs.adapters, tck/ as sansrs.tck).
PACKAGES = {
    "sansrs": ROOT / "sansrs",
    "sansrs.adapters": ROOT / "adapters",
    "sansrs.tck": ROOT / "tck",
}
IO_MODULES = {
    "socket", "ssl", "selectors", "threading", "asyncio", "time", "queue", "subprocess", "pyspark",
}  # fmt: skip
PROTOCOLS = ("rsocket", "rsio", "ditto")


@dataclass
class Graph:
    """Modules of a tree and their imports (project modules and external roots)."""

    files: dict[str, Path] = field(default_factory=dict)
    packages: set[str] = field(default_factory=set)
    edges: dict[str, set[str]] = field(default_factory=dict)
    external: dict[str, set[tuple[int, str]]] = field(default_factory=dict)

    def project_module(self, name: str) -> str | None:
        """The longest project module ``name`` names (or lies in)."""
        while name:
            if name in self.files:
                return name
            name = name.rpartition(".")[0]
        return None


def build_graph(packages: dict[str, Path]) -> Graph:
    graph = Graph()
    for prefix, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join([prefix, *parts])
            if name in graph.files and graph.files[name] != path:
                continue  # e.g. sansrs/adapters would shadow the mapped folder
            graph.files[name] = path
            if is_package:
                graph.packages.add(name)
    for name, path in graph.files.items():
        graph.edges[name], graph.external[name] = _imports(graph, name, path)
    return graph


def _imports(graph: Graph, module: str, path: Path) -> tuple[set[str], set[tuple[int, str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if module in graph.packages else module.rpartition(".")[0]
    project: set[str] = set()
    external: set[tuple[int, str]] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from pkg import sub`` imports the submodule, not just the package.
            targets = [
                f"{target}.{a.name}" if f"{target}.{a.name}" in graph.files else target
                for a in node.names
            ]
        for target in targets:
            found = graph.project_module(target)
            if found is None:
                external.add((node.lineno, target.split(".")[0]))
            elif found != module:
                project.add(found)
    return project, external


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


GRAPH = build_graph(PACKAGES)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _violations(source: str, forbidden: list[str]) -> list[str]:
    return sorted(
        f"{m} -> {t}"
        for m, targets in GRAPH.edges.items()
        if _in(m, source)
        for t in targets
        if any(_in(t, f) for f in forbidden)
    )


def test_the_tree_has_modules() -> None:
    assert "sansrs.rsocket" in GRAPH.files
    assert "sansrs.adapters.drive.connection" in GRAPH.files
    assert "sansrs.tck" in GRAPH.files


def test_no_import_cycle_anywhere() -> None:
    assert cycles(GRAPH.edges) == []


CORE_MODULES = sorted(
    m for m in GRAPH.files if not _in(m, "sansrs.adapters") and not _in(m, "sansrs.tck")
)


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_imports_no_io_threads_or_clocks(module: str) -> None:
    bad = sorted((line, root) for line, root in GRAPH.external[module] if root in IO_MODULES)
    assert not bad, f"{module} imports I/O, threads or clocks: {bad}"


def test_core_never_imports_the_adapters_or_the_kit() -> None:
    bad = [v for v in _violations("sansrs", ["sansrs.adapters", "sansrs.tck"])
           if not v.startswith(("sansrs.adapters", "sansrs.tck"))]  # fmt: skip
    assert bad == []


@pytest.mark.parametrize("role", ["drive", "transport"])
def test_drivers_and_transports_import_no_protocol(role: str) -> None:
    protocols = [f"sansrs.{p}" for p in PROTOCOLS] + [
        f"sansrs.adapters.{p}" for p in (*PROTOCOLS, "spark", "cli", "tools")
    ]
    assert _violations(f"sansrs.adapters.{role}", protocols) == []


def test_transports_do_not_import_drivers() -> None:
    assert _violations("sansrs.adapters.transport", ["sansrs.adapters.drive"]) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_protocol_packages_do_not_import_one_another(protocol: str) -> None:
    others = [p for p in PROTOCOLS if p != protocol]
    assert _violations(f"sansrs.{protocol}", [f"sansrs.{p}" for p in others]) == []
    adapters = [f"sansrs.adapters.{p}" for p in (*others, "spark", "cli")]
    assert _violations(f"sansrs.adapters.{protocol}", adapters) == []


def test_protocol_packages_share_one_shape() -> None:
    """The same file names for the same roles in every protocol package."""
    shape = {"__init__", "client", "server", "peer", "engine", "aio", "errors", "types"}
    for protocol in PROTOCOLS:
        names = {p.stem for p in (ROOT / "adapters" / protocol).glob("*.py")}
        assert shape <= names, f"adapters/{protocol} lacks {sorted(shape - names)}"


CITED_OUTSIDE = re.compile(r"DESIGN\.md|\bDESIGN rule|\.\./shared|\bshared/(specs|ditto|hooks)")
CHECKED_FILES = sorted(
    p
    for pattern in ("*.py", "*.md", "*.toml", "*.ini", "Makefile")
    for p in ROOT.rglob(pattern)
    if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
    and p.name != "test_layering.py"
)


def test_nothing_cites_files_outside_the_repository() -> None:
    bad = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in CHECKED_FILES
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if CITED_OUTSIDE.search(line)
    ]
    assert bad == [], "cite docs/ or the public spec: users have only the repository"


TESTS = ROOT / "tests"
#: A test that cites a rule names its spec first: rs (Reactive Streams), rsocket, rsio, ditto.
OLD_RULE_STYLES = re.compile(r"^\s*(?:async )?def (test_rule_|test_draft_)", re.M)
SYS_PATH_EDIT = re.compile(r"^\s*sys\.path\.(insert|append)", re.M)


def test_tests_mirror_the_layout() -> None:
    """Core tests sit under the core package's name, adapter tests under the adapter's role."""
    adapter_roles = {p.name for p in (ROOT / "adapters").iterdir() if (p / "__init__.py").exists()}
    tested_roles = {p.name for p in (TESTS / "adapters").iterdir() if (p / "__init__.py").exists()}
    # attacks: the attack suite, against every role's servers (docs/security.md);
    # peers: every client call against misbehaving peers (docs/adapters.md)
    assert tested_roles <= adapter_roles | {"attacks", "peers"}, tested_roles - adapter_roles
    assert not list((TESTS / "adapters").glob("test_*.py")), "adapter tests go in the role's folder"
    assert all((p.parent / "__init__.py").exists() for p in TESTS.rglob("test_*.py"))


def test_names_of_rule_tests_share_one_style() -> None:
    bad = [
        f"{p.relative_to(ROOT)}: {m.group(1)}"
        for p in TESTS.rglob("test_*.py")
        for m in OLD_RULE_STYLES.finditer(p.read_text(encoding="utf-8"))
    ]
    assert bad == [], "name rule tests test_<spec>_<rule>_<what>: rs, rsocket, rsio, ditto"


def test_test_helpers_are_imported_as_a_package() -> None:
    bad = [
        str(p.relative_to(ROOT))
        for p in TESTS.rglob("*.py")
        if p.name != "test_layering.py" and SYS_PATH_EDIT.search(p.read_text(encoding="utf-8"))
    ]
    assert bad == [], "import helpers from the tests package (tests/ has __init__.py files)"


def test_the_checker_sees_cycles_forbidden_imports_and_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "demo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\nimport socket\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import thing\n"
    )
    (pkg / "c.py").write_text("from .b import x\n")
    graph = build_graph({"demo": pkg})
    assert cycles(graph.edges) == [["demo.a", "demo.b"]]
    assert (2, "socket") in graph.external["demo.a"]
    assert graph.edges["demo.c"] == {"demo.b"}
