"""What every attack needs: the target server process (:mod:`.target`)
with what /proc says of it, a well-behaved client busy on a connection of
its own while the attack runs (it must never stall for more than
:data:`MAX_STALL` seconds), and the check that the server serves new
clients afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sansrs.adapters import ditto, rsio, rsocket
from sansrs.adapters.transport.urls import parse_url

from sansrs.rsocket import Connection, ConnectionConfig, Role
from tests.adapters.transport.tls_certs import certs

ROOT = Path(__file__).resolve().parents[3]
WAIT = 10.0
#: The longest a well-behaved client may wait for an answer during an attack.
MAX_STALL = 2.0
#: The most the attacked server process may ever hold in memory.
MAX_RSS_MIB = 300
THING = "org.sansrs.attack:thing"


def write_certs(directory: Path) -> Path:
    """The target's TLS certificate (the CA of ``tls_certs.certs()``)."""
    (directory / "server.pem").write_bytes(certs().server.private_key_and_cert_chain_pem.bytes())
    return directory


def client_tls() -> ssl.SSLContext:
    return certs().client_context()


class Target:
    """The server process under attack (see :mod:`.target`)."""

    def __init__(self, driver: str, cert_dir: Path, *extra: str) -> None:
        self.driver = driver
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.adapters.attacks.target", "--driver", driver,
             "--certs", str(cert_dir), *extra],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        # The log is read as it comes: a full pipe would block the server.
        self._log: list[bytes] = []
        stderr = self.proc.stderr
        self._logger = threading.Thread(
            target=lambda: self._log.extend(iter(stderr.readline, b"")), daemon=True
        )
        self._logger.start()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the target did not start: {self.stop_and_read_log()}")
        self.urls: dict[str, str] = json.loads(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def port(self, name: str) -> int:
        return parse_url(self.urls[name]).port

    def _status(self, field: str) -> int:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise KeyError(field)

    def rss_mib(self) -> float:
        return self._status("VmRSS") / 1024

    def peak_mib(self) -> float:
        """The most the process has held so far (VmHWM)."""
        return self._status("VmHWM") / 1024

    def threads(self) -> int:
        return self._status("Threads")

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    def check_bounded(self) -> None:
        assert self.proc.poll() is None, "the target died"
        peak = self.peak_mib()
        assert peak < MAX_RSS_MIB, f"the target held {peak:.0f} MiB"

    def stop_and_read_log(self) -> str:
        """End the process (its standard input closes) and return its log."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._logger.join(WAIT)
        return b"".join(self._log).decode(errors="replace")


# -- well-behaved clients ----------------------------------------------------------------


def _rsocket_client(target: Target, name: str) -> tuple[Any, Callable[[], None]]:
    options: dict[str, Any] = {"connect_timeout": WAIT}
    if name == "rsocket-tls":
        options.update(ssl_context=client_tls(), server_hostname="localhost")
    client = rsocket.connect(target.urls[name], **options)

    def exchange() -> None:
        assert client.request_response(b"ping", timeout=WAIT) == rsocket.Payload(b"ping")

    return client, exchange


def _rsio_client(target: Target, name: str) -> tuple[Any, Callable[[], None]]:
    client = rsio.connect(target.urls[name], connect_timeout=WAIT)

    def exchange() -> None:
        assert len(list(client.subscribe("counter/5", prefetch=8, timeout=WAIT))) == 5

    return client, exchange


def _ditto_client(target: Target, name: str) -> tuple[Any, Callable[[], None]]:
    client = ditto.connect(target.urls[name], connect_timeout=WAIT)

    def exchange() -> None:
        events = list(client.subscribe_for_persisted_events(THING, timeout=WAIT))
        assert [e["revision"] for e in events] == list(range(1, 21))

    return client, exchange


CLIENTS = {
    "rsocket": _rsocket_client,
    "rsocket-small": _rsocket_client,
    "rsocket-tls": _rsocket_client,
    "rsocket-ws": _rsocket_client,
    "rsocket-resume": _rsocket_client,
    "rsio": _rsio_client,
    "ditto": _ditto_client,
}


def serves_a_new_client(target: Target, name: str) -> None:
    """A fresh connection gets its answer."""
    client, exchange = CLIENTS[name](target, name)
    with client:
        exchange()


class GoodClient:
    """A well-behaved client of ``name`` exchanging on its own connection,
    paced, from its own thread; ``check()`` says whether it was ever kept
    waiting longer than :data:`MAX_STALL`."""

    def __init__(self, target: Target, name: str) -> None:
        self.client, self._exchange = CLIENTS[name](target, name)
        self._exchange()  # connected and answered before the attack starts
        self.exchanges = 0
        self.worst = 0.0
        self.error: BaseException | None = None
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"good-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._exchange()
                now = time.monotonic()
                self.worst = max(self.worst, now - self._last)
                self._last = now
                self.exchanges += 1
                self._stop.wait(0.02)  # pacing, not waiting: leaves the CPU to the attack
        except BaseException as exc:  # reported by check()
            self.error = exc

    def check(self) -> None:
        """Stop, then: no failure, no stall, and at least one exchange."""
        pending = time.monotonic() - self._last  # an exchange still waiting counts
        self._stop.set()
        self._thread.join(WAIT + MAX_STALL)
        self.client.close()
        if self.error is not None:
            raise AssertionError(f"the good client failed: {self.error!r}") from self.error
        worst = max(self.worst, pending)
        assert worst < MAX_STALL, f"the good client waited {worst:.2f} s"
        assert self.exchanges >= 1


@contextlib.contextmanager
def attacked(target: Target, name: str) -> Iterator[None]:
    """Around one attack on ``name``: a good client busy meanwhile, then the
    memory bound, the good client's record, and a new client served."""
    good = GoodClient(target, name)
    try:
        yield
    finally:
        good.check()
    target.check_bounded()
    serves_a_new_client(target, name)


# -- raw connections -------------------------------------------------------------------


def raw(target: Target, name: str, *, timeout: float = WAIT) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", target.port(name)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_to_end(sock: socket.socket, limit: int = 1 << 30) -> bytes:
    """What the server sends until it closes (a reset counts as closed)."""
    got = bytearray()
    with contextlib.suppress(ConnectionResetError):
        while len(got) < limit and (chunk := sock.recv(65536)):
            got += chunk
    return bytes(got)


def read_unacknowledged_then_vanish(target: Target, name: str, nbytes: int) -> None:
    """A resumable RSocket session that reads ``nbytes`` of a stream but
    never acknowledges a position (no KEEPALIVE answered), then vanishes
    (a reset, without a word): the server retains what it sent."""
    core = Connection(Role.CLIENT, ConnectionConfig())
    core.setup(keepalive_interval=60_000, max_lifetime=600_000, resume=True)
    core.request_stream(json.dumps({"n": 10**6, "size": 60_000}).encode(), initial_n=2**31 - 1)
    with raw(target, name) as sock:
        sock.sendall(core.data_to_send())
        got = 0
        while got < nbytes:
            chunk = sock.recv(1 << 20)
            assert chunk, "the server closed the session"
            got += len(chunk)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def send_until_closed(sock: socket.socket, chunks: Iterator[bytes]) -> bool:
    """Send ``chunks`` until they end or the server closes the connection;
    True if the server closed it first."""
    try:
        for chunk in chunks:
            sock.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        return True
    return False
