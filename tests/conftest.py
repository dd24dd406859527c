"""Fixtures shared by every test area: the shared data beside the repository and the real
redis-server and PostgreSQL that ``scripts/test`` starts on loopback.

Promises:

* nothing here skips: a missing ``../shared`` or a missing server variable FAILS the test
  with a message saying what to run (``scripts/test``);
* a test that uses ``redis_url`` / ``redis_server`` (directly or through another fixture)
  is marked ``redis``, one that uses ``postgres_url`` / ``postgres_server`` is marked
  ``postgres``, one that uses ``kubectl_binary`` is marked ``kubectl`` — so
  ``pytest -m "not redis and not postgres"`` runs without servers;
* ``redis_cluster`` is a real Redis Cluster (three masters, one replica each): the one
  ``stack up --redis-cluster`` started, else one started the first time a test asks for it
  (a couple of seconds) and stopped at the end of the session. A test may kill masters
  (``kill_master``); the nodes are restarted and the cluster is ok again before the next
  test. Tests using it are marked ``redis_cluster``.
* ``redis_server`` / ``postgres_server`` control the suite's real servers for outage
  tests: ``stop()`` returns once the port refuses connections, ``start()`` once the
  server accepts them again; both block (wrap them in ``asyncio.to_thread`` inside async
  tests). A server a test left stopped is started again at teardown. Redis has no
  persistence: after a restart it is EMPTY. PostgreSQL keeps its data.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.infra.redis_cluster import RedisCluster
from tests.infra.servers import PostgresServer, RedisServer, ServerError, accepts_connections
from tests.infra.stack import cluster_dir

REPO_ROOT = Path(__file__).resolve().parents[1]

# fixture name -> the marker a test using it gets
_MARKED_FIXTURES = {
    "redis_url": "redis",
    "redis_server": "redis",
    "postgres_url": "postgres",
    "postgres_server": "postgres",
    "kubectl_binary": "kubectl",
    "redis_cluster": "redis_cluster",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker in sorted({_MARKED_FIXTURES[name] for name in used & _MARKED_FIXTURES.keys()}):
            item.add_marker(marker)


def _from_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{name} is not set: this test needs the real server that scripts/test starts; "
            "run `scripts/test [pytest args]` instead of pytest directly",
            pytrace=False,
        )
    return value


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the repository (fixtures, hardware captures, docs)."""
    path = (REPO_ROOT / ".." / "shared").resolve()
    if not path.is_dir():
        pytest.fail(f"{path} is missing: the tests read ../shared beside the repository")
    return path


@pytest.fixture(scope="session")
def upstream_fixtures(shared_dir: Path) -> list[Path]:
    """Every real DRA object file in ``../shared/fixtures/upstream`` (YAML and JSON)."""
    directory = shared_dir / "fixtures" / "upstream"
    files = sorted(p for p in directory.glob("*") if p.suffix in {".yaml", ".yml", ".json"})
    if not files:
        pytest.fail(f"no YAML or JSON fixtures in {directory}")
    return files


@pytest.fixture(scope="session")
def redis_url() -> str:
    """``redis://127.0.0.1:PORT/0`` of the suite's private redis-server (shared by all tests)."""
    return _from_env("DRA_MIRROR_TEST_REDIS_URL")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """``postgresql+asyncpg://USER@127.0.0.1:PORT/dramirror_test`` (SQLAlchemy form)."""
    return _from_env("DRA_MIRROR_TEST_POSTGRES_URL")


@pytest.fixture
def redis_server(redis_url: str) -> Iterator[RedisServer]:
    try:
        server = RedisServer.from_env()
    except ServerError as error:
        pytest.fail(str(error), pytrace=False)
    yield server
    if not accepts_connections(server.port):
        server.start()


@pytest.fixture
def postgres_server(postgres_url: str) -> Iterator[PostgresServer]:
    try:
        server = PostgresServer.from_env()
    except ServerError as error:
        pytest.fail(str(error), pytrace=False)
    yield server
    if not accepts_connections(server.port):
        server.start()


@pytest.fixture(scope="session")
def _redis_cluster_of_session() -> Iterator[RedisCluster]:
    described = RedisCluster.from_env()
    if described is not None:
        yield described
        return
    run_dir = Path(_from_env("DRA_MIRROR_TEST_REDIS_DIR")).parent
    binary = Path(_from_env("DRA_MIRROR_TEST_REDIS_SERVER"))
    cluster = RedisCluster(binary, cluster_dir(run_dir))
    try:
        cluster.start()
    except ServerError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster(_redis_cluster_of_session: RedisCluster) -> Iterator[RedisCluster]:
    """The session's Redis Cluster, whole again after the test (killed nodes restarted)."""
    cluster = _redis_cluster_of_session
    cluster.heal()
    yield cluster
    cluster.heal()


@pytest.fixture(scope="session")
def kubectl_binary() -> Path:
    """The real kubectl binary (scripts/test installs it when missing)."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is not on PATH: run scripts/test, which installs it", pytrace=False)
    return Path(found)
