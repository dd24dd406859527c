"""Bad configuration as a user meets it: the installed `dra-mirror` console script as a
subprocess, with a kubeconfig, a database URL, an address or a setting that cannot work. Each
ends with one clear line on stderr and exit status 2, before anything starts (no HTTP server,
no request to the cluster), and never a traceback. A kubeconfig whose current-context names a
context that does not exist is fine when --context names one that does (kubectl agrees)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from dra_mirror.service.sim.run import Simulator
from tests.clusters.world import small_world

DRA_MIRROR = str(Path(sys.executable).with_name("dra-mirror"))
PATIENCE = 60.0  # seconds before a hung process fails the test (not a speed check)

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "current-context": "gone",  # names no context: irrelevant to the mirror, as to kubectl
    "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "good", "context": {"cluster": "c", "user": "u"}}],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_environment() -> dict[str, str]:
    """This environment without settings, kubeconfig or in-cluster variables — but serving
    without authentication, so that each case is about the setting it names."""
    left_out = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    return {
        k: v for k, v in os.environ.items() if not k.startswith("DRA_MIRROR_") and k not in left_out
    } | {"DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "true"}


def run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    environ = clean_environment() | {"HOME": str(tmp_path), **(env or {})}
    return subprocess.run(
        [DRA_MIRROR, *args], capture_output=True, text=True, env=environ, timeout=PATIENCE,
        cwd=tmp_path,
    )  # fmt: skip


def kubeconfig(tmp_path: Path, text: str | None = None) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG) if text is None else text)
    return str(path)


def assert_one_line(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dra-mirror: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "startup" not in result.stderr  # nothing started
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{{ not: yaml", "is not YAML"),
        ("", "is empty"),
        ("just a string\n", "is not a kubeconfig"),
        ("apiVersion: v1\nkind: Config\nclusters: []\n", "has no contexts"),
    ],
    ids=["garbage", "empty", "not-a-mapping", "context-less"],
)
def test_an_unusable_kubeconfig(tmp_path: Path, text: str, expected: str) -> None:
    path = kubeconfig(tmp_path, text)
    assert_one_line(run(tmp_path, "serve", "--kubeconfig", path), expected, path)


def test_an_unknown_context(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path)
    result = run(tmp_path, "serve", "--kubeconfig", path, "--context", "nope")
    assert_one_line(result, "has no context 'nope'", "(it has: good)")


def test_no_kubeconfig_at_all(tmp_path: Path) -> None:
    result = run(tmp_path, "watch", "--redis-url", "redis://127.0.0.1:9/0")
    assert_one_line(result, f"no kubeconfig found at {tmp_path}/.kube/config", "--kubeconfig")
    missing = str(tmp_path / "missing")
    assert_one_line(run(tmp_path, "serve", "--kubeconfig", missing), f"{missing} does not exist")
    env = {"DRA_MIRROR_CLUSTERS_KUBECONFIG": missing}
    assert_one_line(run(tmp_path, "serve", env=env), f"{missing} does not exist")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--port", "99999"), "port 99999: must be 1-65535"),
        (("--host", "no.such.host.invalid"), "the host does not resolve"),
        (("--host", "192.0.2.1"), "not an address of this machine"),
        (("--database-url", "mysql://u:secret@db/history"), "driver 'mysql' is not supported"),
        (("--database-url", "postgresql://u@db:port/history"), "is not a URL"),
        (("--database-url", "nosuchdb://x"), "driver 'nosuchdb' is not supported"),
        (("--redis-url", "http://u:secret@cache:6379"), "Redis URL: must be redis://"),
    ],
    ids=["port", "host", "not-local", "driver", "url", "unknown-driver", "redis"],
)
def test_a_bad_value(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    result = run(
        tmp_path, "serve", "--kubeconfig", kubeconfig(tmp_path), "--context", "good", *args
    )
    assert_one_line(result, expected)
    assert "secret" not in result.stderr  # URLs are never repeated: they may hold passwords


def test_a_bad_environment_variable_and_log_level(tmp_path: Path) -> None:
    env = {"DRA_MIRROR_HTTP_PORT": "eighty", "DRA_MIRROR_CLUSTERS_KUBECONFIG": kubeconfig(tmp_path)}
    assert_one_line(run(tmp_path, "serve", env=env), "DRA_MIRROR_HTTP_PORT='eighty'")
    assert_one_line(run(tmp_path, "--log-level", "CHATTY", "demo"), "log level 'CHATTY'")
    assert_one_line(run(tmp_path, "migrate", "--database-url", "nosuchdb://x"), "'nosuchdb'")


def test_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run(tmp_path, "serve", "--kubeconfig", kubeconfig(tmp_path), "--port", port)
    assert_one_line(result, f"cannot listen on 127.0.0.1:{port}", "in use")


async def test_nothing_reaches_the_cluster_before_the_configuration_is_checked(
    tmp_path: Path,
) -> None:
    sim_config = tmp_path / "sim.kubeconfig"
    async with Simulator([small_world("east")], kubeconfig_path=sim_config) as sim:
        args = ("serve", "--kubeconfig", str(sim_config), "--database-url", "nosuchdb://x")
        result = await asyncio.to_thread(run, tmp_path, *args)
        assert_one_line(result, "'nosuchdb'")
        assert sim.served["east"].requests == 0


async def test_a_dangling_current_context_with_a_good_context_serves(tmp_path: Path) -> None:
    sim_config = tmp_path / "sim.kubeconfig"
    async with Simulator([small_world("east")], kubeconfig_path=sim_config):
        config = yaml.safe_load(sim_config.read_text())
        config["current-context"] = "gone"
        path = kubeconfig(tmp_path, yaml.safe_dump(config))
        port = free_port()
        environ = clean_environment()
        process = await asyncio.create_subprocess_exec(
            DRA_MIRROR, "serve", "--kubeconfig", path, "--context", "east", "--port", str(port),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environ,
        )  # fmt: skip
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                async with asyncio.timeout(PATIENCE):
                    while True:
                        assert process.returncode is None, await process.stderr.read()  # type: ignore[union-attr]
                        try:
                            if (await http.get("/readyz")).status_code == 200:
                                break
                        except httpx.TransportError:
                            pass
                        await asyncio.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(PATIENCE):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


def test_limits_that_cannot_work_and_config_files_that_cannot(tmp_path: Path) -> None:
    """A negative body limit (every request, /healthz too, would be 413), an access file
    whose reviewing context the kubeconfig lacks, a SQLite history file that cannot be
    written: one line and exit 2 each, never a traceback and exit 1."""
    path = kubeconfig(tmp_path)
    env = {"DRA_MIRROR_GRAPHQL_MAX_BODY_BYTES": "-1"}
    assert_one_line(run(tmp_path, "serve", "--kubeconfig", path, env=env), "max_body_bytes")
    access = tmp_path / "access.yaml"
    access.write_text("kubernetes:\n  context: nowhere\n")
    result = run(tmp_path, "serve", "--kubeconfig", path, "--context", "good",
                 env={"DRA_MIRROR_ACCESS_CONFIG": str(access),
                      "DRA_MIRROR_ACCESS_INSECURE_NO_AUTH": "false"})  # fmt: skip
    assert_one_line(result, str(access), "has no context 'nowhere'")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    for url, expected in (
        ("sqlite+aiosqlite:////proc/no-such-dir/history.db", "does not exist"),
        (f"sqlite:///{locked}/history.db", "cannot create files"),
    ):
        if "locked" in url and os.geteuid() == 0:
            continue  # root writes anywhere
        result = run(tmp_path, "serve", "--kubeconfig", path, "--database-url", url)
        assert_one_line(result, expected)
