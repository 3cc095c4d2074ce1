"""Draw the benchmark charts of docs/performance.md as SVG from the JSON that
``benchmarks/run_all.py --json`` writes (benchmarks/results/latest.json).

    .venv/bin/python benchmarks/charts.py benchmarks/results/latest.json docs/images

Needs matplotlib (the ``plot`` extra: ``pip install -e ".[plot]"``). Each
chart is one table of one benchmark, its rows as groups of horizontal bars
(one bar per implementation, a log scale: the implementations differ by
10-100x), the figures written on the bars; the caption under it names the
command, the date and the load of the run, and where the figures came from
(the JSON's ``source``). A benchmark or column missing from the JSON (a
partial ``--only`` run) skips its chart with a notice.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Chart:
    """One chart: which benchmark's first table, which columns as bars."""

    file: str
    benchmark: str
    title: str
    unit: str
    #: The bars of each row: (column as the script prints it, legend label).
    bars: tuple[tuple[str, str], ...]
    #: Columns joined (", ") into a row's label.
    label: tuple[int, ...] = (0,)
    #: Row labels as the reader knows them (the scripts print keys).
    names: tuple[tuple[str, str], ...] = ()


CHARTS = (
    Chart(
        file="bench-tcp.svg",
        benchmark="tcp",
        title="RSocket over TCP and WebSocket (one connection, 127.0.0.1)",
        unit="messages or round trips per second (log)",
        bars=(
            ("sansrs", "sansrs, TCP"),
            ("sansrs-selector", "sansrs, selector loop"),
            ("sansrs-ws", "sansrs, ws://"),
            ("sansrs-asyncio", "sansrs, asyncio"),
            ("rsocketpy", "rsocket-py, TCP"),
            ("rsocketpy-ws", "rsocket-py, ws://"),
            ("raw", "raw sockets"),
            ("raw-asyncio", "raw asyncio streams"),
        ),
        names=(
            ("stream16", "request-stream, 16 B items"),
            ("stream1k", "request-stream, 1 KiB items"),
            ("rr_seq", "request-response, one at a time"),
            ("rr_seq_pub", "request-response, one at a time, Publisher"),
            ("rr64", "request-response, 64 in flight"),
            ("fnf16", "fire-and-forget, 16 B"),
        ),
    ),
    Chart(
        file="bench-codec.svg",
        benchmark="codec",
        title="RSocket frame codec: 16-byte PAYLOAD frames",
        unit="frames per second (log)",
        bars=(("sansrs frames/s", "sansrs"), ("rsocket-py frames/s", "rsocket-py 0.4.20")),
        label=(0, 1),
    ),
    Chart(
        file="bench-spark.svg",
        benchmark="spark",
        title="Spark: rows through a partition function and a data source",
        unit="rows (or Ditto events) per second (log)",
        bars=(
            ("sansrs partition fn rows/s", "sansrs, partition function"),
            ("sansrs data source rows/s", "sansrs, data source"),
            ("raw socket rows/s", "raw sockets"),
        ),
    ),
    Chart(
        file="bench-extensions.svg",
        benchmark="extensions",
        title="Routing: plain against routed requests, and rsocket-py's router",
        unit="round trips or items per second (log)",
        bars=(
            ("plain /s", "sansrs, plain"),
            ("routed /s", "sansrs, client.route + Router"),
            ("rsocket-py router /s", "rsocket-py RequestRouter"),
        ),
        names=(("rr64", "request-response, 64 in flight"),
               ("stream16", "request-stream, 16 B items")),
    ),
)


def number(cell: str) -> float | None:
    """A table cell as a number ("650,113", "1.04", "**0.97x**"), None if not one."""
    text = cell.replace(",", "").replace("*", "").strip().removesuffix("x")
    try:
        return float(text)
    except ValueError:
        return None


def series(chart: Chart, run: dict[str, Any]) -> tuple[list[str], dict[str, list[float | None]]]:
    """Row labels and, per bar that the table has, its value in each row."""
    table = run["tables"][0]
    columns: list[str] = table["columns"]
    names = dict(chart.names)
    labels = [
        ", ".join(names.get(row[i], row[i]) for i in chart.label) for row in table["rows"]
    ]
    values = {
        legend: [number(row[columns.index(column)]) for row in table["rows"]]
        for column, legend in chart.bars
        if column in columns
    }
    return labels, {k: v for k, v in values.items() if any(x is not None for x in v)}


def caption(run: dict[str, Any], source: str) -> str:
    return (f"{run['command']}\n{run['date']}, load average {run['load']}; "
            f"{source.split(' (')[0]}")


def draw(chart: Chart, run: dict[str, Any], source: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    # Reproducible files: no date in the SVG, fixed ids.
    plt.rcParams.update({"svg.hashsalt": "sansrs", "svg.fonttype": "none", "font.size": 9})
    labels, values = series(chart, run)
    rows = len(labels)
    colors = dict(zip(values, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    # Each row's bars side by side, only those it has (a scenario some
    # implementation does not run leaves no gap).
    present = [[k for k, data in values.items() if data[r] is not None] for r in range(rows)]
    height = 0.8 / max((len(p) for p in present), default=1)
    fig, ax = plt.subplots(figsize=(8, 1.2 + sum(0.2 * (len(p) + 1.5) for p in present)))
    starts, y = [], 0.0
    for r in range(rows):
        starts.append(y)
        for i, legend in enumerate(present[r]):
            x = values[legend][r]
            assert x is not None
            bar_y = y + i * height
            ax.barh(bar_y, x, height=height * 0.9, color=colors[legend],
                    label=legend if legend not in ax.get_legend_handles_labels()[1] else None)
            ax.text(x * 1.05, bar_y, f"{x:,.0f}", va="center", fontsize=7)
        y += (len(present[r]) + 1.5) * height
    ax.set_yticks([s + (len(p) - 1) * height / 2 for s, p in zip(starts, present, strict=True)],
                  labels)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel(chart.unit)
    ax.set_title(chart.title, loc="left", fontsize=10)
    lo = min(x for data in values.values() for x in data if x)
    hi = max(x for data in values.values() for x in data if x)
    ax.set_xlim(lo / 2, hi * 4)
    ax.set_ylim(y - 1.5 * height + height / 2, -height)
    ax.grid(axis="x", which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.text(0.01, 0.005, caption(run, source), fontsize=6.5, va="bottom", family="monospace")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="JSON written by run_all.py --json")
    parser.add_argument("out", type=Path, help="folder for the SVG files")
    args = parser.parse_args(argv)
    document = json.loads(args.results.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    for chart in CHARTS:
        run = document["benchmarks"].get(chart.benchmark)
        if run is None or not run.get("tables") or run.get("exit"):
            print(f"{chart.file}: no figures for {chart.benchmark!r} in {args.results}: skipped")
            continue
        draw(chart, run, document.get("source", ""), args.out / chart.file)
        print(f"wrote {args.out / chart.file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
