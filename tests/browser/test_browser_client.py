"""The browser demo (examples/browser) in a real headless Chromium: the page's
rsocket-js client against ``serve_resumable`` over ``ws://`` and ``wss://``,
through the fault proxy where a link is cut. What arrived is read from the
page's ``window.sansrsDemo``.

Over ``wss://`` the server has a certificate of a throwaway test CA, and
Chromium trusts exactly its key: ``--ignore-certificate-errors-spki-list``
with the SHA-256 of the certificate's public key (honoured only with a
``--user-data-dir``, which playwright passes). The blanket
``--ignore-certificate-errors`` would accept any certificate at all, so a
TLS setup that is wrong would still pass; adding the test CA to the
system's or the profile's trust store would touch more than the test.

Needs the system's Chromium (Debian's ``chromium``) and node; the page's
packages (playwright-core among them) and bundle come from ``make browser``
(CI runs both). Skipped only where Chromium or node is not installed."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from sansrs.adapters.rsocket import ResumeOptions
from sansrs.adapters.tools.faults import FaultProxy

from tests.adapters.transport.tls_certs import certs

DEMO = Path(__file__).resolve().parents[2] / "examples" / "browser"
NODE = shutil.which("node")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
]


def _load_serve() -> ModuleType:
    spec = importlib.util.spec_from_file_location("browser_demo_serve", DEMO / "serve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _proxy(site: Any) -> FaultProxy:
    """A fault proxy in front of ``site``'s WebSocket server."""
    return FaultProxy(("127.0.0.1", site.rsocket.endpoint.port), websocket=True)


def _spki_sha256(cert_pem: bytes) -> str:
    """What ``--ignore-certificate-errors-spki-list`` takes: the base64 of
    the SHA-256 of the certificate's SubjectPublicKeyInfo (DER)."""
    key = x509.load_pem_x509_certificate(cert_pem).public_key()
    spki = key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def _items(n: int, start: int = 0) -> list[str]:
    return [f"{i:08d}" for i in range(start, n)]


