"""Each kind of kubeconfig credential, through `connect` and the transport, against the simulator:
a bearer token, an exec credential plugin, and a client certificate over TLS (the simulator's
app served by uvicorn with a CA of the test's own that requires the client's certificate).
Known credentials are answered, unknown ones refused, and the refusals are `ClusterError`s."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ipaddress
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from dra_mirror.service.clusters.config import close_all, connect
from dra_mirror.service.clusters.errors import Forbidden, Unreachable
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.sim.served import ServedCluster
from dra_mirror.service.sim.server import build_app
from dra_mirror.service.sim.store import ClusterStore


def kubeconfig(path: Path, server: str, user: dict[str, Any], cluster: dict | None = None) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    return str(path)


async def namespaces(path: str) -> list[str]:
    [connection] = await connect(path, None)
    try:
        body = await ClusterApi("c", connection.api_client).get("/api/v1/namespaces")
    finally:
        await close_all([connection])
    return [item["metadata"]["name"] for item in orjson.loads(body)["items"]]


@pytest.fixture
async def east(tmp_path: Path) -> AsyncIterator[str]:
    """The URL of the access scenario's `east`, which knows a set of bearer tokens."""
    world = build_world(load_scenario("access"))
    async with Simulator(world.specs[:1], kubeconfig_path=tmp_path / "sim") as sim:
        yield sim.url("east")


def exec_user(tmp_path: Path, token: str) -> dict[str, Any]:
    plugin = tmp_path / f"plugin-{token}.py"
    plugin.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        f"'kind': 'ExecCredential', 'status': {{'token': {token!r}}}}}))\n"
    )
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }


async def test_a_bearer_token_is_answered_and_an_unknown_one_refused(east, tmp_path):
    known = kubeconfig(tmp_path / "known", east, {"token": "bob-token"})
    assert "ml" in await namespaces(known)
    unknown = kubeconfig(tmp_path / "unknown", east, {"token": "nobody"})
    with pytest.raises(Forbidden, match="401"):
        await namespaces(unknown)


async def test_an_exec_plugin_token_is_answered_and_an_unknown_one_refused(east, tmp_path):
    known = kubeconfig(tmp_path / "known", east, exec_user(tmp_path, "alice-token"))
    assert "ml" in await namespaces(known)
    unknown = kubeconfig(tmp_path / "unknown", east, exec_user(tmp_path, "nobody"))
    with pytest.raises(Forbidden, match="401"):
        await namespaces(unknown)


