"""Catch rate of the verification kit: how many broken implementations it fails.

Runs every test of the kit (old and new) against every deliberately broken
implementation of the catalogue (``tck_cases``), and against correct ones. An
implementation is *caught* when at least one required test fails; a test that
does not finish within ``--hang`` seconds counts as a hang (the user's run would
hang there), and the implementation as not caught. The old kit is read from git
(``git show <ref>:tck/...``), so the two are compared on the same catalogue.

    .venv/bin/python -m tests.tck.tck_catch_rate --old-ref f3c313b

Prints one line per implementation and the totals (docs/tck.md quotes them).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.tck.tck_broken import BrokenFailedPublisher
from tests.tck.tck_broken_subscribers import BrokenSubscriber, ProbedSubscriber, broken_processor
from tests.tck.tck_cases import _CORRECT, IMPLEMENTATIONS, Broken, kit_class
from tests.tck.tck_correct import (
    AsyncioPublisher,
    IteratorPublisher,
    ThreadPoolPublisher,
    ThreadPoolSubscriber,
    counting,
)

ROOT = Path(__file__).resolve().parents[2]
OLD_PACKAGE = "sansrs_tck_old"


def correct_implementations() -> list[Broken]:
    """Implementations with no bug: any failure is a false failure."""
    failed = {"create_failed_publisher": lambda self: BrokenFailedPublisher()}
    made: list[tuple[str, str, Callable[..., Any], dict[str, Any]]] = [
        # the naive Publisher relies on rule 2.7 (no lock on its demand), and says so
        ("naive Publisher", "publisher", _CORRECT,
         {**failed, "request_needs_external_synchronization": lambda self: True}),
        ("iterator-backed Publisher", "publisher",
         lambda n: IteratorPublisher(lambda: range(1, n + 1)), {}),
        ("generator-backed Publisher", "publisher",
         lambda n: IteratorPublisher(lambda: counting(n)), {}),
        ("thread-pool Publisher", "publisher", ThreadPoolPublisher, {}),
        ("asyncio Publisher", "publisher", AsyncioPublisher, {}),
        ("naive Subscriber", "blackbox", BrokenSubscriber, {}),
        ("thread-pool Subscriber", "blackbox", ThreadPoolSubscriber, {}),
        ("naive whitebox Subscriber", "whitebox", lambda probe: ProbedSubscriber(probe), {}),
        ("thread-pool whitebox Subscriber", "whitebox", ThreadPoolSubscriber, {}),
        ("multicast Processor", "processor", broken_processor(), {}),
    ]
    return [Broken(name=name, kind=kind, make=make, test="", rules=(), knobs=knobs)
            for name, kind, make, knobs in made]


def load_kit(ref: str | None) -> ModuleType:
    """The kit at git ``ref`` (a copy imported as ``sansrs_tck_old``), or the working tree's."""
    if ref is None:
        return importlib.import_module("sansrs.tck")
    if OLD_PACKAGE in sys.modules:
        return sys.modules[OLD_PACKAGE]
    folder = Path(tempfile.mkdtemp(prefix="tck-old-")) / OLD_PACKAGE
    folder.mkdir()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{ref}:tck"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            text = subprocess.run(["git", "show", f"{ref}:tck/{name}"], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout
            (folder / name).write_text(text, encoding="utf-8")
    # a package from a folder, relative imports and all
    spec = importlib.util.spec_from_file_location(
        OLD_PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[OLD_PACKAGE] = module
    spec.loader.exec_module(module)
    return module


def _environment(kit: ModuleType, correct: bool = False) -> Any:
    """Short waits for broken implementations (they wait out timeouts); for correct ones
    generous ones (a wait ends when its signal comes), as a user on a busy machine sets."""
    settings = {"default_timeout_ms": 2000 if correct else 250,
                "default_no_signals_timeout_ms": 40, "gc_timeout_ms": 1000 if correct else 150}
    if "test_deadline_ms" in kit.TestEnvironment.__dataclass_fields__:
        settings["test_deadline_ms"] = 5000
    return kit.TestEnvironment(**settings)


def _run_one(instance: Any, name: str, hang: float) -> tuple[str, str]:
    """('failed' | 'passed' | 'skipped' | 'error' | 'hung', the failure's detail line)."""
    import pytest

    outcome: list[tuple[str, str]] = []

    def target() -> None:
        try:
            instance.setup_method()
            getattr(instance, name)()
            outcome.append(("passed", ""))
        except pytest.fail.Exception as failure:
            lines = str(failure).splitlines()
            outcome.append(("failed", next((x for x in lines if "->" in x), lines[0]).strip()))
        except pytest.skip.Exception:
            outcome.append(("skipped", ""))
        except BaseException as error:  # the kit itself broke: not a verdict
            outcome.append(("error", repr(error)))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(hang)
    return outcome[0] if outcome else ("hung", "")


def verdict(job: tuple[str | None, int, bool, float]) -> tuple[str, list[str]]:
    """Run a whole kit against one implementation: ('caught' | 'missed' | 'hung', failed)."""
    ref, index, correct, hang = job
    threading.excepthook = lambda args: None  # broken implementations' threads die noisily
    kit = load_kit(ref)
    broken = (correct_implementations() if correct else IMPLEMENTATIONS)[index]
    instance = kit_class(kit, broken, _environment(kit, correct))()
    failed: list[str] = []
    for name in sorted(n for n in dir(instance) if n.startswith("test_")):
        result, detail = _run_one(instance, name, hang)
        if result == "hung":
            return "hung", failed
        if result == "failed":
            failed.append(f"{name} {detail}")
    return ("caught" if failed else "missed"), failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-ref", default="main", help="git ref of the old kit")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--hang", type=float, default=20.0, help="seconds before a test hangs")
    args = parser.parse_args()
    kits: list[tuple[str, str | None]] = [(f"old ({args.old_ref})", args.old_ref), ("new", None)]
    start = time.monotonic()
    results: dict[tuple[str, bool, int], tuple[str, list[str]]] = {}
    jobs = [(label, ref, index, correct)
            for label, ref in kits
            for correct, entries in ((False, IMPLEMENTATIONS), (True, correct_implementations()))
            for index in range(len(entries))]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {(label, correct, index): pool.submit(verdict, (ref, index, correct, args.hang))
                   for label, ref, index, correct in jobs}
        for key, future in futures.items():
            results[key] = future.result()
    labels = [label for label, _ in kits]
    print(f"{'broken implementation':48} " + " ".join(f"{label:>14}" for label in labels))
    for index, broken in enumerate(IMPLEMENTATIONS):
        row = " ".join(f"{results[(label, False, index)][0]:>14}" for label in labels)
        print(f"{broken.name[:48]:48} {row}")
    print()
    for label in labels:
        verdicts = [results[(label, False, i)][0] for i in range(len(IMPLEMENTATIONS))]
        caught, total = verdicts.count("caught"), len(IMPLEMENTATIONS)
        false = [(c.name, results[(label, True, i)][1])
                 for i, c in enumerate(correct_implementations())
                 if results[(label, True, i)][0] != "missed"]
        print(f"{label}: caught {caught} of {total} broken implementations "
              f"({100 * caught / total:.0f}%), {verdicts.count('hung')} hung the run; "
              f"false failures on {len(correct_implementations())} correct ones: {len(false)}"
              + "".join(f"\n  {name}: {test}" for name, tests in false for test in tests))
    print(f"({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
