"""The Spark services against strangers (docs/security.md), without Spark:
the service secret checked at SETUP, carried by ``server.url`` and by what is
made from it; a write's commit, abort and partitions taken only from its
owner; a writer reused for another action writing again (mode partition) or
refused (mode job), never dropped as duplicates; TLS, and client
certificates, for writers and readers alike."""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from sansrs.adapters.drive import ConnectionClosed
from sansrs.adapters.rsocket import RSocketError, connect
from sansrs.adapters.spark import (
    SECRET_ENV,
    Access,
    ClientTls,
    MemorySink,
    Service,
    SinkError,
    SparkServer,
    WriteTarget,
    commit_job,
    connect_service,
    open_partition_stream,
    partition_reader,
    partition_writer,
    serve,
    write_partition,
)
from sansrs.adapters.spark import partitions as partitions_module
from sansrs.adapters.spark.auth import bearer, split_secret, with_secret

from tests.adapters.transport.tls_certs import certs


def numbers(partition: int, partitions: int, options: Mapping[str, Any]) -> Iterator[Any]:
    n = int(options.get("n", 10))
    return ({"i": i} for i in range(partition * n // partitions, (partition + 1) * n // partitions))


def rows(n: int) -> list[dict[str, int]]:
    return [{"i": i} for i in range(n)]


@pytest.fixture
def sink() -> MemorySink:
    return MemorySink()


@pytest.fixture
def server(sink: MemorySink) -> Iterator[SparkServer]:
    with serve("tcp://127.0.0.1:0", Service(sources={"n": numbers}, sinks={"out": sink})) as s:
        yield s


def _read(url: str, **access: Any) -> list[Any]:
    got: list[Any] = []
    for batch in open_partition_stream(url, "n", 0, 1, access=Access(**access)):
        got.extend(batch)
    return got


# -- the secret ----------------------------------------------------------------


def test_serve_generates_a_secret_that_its_url_carries(server: SparkServer) -> None:
    assert server.secret and len(server.secret) >= 40
    assert split_secret(server.url) == (server.address, server.secret)
    assert server.secret not in server.address and server.secret not in repr(server)
    other = serve("tcp://127.0.0.1:0", Service())
    with other:
        assert other.secret != server.secret  # one per service


@pytest.mark.parametrize("setup_data", [b"", bearer("wrong"), b"\x81"])
def test_connection_without_the_secret_is_rejected_at_setup(
    server: SparkServer, setup_data: bytes
) -> None:
    with connect(server.address, setup_data=setup_data) as client, pytest.raises(
        ConnectionClosed, match=r"REJECTED_SETUP.*needs its secret"
    ):
        client.request_response(b"{}", timeout=10)


def test_a_stranger_cannot_write_or_read(server: SparkServer, sink: MemorySink) -> None:
    stranger = WriteTarget(url=server.address, route="out")
    with pytest.raises(ConnectionClosed, match="REJECTED_SETUP"):
        write_partition(stranger, rows(3), partition=0)
    with pytest.raises(ConnectionClosed, match="REJECTED_SETUP"):
        _read(server.address)
    assert sink.rows_received == 0 and sink.partitions == {}


def test_writers_and_readers_made_from_server_url_authenticate(
    server: SparkServer, sink: MemorySink
) -> None:
    writer = pickle.loads(pickle.dumps(partition_writer(server.url, route="out")))
    assert writer.write(rows(5)).rows == 5
    reader = pickle.loads(pickle.dumps(partition_reader(server.url, route="n", partitions=2)))
    assert list(reader.read(0)) + list(reader.read(1)) == rows(10)
    assert server.secret not in repr(writer) and server.secret not in repr(reader)


def test_secret_by_argument_or_environment(
    server: SparkServer, sink: MemorySink, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert server.secret is not None
    assert _read(server.address, secret=server.secret) == rows(10)
    writer = partition_writer(server.address, route="out", secret=server.secret)
    assert writer.write(rows(2)).rows == 2
    monkeypatch.setenv(SECRET_ENV, server.secret)
    assert _read(server.address) == rows(10)
    # The argument wins over the URL, which wins over the environment.
    with pytest.raises(ConnectionClosed, match="REJECTED_SETUP"):
        _read(server.url, secret="not it")
    monkeypatch.setenv(SECRET_ENV, "not it")
    assert _read(server.url) == rows(10)


def test_serve_with_a_given_secret_and_without_authentication(sink: MemorySink) -> None:
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink}), secret="s3cret") as server:
        assert server.url == with_secret(server.address, "s3cret")
        access = Access(secret="s3cret")
        with connect_service(server.address, access=access) as client, pytest.raises(
            RSocketError, match="missing job request"  # past SETUP: the service answered
        ):
            client.request_response(b"", timeout=10)
    with serve("tcp://127.0.0.1:0", Service(sinks={"out": sink}), authenticate=False) as open_:
        assert open_.secret is None and open_.url == open_.address
        ack = write_partition(WriteTarget(url=open_.url, route="out"), rows(1), partition=0)
        assert ack.rows == 1
    with pytest.raises(ValueError, match="secret= needs authenticate"):
        serve("tcp://127.0.0.1:0", Service(), secret="x", authenticate=False)


# -- a write belongs to its owner -----------------------------------------------------


