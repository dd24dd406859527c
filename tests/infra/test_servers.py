"""The test-server harness: the suite's servers answer, and a private pair started with the
same code that scripts/test uses can be stopped and started again (what outage tests rely
on). Outages are exercised on private servers so that no other test loses its data."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.infra import stack
from tests.infra.servers import PostgresServer, RedisServer, ServerError


def _asyncpg_dsn(sqlalchemy_url: str) -> str:
    return sqlalchemy_url.replace("postgresql+asyncpg://", "postgresql://", 1)


@pytest.fixture(scope="module")
def private_servers() -> Iterator[dict[str, str]]:
    # Not tmp_path: pytest's base temp dir is mode 0700, which the PostgreSQL account
    # (we may be root, running PostgreSQL as another user) could not traverse.
    run_dir = Path(tempfile.mkdtemp(prefix="dra-mirror-infra-"))
    try:
        env = stack.up(run_dir)
        yield env
        stack.down(env)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


async def test_suite_redis_answers(redis_url: str, redis_server: RedisServer) -> None:
    assert redis_server.url == redis_url
    client = aioredis.from_url(redis_url)
    try:
        assert await client.ping() is True
    finally:
        await client.aclose()


async def test_suite_postgres_answers(postgres_url: str, postgres_server: PostgresServer) -> None:
    assert postgres_server.url == postgres_url
    connection = await asyncpg.connect(_asyncpg_dsn(postgres_url))
    try:
        assert await connection.fetchval("select current_database()") == "dramirror_test"
        # loopback only: the server reports the address it accepted us on
        assert await connection.fetchval("select host(inet_server_addr())") == "127.0.0.1"
    finally:
        await connection.close()


@pytest.mark.redis
async def test_redis_stops_and_starts_empty(private_servers: dict[str, str]) -> None:
    server = RedisServer.from_env(private_servers)
    client = aioredis.from_url(server.url)
    try:
        await client.set("dra-mirror:probe", "1")
        await asyncio.to_thread(server.stop)
        with pytest.raises(RedisConnectionError):
            await client.ping()
        await asyncio.to_thread(server.start)
        # the client reconnects by itself; nothing survived (no persistence)
        assert await client.ping() is True
        assert await client.get("dra-mirror:probe") is None
    finally:
        await client.aclose()


@pytest.mark.postgres
async def test_postgres_stops_and_starts_with_data(private_servers: dict[str, str]) -> None:
    server = PostgresServer.from_env(private_servers)
    dsn = _asyncpg_dsn(server.url)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("create table probe (n int); insert into probe values (7)")
    finally:
        await connection.close()

    await asyncio.to_thread(server.stop)
    with pytest.raises(OSError):
        await asyncpg.connect(dsn)
    await asyncio.to_thread(server.start)

    connection = await asyncpg.connect(dsn)
    try:
        assert await connection.fetchval("select n from probe") == 7
    finally:
        await connection.close()


def test_missing_variables_say_to_run_scripts_test() -> None:
    with pytest.raises(ServerError, match="scripts/test"):
        RedisServer.from_env({})
    with pytest.raises(ServerError, match="DRA_MIRROR_TEST_POSTGRES_URL"):
        PostgresServer.from_env({"DRA_MIRROR_TEST_PG_CTL": "/x/pg_ctl"})
