"""The client commands over ``tls://`` and ``wss://`` against ``sansrs serve
--certfile/--keyfile`` with a private CA made here: ``--cafile`` trusts it,
the host name is checked unless ``--server-name`` names the certificate's,
``--certfile/--keyfile`` present a client certificate, and a certificate
that fails the check is named in one line (exit 3), not a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import trustme

from tests.adapters.cli.commands import sansrs, served


class Pki:
    """A private CA, a stranger CA, and PEM files for the server (for
    127.0.0.1 only: "localhost" is not in it) and a client."""

    def __init__(self, folder: Path) -> None:
        ca, stranger = trustme.CA(), trustme.CA()
        self.ca = folder / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        self.stranger = folder / "stranger.pem"
        stranger.cert_pem.write_to_path(str(self.stranger))
        self.cert, self.key = self._leaf(ca, folder, "server", "127.0.0.1")
        self.client_cert, self.client_key = self._leaf(ca, folder, "client", "client.example")
        self.ca_object = ca

    @staticmethod
    def _leaf(ca: trustme.CA, folder: Path, name: str, identity: str) -> tuple[Path, Path]:
        leaf = ca.issue_cert(identity)
        cert, key = folder / f"{name}.pem", folder / f"{name}.key"
        cert.write_bytes(b"".join(pem.bytes() for pem in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(key))
        return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def _serve(pki: Pki, url: str, *extra: str) -> AbstractContextManager[str]:
    return served(url, *extra, "--certfile", str(pki.cert), "--keyfile", str(pki.key))


@pytest.fixture(scope="module", params=["tls://127.0.0.1:0", "wss://127.0.0.1:0/rsocket"])
def secure_url(request: pytest.FixtureRequest, pki: Pki) -> Iterator[str]:
    with _serve(pki, request.param) as address:
        yield address


@pytest.mark.timeout(60)
def test_cli_request_trusts_a_private_ca_given_by_cafile(secure_url: str, pki: Pki) -> None:
    ok = sansrs("request", secure_url, "--rr", "hello", "--cafile", str(pki.ca))
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "hello\n", "")
    stream = sansrs("request", secure_url, "--stream", '{"n": 3, "size": 4}',
                    "--cafile", str(pki.ca))
    assert (stream.returncode, stream.stdout) == (0, "0000\n0001\n0002\n")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("trust", [(), ("--cafile", "stranger")])
def test_cli_request_names_an_untrusted_certificate_without_a_traceback(
    secure_url: str, pki: Pki, trust: tuple[str, ...]
) -> None:
    """The system's CAs, or a CA that did not issue the certificate."""
    args = [str(pki.stranger) if a == "stranger" else a for a in trust]
    refused = sansrs("request", secure_url, "--rr", "hello", *args)
    assert refused.returncode == 3  # a connection problem
    assert refused.stdout == ""
    assert refused.stderr.startswith("error: TLS: the server's certificate is not trusted (")
    assert "--cafile" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.splitlines()) == 1


@pytest.mark.timeout(60)
def test_cli_request_checks_the_host_name_unless_server_name_names_it(
    secure_url: str, pki: Pki
) -> None:
    """The certificate names 127.0.0.1 only: the same server under
    "localhost" is refused, by default and as ``--server-name``; under its
    own name it is accepted (the name is what is checked, not the URL)."""
    by_name = secure_url.replace("127.0.0.1", "localhost")
    for args in ((by_name,), (secure_url, "--server-name", "localhost")):
        refused = sansrs("request", *args, "--rr", "hi", "--cafile", str(pki.ca))
        assert refused.returncode == 3, refused
        assert refused.stderr.startswith(
            "error: TLS: the server's certificate does not name this host ("
        ), refused.stderr
        assert "--server-name" in refused.stderr and "Traceback" not in refused.stderr
    ok = sansrs("request", by_name, "--rr", "hi", "--cafile", str(pki.ca),
                "--server-name", "127.0.0.1")
    assert (ok.returncode, ok.stdout) == (0, "hi\n"), ok.stderr


@pytest.mark.timeout(60)
def test_cli_request_presents_a_client_certificate_a_server_requires(pki: Pki) -> None:
    """A server (in this process) that requires a client certificate from
    the private CA: ``--certfile/--keyfile`` get through, none does not."""
    import ssl

    from sansrs.adapters.rsocket import serve
    from sansrs.adapters.rsocket.demo import DemoHandler

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.cert, pki.key)
    pki.ca_object.configure_trust(ctx)
    ctx.verify_mode = ssl.CERT_REQUIRED
    server = serve("tls://127.0.0.1:0", handler=DemoHandler(), ssl_context=ctx)
    try:
        ok = sansrs("request", server.url, "--rr", "mtls", "--cafile", str(pki.ca),
                    "--certfile", str(pki.client_cert), "--keyfile", str(pki.client_key))
        assert (ok.returncode, ok.stdout) == (0, "mtls\n"), ok.stderr
        refused = sansrs("request", server.url, "--rr", "mtls", "--cafile", str(pki.ca),
                         "--timeout", "5")
        assert refused.returncode == 3, refused
        assert "Traceback" not in refused.stderr
    finally:
        server.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tcp://127.0.0.1:1", "--cafile", "ca.pem"),
         "error: --cafile: only for tls:// and wss:// URLs, not tcp://"),
        (("ws://127.0.0.1:1/x", "--server-name", "x", "--certfile", "c.pem"),
         "error: --server-name, --certfile: only for tls:// and wss:// URLs, not ws://"),
        (("tls://127.0.0.1:1", "--keyfile", "k.pem"),
         "error: --keyfile needs --certfile (the certificate the key is for)"),
        (("tls://127.0.0.1:1", "--cafile", "/nonexistent/ca.pem"),
         "error: --cafile: cannot load: "),
    ],
)
def test_cli_request_tls_options_misused_are_a_usage_error(
    args: tuple[str, ...], message: str
) -> None:
    bad = sansrs("request", *args, "--rr", "x")
    assert bad.returncode == 1
    assert bad.stderr.startswith(message), bad.stderr


@pytest.mark.timeout(60)
def test_cli_subscribe_trusts_a_private_ca_given_by_cafile(pki: Pki) -> None:
    """``sansrs subscribe`` takes the same options (rsio over TLS)."""
    with _serve(pki, "tls://127.0.0.1:0", "--protocol", "rsio") as address:
        ok = sansrs("subscribe", address, "counter/3", "--cafile", str(pki.ca))
        assert (ok.returncode, ok.stdout) == (0, "0\n1\n2\n"), ok.stderr
        refused = sansrs("subscribe", address, "counter/3")
        assert refused.returncode == 3
        assert refused.stderr.startswith("error: TLS: the server's certificate is not trusted")