def test_only_the_owner_commits_or_aborts_a_write(server: SparkServer, sink: MemorySink) -> None:
    owner = WriteTarget(url=server.url, route="out", app="job", commit="job")
    for p in range(2):
        write_partition(owner, rows(3), partition=p)
    # A stranger who holds the service secret and saw the write id.
    stranger = WriteTarget(url=server.url, route="out", app="job", write=owner.write, commit="job")
    with pytest.raises(SinkError, match="belongs to another writer: only its owner may abort"):
        commit_job(stranger, (), abort=True)
    with pytest.raises(SinkError, match="only its owner may commit"):
        commit_job(stranger, [0, 1])
    with pytest.raises(SinkError, match="belongs to another writer"):
        write_partition(stranger, rows(100), partition=2)
    assert sink.partitions == {}
    assert commit_job(owner, [0, 1]) == {"committed": 6, "partitions": 2}
    assert sink.rows() == rows(3) + rows(3)


def test_owner_token_travels_with_the_target_not_the_write_id(server: SparkServer) -> None:
    a = WriteTarget(url=server.url, route="out")
    b = WriteTarget(url=server.url, route="out", write=a.write)
    assert a.owner and a.owner != b.owner and a.owner not in repr(a)
    assert pickle.loads(pickle.dumps(a)).owner == a.owner


# -- one write identity per action ------------------------------------------------


def _in_stage(monkeypatch: pytest.MonkeyPatch, stage: int, attempt: int = 0) -> None:
    info = (0, attempt, stage, 100 + stage)
    monkeypatch.setattr(partitions_module, "task_info", lambda: info)


def test_writer_reused_for_a_second_action_writes_again(
    server: SparkServer, sink: MemorySink, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = partition_writer(server.url, route="out")
    _in_stage(monkeypatch, stage=3)
    assert not writer.write([{"a": 1}]).duplicate
    _in_stage(monkeypatch, stage=3, attempt=1)  # a retry of the same task
    assert writer.write([{"a": 1}]).duplicate
    _in_stage(monkeypatch, stage=8)  # the next action
    ack = writer.write([{"b": 2}])
    assert not ack.duplicate and ack.rows == 1
    assert sorted(map(str, sink.rows())) == ["{'a': 1}", "{'b': 2}"]


def test_job_mode_writer_reused_for_a_second_action_is_refused(
    server: SparkServer, sink: MemorySink, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = partition_writer(server.url, route="out", commit="job")
    _in_stage(monkeypatch, stage=4)
    writer.write(rows(2))
    _in_stage(monkeypatch, stage=9)
    with pytest.raises(SinkError, match="belongs to Spark stage 4, not 9: a writer serves one"):
        writer.write(rows(2))
    assert writer.commit([0]) == {"committed": 2, "partitions": 1}


def test_sink_refuses_a_second_stage_even_from_an_old_writer(
    server: SparkServer, sink: MemorySink
) -> None:
    target = WriteTarget(url=server.url, route="out")
    write_partition(target, rows(1), partition=0, stage=1)
    with pytest.raises(SinkError, match="belongs to Spark stage 1, not 2"):
        write_partition(target, rows(1), partition=1, stage=2)
    assert sink.duplicates == 0


# -- TLS -------------------------------------------------------------------------


@pytest.fixture
def tls_server(sink: MemorySink) -> Iterator[SparkServer]:
    service = Service(sources={"n": numbers}, sinks={"out": sink})
    with serve("tls://127.0.0.1:0", service, ssl_context=certs().server_context()) as s:
        yield s


def _ca() -> str:
    return certs().ca.cert_pem.bytes().decode()


def test_tls_writer_reader_and_commit(tls_server: SparkServer, sink: MemorySink) -> None:
    tls = ClientTls(ca=_ca())
    writer = partition_writer(tls_server.url, route="out", commit="job", tls=tls)
    writer.write(rows(4))
    assert writer.commit([0]) == {"committed": 4, "partitions": 1}
    reader = partition_reader(tls_server.url, route="n", partitions=1, tls=tls)
    assert list(reader.read(0)) == rows(10)
    assert _read(tls_server.url, tls=tls) == rows(10)


def test_tls_reader_refuses_a_server_it_does_not_trust(tls_server: SparkServer) -> None:
    import ssl

    with pytest.raises(ssl.SSLCertVerificationError):
        _read(tls_server.url, tls=ClientTls(ca=certs().stranger_ca.cert_pem.bytes().decode()))


def test_tls_with_client_certificates(sink: MemorySink, tmp_path: Any) -> None:
    c = certs()
    context = c.server_context(require_client_cert=True)
    with serve("tls://127.0.0.1:0", Service(sources={"n": numbers}), ssl_context=context) as s:
        pem = c.client.private_key_and_cert_chain_pem.bytes().decode()
        # PEM text (it travels to the tasks) or files on the executors.
        assert _read(s.url, tls=ClientTls(ca=_ca(), cert=pem)) == rows(10)
        path = tmp_path / "client.pem"
        path.write_text(pem)
        assert _read(s.url, tls=ClientTls(ca=_ca(), cert=str(path))) == rows(10)
        with pytest.raises((ConnectionClosed, OSError)):
            _read(s.url, tls=ClientTls(ca=_ca()))


def test_unix_socket_service_is_readable(sink: MemorySink, tmp_path: Any) -> None:
    url = f"unix://{tmp_path}/spark.sock"
    with serve(url, Service(sources={"n": numbers})) as s:
        assert _read(s.url) == rows(10)


def test_client_tls_is_picklable_and_checks_its_fields() -> None:
    tls = ClientTls(ca=_ca(), check_hostname=False)
    assert pickle.loads(pickle.dumps(tls)) == tls
    assert tls.context().check_hostname is False
    with pytest.raises(ValueError, match="key without cert"):
        ClientTls(key="k.pem")