class Browser:
    """``drive.mjs`` in a subprocess: one JSON command a line, one answer each."""

    def __init__(self, *chromium_flags: str) -> None:
        assert NODE is not None and CHROMIUM is not None
        self._stderr: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen(
            [NODE, str(DEMO / "drive.mjs"), CHROMIUM, *chromium_flags],
            cwd=DEMO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self.version = self._answer()

    def _answer(self) -> Any:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise AssertionError(f"the browser driver exited: {self.stderr()}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise AssertionError(f"{answer['error']}\n{self.stderr()}")
        return answer["value"]

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def command(self, **command: str) -> Any:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(command) + "\n")
        self._proc.stdin.flush()
        return self._answer()

    def goto(self, url: str) -> None:
        self.command(goto=url)

    def open(
        self, site: Any, proxy: FaultProxy | None = None, scheme: str = "ws"
    ) -> dict[str, Any]:
        """A fresh page of ``site`` connected to it (through ``proxy``)."""
        ws = f"{scheme}://127.0.0.1:{proxy.port}/rsocket" if proxy is not None else None
        self.goto(site.page_url(ws))
        state: dict[str, Any] = self.js("sansrsDemo.connect(document.getElementById('url').value)")
        return state

    def js(self, expression: str) -> Any:
        return self.command(eval=expression)

    def wait(self, predicate: str, timeout_ms: int = 20_000) -> dict[str, Any]:
        """The page's state once ``predicate`` (JS, of the state ``s``) holds."""
        state: dict[str, Any] = self.js(f"sansrsDemo.waitFor(s => {predicate}, {timeout_ms})")
        return state

    def settled(self) -> dict[str, Any]:
        """The page's state after a request-response round trip on the same
        session: whatever the server sent before answering it has arrived."""
        assert self.js("sansrsDemo.ping('barrier')") == "barrier"
        state: dict[str, Any] = self.js("sansrsDemo.snapshot()")
        return state

    def received(self) -> list[str]:
        items: list[str] = self.js("sansrsDemo.snapshot({items: true}).received")
        return items

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if (
        not (DEMO / "node_modules" / "playwright-core").is_dir()
        or not (DEMO / "dist" / "demo.js").is_file()
    ):
        pytest.fail("the browser demo is not built: run `make browser` (CI does)")
    # Trusts the test server certificate's key, and no other (module notes).
    trusted = _spki_sha256(certs().server.cert_chain_pems[0].bytes())
    driver = Browser(f"--ignore-certificate-errors-spki-list={trusted}")
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture
def site() -> Iterator[Any]:
    with _load_serve().DemoSite() as demo_site:
        yield demo_site


def _stream_all(browser: Browser, n: int) -> dict[str, Any]:
    """A stream of ``n`` items with auto-request, to its end: each arrived
    once, in order, none beyond the demand."""
    browser.js(f"sansrsDemo.stream({{n: {n}, size: 8, auto: true, batch: 256}})")
    state = browser.wait("s.stream !== 'open'")
    assert state["stream"] == "complete", state
    assert browser.received() == _items(n)
    assert state["overDemand"] == 0
    return state


@pytest.mark.timeout(40)
def test_browser_stream_delivers_n_items_exactly_once_in_order(browser: Browser, site: Any) -> None:
    assert browser.open(site)["status"] == "connected"
    state = _stream_all(browser, 5000)
    assert state["connections"] == 1
    assert site.rsocket.registry.stats.resumed == 0


@pytest.mark.timeout(40)
def test_browser_stream_resumes_through_cuts_mid_stream_without_loss_or_duplicate(
    browser: Browser, site: Any
) -> None:
    with _proxy(site) as proxy:
        # Each of the first two links dies inside or right after one of its
        # 300th..1500th WebSocket messages, while the items flow.
        proxy.cut_messages_at_random(300, 1500, cuts=2)
        browser.open(site, proxy)
        state = _stream_all(browser, 5000)
        assert proxy.stats.cuts == 2
        assert state["connections"] == 3  # the first and one per cut
    assert site.rsocket.registry.stats.resumed == 2
    assert site.rsocket.registry.stats.rejected == 0


@pytest.mark.timeout(40)
def test_browser_wss_stream_exactly_once_in_order_and_resumes_through_cuts(
    browser: Browser,
) -> None:
    """Over ``wss://``: the page's certificate check passes for the test
    certificate's key (nothing else is trusted), 5,000 items arrive once
    each, in order, and two links cut at random bytes (inside TLS records,
    so inside WebSocket messages) are each resumed over a new TLS handshake
    and upgrade."""
    with (
        _load_serve().DemoSite(
            "wss://127.0.0.1:0/rsocket", ssl_context=certs().server_context()
        ) as site,
        FaultProxy(("127.0.0.1", site.rsocket.endpoint.port)) as proxy,
    ):
        assert site.ws_url.startswith("wss://")
        # At least 22 KB into a link: its TLS handshake and upgrade (about
        # 4 KB) and the TLS record (16 KB at most) carrying RESUME_OK always
        # get through. rsocket-js waits for RESUME_OK with no deadline: a
        # link lost before it arrives would never be replaced
        # (docs/resumption.md, Interop). 5,000 items are about 80 KB: the
        # stream outlasts both cuts.
        proxy.cut_at_random(22_000, 32_000, cuts=2)
        assert browser.open(site, proxy, "wss")["status"] == "connected"
        state = _stream_all(browser, 5000)
        assert proxy.stats.cuts == 2
        assert state["connections"] == 3  # the first and one per cut
        assert site.rsocket.registry.stats.resumed == 2
        assert site.rsocket.registry.stats.rejected == 0


@pytest.mark.timeout(40)
def test_browser_request_n_is_honoured_also_when_given_while_disconnected(
    browser: Browser, site: Any
) -> None:
    with _proxy(site) as proxy:
        browser.open(site, proxy)
        browser.js("sansrsDemo.stream({n: 100, size: 8, initial: 5})")
        browser.wait("s.count >= 5")
        state = browser.settled()  # the stream stalls at the demand
        assert (state["count"], state["requested"], state["outstanding"]) == (5, 5, 0)

        browser.js("sansrsDemo.request(10)")
        browser.wait("s.count >= 15")
        state = browser.settled()
        assert (state["count"], state["requested"], state["outstanding"]) == (15, 15, 0)

        browser.js("sansrsDemo.offline()")  # the page holds its reconnection
        proxy.cut_now()
        browser.wait("s.status === 'reconnecting' && s.reconnectAttempts === 1")
        browser.js("sansrsDemo.request(30)")  # demand given with no connection
        assert browser.js("sansrsDemo.snapshot()")["count"] == 15
        browser.js("sansrsDemo.online()")
        browser.wait("s.count >= 45")
        state = browser.settled()  # the REQUEST_N went out after the RESUME, once
        assert (state["count"], state["requested"], state["outstanding"]) == (45, 45, 0)
        assert state["connections"] == 2

        browser.js("sansrsDemo.request(1000)")
        state = browser.wait("s.stream !== 'open'")
        assert state["stream"] == "complete", state
        assert state["count"] == 100 and state["overDemand"] == 0
        assert browser.received() == _items(100)
        assert proxy.stats.cuts == 1
    assert site.rsocket.registry.stats.resumed == 1


@pytest.mark.timeout(40)
def test_browser_resume_of_a_session_the_server_forgot_ends_it_on_the_page(
    browser: Browser,
) -> None:
    expired = threading.Event()

    def step(name: str) -> None:
        if name == "finish":
            expired.set()

    options = ResumeOptions(keep_detached=0.2, on_step=step)
    with (
        _load_serve().DemoSite(resume=options) as site,
        _proxy(site) as proxy,
    ):
        browser.open(site, proxy)
        browser.js("sansrsDemo.stream({n: 100, size: 8, initial: 5})")
        browser.wait("s.count >= 5")
        browser.js("sansrsDemo.offline()")
        proxy.cut_now()
        assert expired.wait(20)  # keep_detached passed: the server forgot the session
        browser.js("sansrsDemo.online()")  # now the page reconnects and sends RESUME
        state = browser.wait("s.status === 'closed'")
        # rsocket-js reads ERROR[REJECTED_RESUME] (frame type 11) in place of
        # RESUME_OK and fails the stream; the page says the session ended.
        assert state["stream"] == "error" and "RESUME" in state["error"], state
        assert (state["count"], state["connections"]) == (5, 2)
        assert site.rsocket.registry.stats.expired == 1
        assert site.rsocket.registry.stats.resumed == 0


def _painted(browser: Browser, *ids: str) -> list[str]:
    """The text of the page's elements ``ids`` once two frames were painted."""
    names = json.dumps(list(ids))
    texts: list[str] = browser.js(
        "new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() =>"
        f" done({names}.map(id => document.getElementById(id).textContent)))))"
    )
    return texts


def _click(browser: Browser, selector: str) -> None:
    """Click the button once the page painted its latest state (a button is
    enabled or disabled when the page paints, a frame after the change)."""
    outcome = browser.js(
        "new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => {"
        f" const button = document.querySelector({json.dumps(selector)});"
        " if (button.disabled) done('disabled'); else { button.click(); done('clicked'); }"
        " })))"
    )
    assert outcome == "clicked", selector


@pytest.mark.timeout(40)
def test_browser_page_controls_drive_the_stream_and_show_the_demand(
    browser: Browser, site: Any
) -> None:
    browser.goto(site.page_url())  # connected by its button this time
    _click(browser, "#connect")
    browser.wait("s.status === 'connected'")
    browser.js(
        "(() => { const auto = document.getElementById('auto'); auto.checked = false;"
        " auto.dispatchEvent(new Event('change'));"
        " document.getElementById('n').value = '50';"
        " document.getElementById('reqn').value = '3'; })()"
    )
    _click(browser, "#start")
    browser.wait("s.count >= 3")
    browser.settled()
    _click(browser, 'button.req[data-n="10"]')
    browser.wait("s.count >= 13")
    browser.settled()
    assert _painted(browser, "status", "received", "requested", "outstanding", "stream") == [
        "connected",
        "13",
        "13",
        "0",
        "open",
    ]
    assert _painted(browser, "items")[0].split("\n")[-2:] == ["00000011", "00000012"]
    browser.js(  # auto-request on: the page asks for the rest itself
        "(() => { const auto = document.getElementById('auto'); auto.checked = true;"
        " auto.dispatchEvent(new Event('change')); })()"
    )
    state = browser.wait("s.stream !== 'open'")
    assert (state["stream"], state["count"], state["overDemand"]) == ("complete", 50, 0)
    assert browser.received() == _items(50)
    assert _painted(browser, "received", "stream") == ["50", "complete"]


@pytest.mark.timeout(40)
def test_browser_page_of_another_origin_is_refused_the_websocket(
    browser: Browser, site: Any
) -> None:
    # The same page from http://localhost:<port> is another origin than
    # http://127.0.0.1:<port>: any site a user visits could try the same.
    browser.goto(site.page_url().replace("127.0.0.1", "localhost", 1))
    outcome = browser.js(
        "sansrsDemo.connect(document.getElementById('url').value)"
        ".then(() => 'connected', () => 'refused')"
    )
    assert outcome == "refused"
    assert site.rsocket.registry.stats.started == 0
    browser.open(site)  # the page's own origin is let in
    browser.settled()  # (a SETUP has no answer: a round trip after it)
    assert site.rsocket.registry.stats.started == 1
