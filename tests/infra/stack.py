"""Start and stop the suite's pair of servers: ``python -m tests.infra.stack up RUN_DIR``
prints ``export`` lines describing a fresh redis-server and PostgreSQL (with the
``dramirror_test`` database) under RUN_DIR; ``python -m tests.infra.stack down`` stops the
pair those variables describe. ``scripts/test`` calls both (``down`` from its exit trap).
``up --redis-cluster RUN_DIR`` also starts a Redis Cluster (three masters, one replica each;
``tests.infra.redis_cluster``) and exports ``DRA_MIRROR_TEST_REDIS_CLUSTER_URL``; without it
the test fixture starts one under RUN_DIR the first time a test needs it. ``down`` stops a
cluster found under RUN_DIR either way.

Promises: ``up`` either starts both servers or stops what it started and fails; ``down``
stops both even if one is already stopped; PostgreSQL never runs as root (as root it runs
as ``postgres``, or a ``dramirror`` system account created for it).
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.infra.redis_cluster import NODE_TIMEOUT_MS, RedisCluster
from tests.infra.servers import (
    FALLBACK_PG_USER,
    PostgresServer,
    RedisServer,
    ServerError,
    free_port,
)


def find_redis_server() -> Path:
    found = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(found).exists():
        raise ServerError("redis-server not found (scripts/test installs the redis-server package)")
    return Path(found)


def find_postgres_bin() -> Path:
    """PostgreSQL 15's bin directory, else the newest installed one, else pg_ctl on PATH."""
    preferred = Path("/usr/lib/postgresql/15/bin")
    installed = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    on_path = shutil.which("pg_ctl")
    for candidate in [
        preferred / "pg_ctl",
        *reversed(installed),
        *([Path(on_path)] if on_path else []),
    ]:
        if candidate.exists():
            return candidate.parent
    raise ServerError("PostgreSQL binaries not found (scripts/test installs postgresql-15)")


def postgres_account() -> str:
    """The OS account that owns the test cluster: ourselves, or an unprivileged one as root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name
    for name in ("postgres", FALLBACK_PG_USER):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(
        [
            "useradd",
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            FALLBACK_PG_USER,
        ],
        check=True,
        capture_output=True,
    )
    return FALLBACK_PG_USER


def cluster_dir(run_dir: Path) -> Path:
    """Where a run's Redis Cluster lives (started by ``up`` or lazily by the fixture)."""
    return run_dir / "redis-cluster"


def up(
    run_dir: Path, *, redis_cluster: bool = False, cluster_node_timeout_ms: int = NODE_TIMEOUT_MS
) -> dict[str, str]:
    """Start both servers under ``run_dir`` (and a Redis Cluster when asked); return the
    variables that describe them."""
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o755)  # the PostgreSQL account must reach its data directory below
    redis = RedisServer(binary=find_redis_server(), port=free_port(), workdir=run_dir / "redis")
    redis.start()
    try:
        postgres = PostgresServer(
            bin_dir=find_postgres_bin(),
            pgdata=run_dir / "pg" / "data",
            user=postgres_account(),
            port=free_port(),
        )
        postgres.init()
        postgres.start()
        postgres.create_database()
    except BaseException:
        redis.stop()
        raise
    extra: dict[str, str] = {}
    if redis_cluster:
        cluster = RedisCluster(redis.binary, cluster_dir(run_dir),
                               node_timeout_ms=cluster_node_timeout_ms)  # fmt: skip
        try:
            cluster.start()
        except BaseException:
            redis.stop()
            postgres.stop()
            raise
        extra = cluster.exports()
    return extra | {
        "DRA_MIRROR_TEST_REDIS_URL": redis.url,
        "DRA_MIRROR_TEST_REDIS_SERVER": str(redis.binary),
        "DRA_MIRROR_TEST_REDIS_PORT": str(redis.port),
        "DRA_MIRROR_TEST_REDIS_DIR": str(redis.workdir),
        "DRA_MIRROR_TEST_POSTGRES_URL": postgres.url,
        "DRA_MIRROR_TEST_PG_CTL": str(postgres.pg_ctl),
        "DRA_MIRROR_TEST_PGDATA": str(postgres.pgdata),
        "DRA_MIRROR_TEST_PG_USER": postgres.user,
    }


def down(env: os._Environ[str] | dict[str, str] = os.environ) -> None:
    """Stop whatever ``up`` started (as described by ``env``); already stopped is fine."""
    errors: list[str] = []
    try:
        stop_clusters(env)
    except ServerError as error:
        errors.append(str(error))
    try:
        RedisServer.from_env(env).stop()
    except ServerError as error:
        errors.append(str(error))
    try:
        postgres = PostgresServer.from_env(env)
        if (postgres.pgdata / "postmaster.pid").exists():
            postgres.stop()
    except ServerError as error:
        errors.append(str(error))
    if errors:
        raise ServerError("\n".join(errors))


def stop_clusters(env: os._Environ[str] | dict[str, str]) -> None:
    """Stop the Redis Cluster of this run, whether ``up`` or the fixture started it."""
    described = RedisCluster.from_env(env)
    if described is not None:
        described.stop()
    redis_dir = env.get("DRA_MIRROR_TEST_REDIS_DIR")
    if redis_dir:
        lazy = RedisCluster.found_in(cluster_dir(Path(redis_dir).parent))
        if lazy is not None:
            lazy.stop()


def main(argv: list[str]) -> int:
    if argv[:1] == ["up"] and len(argv) in (2, 3):
        flags, (where,) = argv[1:-1], argv[-1:]
        if flags not in ([], ["--redis-cluster"]):
            print(
                "usage: python -m tests.infra.stack up [--redis-cluster] RUN_DIR", file=sys.stderr
            )
            return 2
        for name, value in up(Path(where).resolve(), redis_cluster=bool(flags)).items():
            print(f"export {name}={shlex.quote(value)}")
        return 0
    if argv == ["down"]:
        down()
        return 0
    print("usage: python -m tests.infra.stack up [--redis-cluster] RUN_DIR | down", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
