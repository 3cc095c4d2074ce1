"""Run every benchmark in this folder, one process each, in a fixed order.

``make bench`` calls this. Each script prints its own markdown table (medians
of several runs, side by side with rsocket-py and a raw-socket baseline where
the issue asks for one); the figures and the commands that produced them are
recorded in docs/performance.md. Benchmarks are never part of the test suite:
the machine is shared and noisy, so run them when it is quiet and quote the
medians.

    .venv/bin/python benchmarks/run_all.py                 # all of them
    .venv/bin/python benchmarks/run_all.py --only codec tcp
    .venv/bin/python benchmarks/run_all.py --list
    .venv/bin/python benchmarks/run_all.py --json benchmarks/results/latest.json

``--json PATH`` also writes what the scripts printed as data: every markdown
table of each script's output (its columns and rows, cells as printed),
with the command, the UTC time, the load average and the interpreter
(schema: :data:`SCHEMA`). ``benchmarks/charts.py`` draws the SVG charts of
docs/performance.md from that file (``make bench`` runs both).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# Scripts that are peers or helpers of a benchmark, not benchmarks themselves;
# bench_ab.py compares this checkout with another one (``--before PATH``), so
# it runs by hand with the checkout to compare against.
_NOT_BENCHMARKS = {
    "run_all.py", "raw_peer.py", "rsocketpy_peer.py", "sansrs_client.py", "bench_ab.py",
}

# Arguments for a full run; anything not listed runs with its own defaults.
_ARGS: dict[str, list[str]] = {
    "codec": ["--runs", "5"],
    "connection": ["--runs", "7"],
    "tcp": ["--runs", "5", "--scale", "0.5"],
    # Resumption over TCP, WebSocket and WebSocket over TLS (docs/resumption.md).
    "resume": ["--transport", "all"],
}


#: The JSON layout ``--json`` writes (and benchmarks/results/latest.json holds).
SCHEMA = 1


def parse_tables(text: str) -> list[dict[str, Any]]:
    """The markdown tables in ``text``: ``{"columns": [...], "rows": [[...], ...]}``
    each, cells as printed (a table is a header line, a ``---`` line, rows)."""
    tables: list[dict[str, Any]] = []
    lines = [line.strip() for line in text.splitlines()]
    i = 0
    while i + 1 < len(lines):
        head, rule = lines[i], lines[i + 1]
        if head.startswith("|") and rule.startswith("|") and set(rule) <= set("|-: "):
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append({"columns": _cells(head), "rows": rows})
        else:
            i += 1
    return tables


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _shown(path: Path) -> str:
    """A script's path as the docs write it (from the project root)."""
    return str(path.relative_to(HERE.parent)) if path.is_relative_to(HERE.parent) else str(path)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def benchmarks() -> dict[str, Path]:
    """Every ``bench_<name>.py`` here, by name, in a stable order."""
    found = {}
    for path in sorted(HERE.glob("bench_*.py")):
        if path.name not in _NOT_BENCHMARKS:
            found[path.stem.removeprefix("bench_")] = path
    return found


def main(argv: list[str] | None = None) -> int:
    available = benchmarks()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(available), metavar="NAME",
                        help=f"run only these ({', '.join(sorted(available))})")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also write every script's tables, command, time and load as JSON")
    args = parser.parse_args(argv)
    if args.list:
        for name, path in available.items():
            print(f"{name:12} {path.relative_to(HERE.parent)} {' '.join(_ARGS.get(name, []))}")
        return 0
    failed = []
    results: dict[str, Any] = {}
    for name in args.only or list(available):
        command = [sys.executable, str(available[name]), *_ARGS.get(name, [])]
        print(f"\n== {name}: {' '.join(command)}", flush=True)
        started, load, when = time.monotonic(), _load(), _now()
        returncode, output = _run(command, capture=args.json is not None)
        seconds = time.monotonic() - started
        print(f"== {name}: exit {returncode} after {seconds:.0f} s", flush=True)
        if returncode:
            failed.append(name)
        results[name] = {
            "command": " ".join(
                [".venv/bin/python", _shown(available[name]), *_ARGS.get(name, [])]
            ),
            "date": when,
            "load": f"{load}-{_load()}",
            "seconds": round(seconds),
            "exit": returncode,
            "tables": parse_tables(output),
        }
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "schema": SCHEMA,
            "source": "measured by benchmarks/run_all.py",
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "benchmarks": results,
        }
        args.json.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
        print(f"== wrote {args.json}")
    print(f"\n== {len(args.only or available)} benchmark(s); failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


def _run(command: list[str], *, capture: bool) -> tuple[int, str]:
    """Run ``command``, its output shown as it comes; returns the exit code
    and (``capture``) the standard output."""
    if not capture:
        return subprocess.run(command, check=False).returncode, ""
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    return proc.returncode, "".join(lines)


if __name__ == "__main__":
    sys.exit(main())
