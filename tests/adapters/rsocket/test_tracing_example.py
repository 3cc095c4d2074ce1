"""examples/tracing.py runs and prints one trace: the application's span,
a CLIENT span per request under it, and for each the server's SERVER span,
whose trace id is the client's and whose parent is the CLIENT span (joined
across the wire by the Zipkin metadata); the failing request is ERROR on
both sides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "tracing.py"
ROUTES = ("greet", "count", "fail", "echo", "log")


@pytest.fixture(scope="module")
def printed() -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_tracing_example_joins_client_and_server_spans_in_one_trace(
    printed: list[dict[str, Any]],
) -> None:
    (app,) = [s for s in printed if s["name"] == "checkout"]
    trace_id = app["context"]["trace_id"]
    assert app["parent_id"] is None
    for route in ROUTES:
        spans = {s["kind"]: s for s in printed if s["name"] == route}
        assert set(spans) == {"SpanKind.CLIENT", "SpanKind.SERVER"}, (route, spans)
        client, server = spans["SpanKind.CLIENT"], spans["SpanKind.SERVER"]
        assert client["parent_id"] == app["context"]["span_id"]
        assert client["context"]["trace_id"] == server["context"]["trace_id"] == trace_id
        assert server["parent_id"] == client["context"]["span_id"]
        for span in (client, server):
            assert span["attributes"]["rpc.system"] == "rsocket"
            assert span["attributes"]["rpc.method"] == route
    assert len(printed) == 1 + 2 * len(ROUTES)


def test_tracing_example_a_failure_is_an_error_on_both_sides(
    printed: list[dict[str, Any]],
) -> None:
    for span in printed:
        failed = span["name"] == "fail"
        assert (span["status"]["status_code"] == "ERROR") is failed, span
    errors = {s["kind"]: s["attributes"]["error.type"] for s in printed if s["name"] == "fail"}
    assert errors == {"SpanKind.CLIENT": "APPLICATION_ERROR", "SpanKind.SERVER": "ValueError"}
