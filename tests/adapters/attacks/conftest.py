"""One target server process per driver and test module (see harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.attacks.harness import Target, write_certs

DRIVERS = ["thread", "selector", "asyncio"]


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_certs(tmp_path_factory.mktemp("attack-certs"))


@pytest.fixture(scope="module", params=DRIVERS)
def target(request: pytest.FixtureRequest, cert_dir: Path) -> Iterator[Target]:
    running = Target(request.param, cert_dir)
    try:
        yield running
    finally:
        running.stop_and_read_log()
