"""Serve the browser demo: the page over HTTP and the demo responder over
RSocket/WebSocket with resumable sessions. Build the page first (``make
browser``), then:

    .venv/bin/python examples/browser/serve.py [--ws ws://127.0.0.1:7878/rsocket] [--http-port 8000]

and open the printed page URL. Both listen on 127.0.0.1 only. Over TLS:
``--ws wss://127.0.0.1:7878/rsocket --certfile cert.pem [--keyfile key.pem]``
(a certificate the browser trusts for 127.0.0.1; README.md says how to
trust a test certificate).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import ssl
import threading
from pathlib import Path
from urllib.parse import quote

from sansrs.adapters.rsocket import ResumableServer, ResumeOptions, serve_resumable
from sansrs.adapters.rsocket.demo import DemoHandler
from sansrs.adapters.transport.tls import server_context
from sansrs.adapters.transport.websocket import HandshakeRequest, WebSocketOptions

HERE = Path(__file__).resolve().parent
BUNDLE = HERE / "dist" / "demo.js"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static files from this directory; one line per request on stderr is
    noise in a demo."""

    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
    }

    def log_message(self, format: str, *args: object) -> None:
        pass


class DemoSite:
    """The page (``http_url``) and the resumable demo responder (``ws_url``,
    ``wss://`` with ``ssl_context``); ``page_url(ws)`` is the page pointed at
    ``ws`` (default: ``ws_url``).

    A browser lets any page it shows open a WebSocket to any address, this
    one included, and says which page in ``Origin``: the upgrade is refused
    (403) unless ``Origin`` is the page's own origin or absent (a client
    that is not a browser)."""

    def __init__(
        self,
        ws: str = "ws://127.0.0.1:0/rsocket",
        http_port: int = 0,
        resume: ResumeOptions | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if not BUNDLE.is_file():
            raise FileNotFoundError(f"{BUNDLE} is missing: run `make browser` first")
        handler = functools.partial(_QuietHandler, directory=str(HERE))
        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", http_port), handler)
        self._http.daemon_threads = True
        try:
            self.rsocket: ResumableServer = serve_resumable(
                ws,
                handler_factory=DemoHandler,
                resume=resume,
                websocket=WebSocketOptions(authorize=self._same_origin),
                ssl_context=ssl_context,
            )
        except (OSError, ValueError):
            self._http.server_close()
            raise
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="demo-http", daemon=True
        )
        self._thread.start()

    @property
    def origin(self) -> str:
        return self.http_url.rstrip("/")

    def _same_origin(self, request: HandshakeRequest) -> int | None:
        origin = request.header("origin")
        return None if origin is None or origin == self.origin else 403

    @property
    def ws_url(self) -> str:
        return self.rsocket.url

    @property
    def http_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/"

    def page_url(self, ws: str | None = None) -> str:
        return f"{self.http_url}index.html?url={quote(ws or self.ws_url, safe='')}"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self.rsocket.close()

    def __enter__(self) -> DemoSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--ws",
        default="ws://127.0.0.1:7878/rsocket",
        help="where the RSocket/WebSocket server listens (port 0: any)",
    )
    parser.add_argument(
        "--http-port", type=int, default=8000, help="the page's HTTP port on 127.0.0.1 (0: any)"
    )
    parser.add_argument("--certfile", help="wss://: the server's certificate chain (PEM)")
    parser.add_argument("--keyfile", help="wss://: its private key (PEM), if not in certfile")
    args = parser.parse_args()
    if args.ws.startswith("wss://") != (args.certfile is not None):
        parser.error("--certfile goes with a wss:// address, and a wss:// address needs it")
    context = None if args.certfile is None else server_context(args.certfile, args.keyfile)
    with DemoSite(args.ws, args.http_port, ssl_context=context) as site:
        print(f"RSocket over WebSocket (resumable): {site.ws_url}")
        print(f"open the page: {site.page_url()}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