class Pki:
    """A CA of the test's own, a server certificate for 127.0.0.1 and a client certificate."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca = self._certificate("test-ca", self.ca_key, self.ca_key, None, ca=True)
        self.files = {"ca.crt": self._pem(self.ca)}
        for name, san in (("server", ipaddress.ip_address("127.0.0.1")), ("client", None)):
            key = ec.generate_private_key(ec.SECP256R1())
            self.files[f"{name}.crt"] = self._pem(
                self._certificate(name, key, self.ca_key, self.ca, san=san)
            )
            self.files[f"{name}.key"] = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        for file, data in self.files.items():
            (directory / file).write_bytes(data)

    def path(self, file: str) -> str:
        return str(self.directory / file)

    def data(self, file: str) -> str:
        return base64.b64encode(self.files[file]).decode()

    @staticmethod
    def _pem(certificate: x509.Certificate) -> bytes:
        return certificate.public_bytes(serialization.Encoding.PEM)

    @staticmethod
    def _certificate(name, key, issuer_key, issuer, *, ca=False, san=None) -> x509.Certificate:
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer.subject if issuer else subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if san is not None:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(san)]), critical=False
            )
        return builder.sign(issuer_key, hashes.SHA256())


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # the test's process keeps its handlers
        yield


@pytest.fixture
async def tls_cluster(tmp_path: Path) -> AsyncIterator[tuple[str, Pki]]:
    """The simulator's app over TLS, requiring a client certificate signed by the test's CA."""
    pki = Pki(tmp_path)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    config = uvicorn.Config(
        build_app(ServedCluster(ClusterStore("tls", seed=1))),
        log_level="warning",
        access_log=False,
        lifespan="off",
        ssl_certfile=pki.path("server.crt"),
        ssl_keyfile=pki.path("server.key"),
        ssl_ca_certs=pki.path("ca.crt"),
        ssl_cert_reqs=ssl.CERT_REQUIRED,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done(), "the TLS server stopped during startup"
            await asyncio.sleep(0.01)
        yield f"https://127.0.0.1:{sock.getsockname()[1]}", pki
    finally:
        server.should_exit = True
        await task
        sock.close()


async def test_a_client_certificate_is_answered_over_tls(tls_cluster, tmp_path):
    url, pki = tls_cluster
    authority = {"certificate-authority-data": pki.data("ca.crt")}
    inline = {
        "client-certificate-data": pki.data("client.crt"),
        "client-key-data": pki.data("client.key"),
    }
    assert "default" in await namespaces(kubeconfig(tmp_path / "inline", url, inline, authority))
    files = {"client-certificate": pki.path("client.crt"), "client-key": pki.path("client.key")}
    as_files = {"certificate-authority": pki.path("ca.crt")}
    assert "default" in await namespaces(kubeconfig(tmp_path / "files", url, files, as_files))


async def test_tls_without_the_client_certificate_or_the_ca_is_refused(tls_cluster, tmp_path):
    url, pki = tls_cluster
    authority = {"certificate-authority-data": pki.data("ca.crt")}
    with pytest.raises(Unreachable):  # the server ends the handshake
        await namespaces(kubeconfig(tmp_path / "no-cert", url, {}, authority))
    inline = {
        "client-certificate-data": pki.data("client.crt"),
        "client-key-data": pki.data("client.key"),
    }
    with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
        await namespaces(kubeconfig(tmp_path / "no-ca", url, inline))


async def test_a_netrc_entry_for_the_server_changes_nothing(east, tmp_path, monkeypatch):
    # Kubernetes clients take credentials from the kubeconfig alone; a ~/.netrc naming the API
    # server's host must neither add a second Authorization nor be read for every request.
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    known = kubeconfig(tmp_path / "known", east, {"token": "bob-token"})
    assert "ml" in await namespaces(known)


async def test_insecure_skip_tls_verify_and_tls_server_name_are_honoured(tls_cluster, tmp_path):
    url, pki = tls_cluster
    inline = {
        "client-certificate-data": pki.data("client.crt"),
        "client-key-data": pki.data("client.key"),
    }
    skip = {"insecure-skip-tls-verify": True}  # the server's CA is nobody's the client knows
    assert "default" in await namespaces(kubeconfig(tmp_path / "skip", url, inline, skip))
    authority = {"certificate-authority-data": pki.data("ca.crt")}
    other_name = {**authority, "tls-server-name": "elsewhere.example"}  # not the certificate's
    with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
        await namespaces(kubeconfig(tmp_path / "other-name", url, inline, other_name))


async def test_contexts_with_the_same_tls_settings_share_one_context_and_http_builds_none(
    tls_cluster, tmp_path, monkeypatch
):
    url, pki = tls_cluster
    built: list[object] = []
    create = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(kwargs.get("cafile"))
        return create(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    user = {
        "client-certificate-data": pki.data("client.crt"),
        "client-key-data": pki.data("client.key"),
    }
    cluster = {"server": url, "certificate-authority-data": pki.data("ca.crt")}
    path = tmp_path / "two"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [
                    {"name": name, "context": {"cluster": "c", "user": "u"}} for name in "ab"
                ],
            }
        )
    )
    both = await connect(str(path), None)
    try:
        assert len(built) == 1  # one context for both
        for connection in both:
            body = await ClusterApi("c", connection.api_client).get("/api/v1/namespaces")
            assert b'"default"' in body
        rests = [connection.api_client.rest_client for connection in both]
        assert rests[0].pool_manager.connector._ssl is rests[1].pool_manager.connector._ssl
    finally:
        await close_all(both)
    plain = kubeconfig(tmp_path / "plain", "http://127.0.0.1:1", {"token": "t"})
    [connection] = await connect(plain, None)
    await close_all([connection])
    assert len(built) == 1  # a plain http:// server: no TLS context built
