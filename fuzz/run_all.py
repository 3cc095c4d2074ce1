"""Run every fuzz target (fuzz/fuzz_*.py) as its own atheris process.

    .venv/bin/python fuzz/run_all.py --seconds 300          # each target
    .venv/bin/python fuzz/run_all.py --total-seconds 60     # split across targets (CI)
    .venv/bin/python fuzz/run_all.py --seconds 30 --only frame stream

Each target starts from its committed seeds (fuzz/corpus/<name>/, read only)
plus a scratch corpus where libFuzzer keeps what it finds (a temporary
directory, or ``--work DIR/<name>`` to keep it). A crash, a timeout or an
out-of-memory stops that target; its input is saved as
fuzz/crashes/<name>-crash-<sha1> (gitignored). The exit status is 1 when any
target failed, 0 otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CRASHES = HERE / "crashes"
CORPUS = HERE / "corpus"
#: Extra wall-clock allowance over max_total_time before a target is killed.
GRACE = 60
MAX_LEN = 4096


def targets() -> dict[str, Path]:
    return {p.stem.removeprefix("fuzz_"): p for p in sorted(HERE.glob("fuzz_*.py"))}


def run_target(name: str, path: Path, seconds: int, work: Path | None) -> tuple[int, list[Path]]:
    CRASHES.mkdir(exist_ok=True)
    seeds = CORPUS / name
    before = set(CRASHES.iterdir())
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as tmp:
        scratch = work / name if work else Path(tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            f"fuzz.{path.stem}",
            str(scratch),
            *([str(seeds)] if seeds.is_dir() else []),
            f"-max_total_time={seconds}",
            f"-artifact_prefix={CRASHES}/{name}-",
            f"-max_len={MAX_LEN}",
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ]
        print(f"== {name}: {seconds} s: {' '.join(cmd)}", flush=True)
        start = time.monotonic()
        try:
            proc = subprocess.run(
                cmd, cwd=HERE.parent, timeout=seconds + GRACE, capture_output=True, text=True
            )
            code, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            code = -1
            output = f"killed after {seconds + GRACE} s\n{exc.stderr!r}"
        elapsed = time.monotonic() - start
    new = sorted(set(CRASHES.iterdir()) - before)
    summary = [line for line in output.splitlines() if line.startswith(("stat::", "Done"))]
    print("\n".join(summary[-6:]))
    if code != 0:
        print(output[-4000:])
    status = "OK" if code == 0 else f"FAILED (exit {code})"
    print(f"== {name}: {status} in {elapsed:.1f} s; new artifacts: {[p.name for p in new]}")
    return code, new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=int, help="seconds per target (default 60)")
    budget.add_argument("--total-seconds", type=int, help="seconds split evenly across targets")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these targets")
    parser.add_argument("--work", type=Path, help="keep each scratch corpus in WORK/<name>")
    args = parser.parse_args(argv)
    found = targets()
    if args.only:
        unknown = set(args.only) - set(found)
        if unknown:
            parser.error(f"unknown targets {sorted(unknown)}; have {sorted(found)}")
        found = {k: v for k, v in found.items() if k in args.only}
    if args.total_seconds is not None:
        seconds = max(1, args.total_seconds // max(1, len(found)))
    else:
        seconds = args.seconds if args.seconds is not None else 60
    failed = []
    for name, path in found.items():
        code, _ = run_target(name, path, seconds, args.work)
        if code != 0:
            failed.append(name)
    print(f"== {len(found)} target(s), {seconds} s each; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
