"""The local stack and the image, read as data (Docker cannot run here): docker-compose has
the five services wired in order with health checks and loopback-only ports, Redis with its
append-only file on a volume; the Dockerfile
is multi-stage, non-root, with the console script as entrypoint, and copies only files that
exist and that .dockerignore lets through."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    # Join continuation lines so each instruction is one string.
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_compose_services(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"redis", "postgres", "migrate", "sim", "serve"}


def test_compose_commands(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["migrate"]["command"] == ["migrate"]
    sim = services["sim"]["command"]
    assert sim[0] == "sim"
    assert {"--scenario=demo", "--host=0.0.0.0", "--kubeconfig-out=/shared/sim.kubeconfig"} <= set(
        sim
    )
    assert services["serve"]["command"] == ["serve"]
    serve = services["serve"]["environment"]
    assert serve["DRA_MIRROR_CLUSTERS_KUBECONFIG"] == "/shared/sim.kubeconfig"
    assert serve["DRA_MIRROR_STORE_REDIS_URL"].startswith("redis://redis:6379")
    assert serve["DRA_MIRROR_HISTORY_DATABASE_URL"].startswith("postgresql+asyncpg://")
    assert (
        services["migrate"]["environment"]["DRA_MIRROR_HISTORY_DATABASE_URL"]
        == (serve["DRA_MIRROR_HISTORY_DATABASE_URL"])
    )


def test_compose_redis_keeps_an_append_only_file_on_a_volume(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[0] == "redis-server"
    options = dict(zip(command[1::2], command[2::2], strict=True))
    assert options["--appendonly"] == "yes" and options["--appendfsync"] == "everysec"
    assert options["--maxmemory-policy"] == "noeviction"
    assert "redis:/data" in redis["volumes"] and "redis" in compose["volumes"]


def test_compose_order_and_health(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        if name != "migrate":  # a one-shot: its exit status is its health
            assert "healthcheck" in service, f"{name} has no healthcheck"
    serve_needs = services["serve"]["depends_on"]
    assert serve_needs["migrate"]["condition"] == "service_completed_successfully"
    assert serve_needs["redis"]["condition"] == "service_healthy"
    assert serve_needs["sim"]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_compose_shares_the_kubeconfig_and_publishes_on_loopback_only(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert "kubeconfig" in compose["volumes"]
    assert "kubeconfig:/shared" in services["sim"]["volumes"]
    assert "kubeconfig:/shared:ro" in services["serve"]["volumes"]
    published = [port for service in services.values() for port in service.get("ports", [])]
    assert published, "the GraphQL port is published"
    assert all(str(port).startswith("127.0.0.1:") for port in published)


def test_dockerfile_is_multi_stage_non_root_with_the_console_script(dockerfile: list[str]) -> None:
    stages = [line for line in dockerfile if line.startswith("FROM ")]
    assert len(stages) >= 2
    final = dockerfile[dockerfile.index(stages[-1]) :]
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users, "the final stage sets USER"
    assert users[-1].split(":")[0] not in {"0", "root"}
    assert 'ENTRYPOINT ["dra-mirror"]' in final
    assert any(line.startswith("COPY --from=") for line in final)


def _docker_ignored(relative: str, patterns: list[str]) -> bool:
    # .dockerignore semantics: the last matching pattern wins; "!" re-includes.
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        glob = pattern[1:] if negate else pattern
        glob = glob.rstrip("/")
        if fnmatch.fnmatch(relative, glob) or relative.startswith(glob + "/"):
            ignored = not negate
    return ignored


def test_dockerfile_copies_existing_files_that_dockerignore_keeps(dockerfile: list[str]) -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copies = [line for line in dockerfile if line.startswith("COPY ") and "--from=" not in line]
    sources = [source for line in copies for source in re.split(r"\s+", line)[1:-1]]
    assert {"pyproject.toml", "service", "schema"} <= set(sources)
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: not in the repository"
        assert not _docker_ignored(source, patterns), f"COPY {source}: excluded by .dockerignore"
    assert _docker_ignored(".venv", patterns)
    assert _docker_ignored(".git", patterns)


def test_compose_redis_cluster_variant() -> None:
    """docker-compose.redis-cluster.yml: six cluster-mode nodes with their append-only files
    on volumes, joined once as three masters with one replica each, and serve given a
    redis+cluster:// URL naming one of them, after the cluster is formed."""
    variant = yaml.safe_load((REPO / "docker-compose.redis-cluster.yml").read_text())
    services = variant["services"]
    nodes = sorted(name for name in services if name.startswith("redis-node-"))
    assert len(nodes) == 6
    for name in nodes:
        node = services[name]
        line = node["entrypoint"] + node["command"]
        options = dict(zip(line[1::2], line[2::2], strict=True))
        assert line[0] == "redis-server" and options["--cluster-enabled"] == "yes"
        assert options["--appendonly"] == "yes" and options["--appendfsync"] == "everysec"
        assert options["--cluster-announce-hostname"] == name
        assert node["volumes"] == [f"{name}:/data"] and name in variant["volumes"]
    init = services["redis-cluster-init"]
    script = init["command"][-1]
    assert "redis-cli --cluster create" in script
    assert "--cluster-replicas 1" in script
    assert set(init["depends_on"]) == set(nodes)
    serve = services["serve"]
    assert serve["environment"]["DRA_MIRROR_STORE_REDIS_URL"] == "redis+cluster://redis-node-1:6379"
    assert serve["depends_on"]["redis-cluster-init"]["condition"] == (
        "service_completed_successfully"
    )
