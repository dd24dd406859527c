"""Connecting to Redis, one server or a Redis Cluster, and the few calls that differ between them.

Every Redis client of the mirror (the state store, its leases, the history outbox) is made by
`connect(url, **options)`:

* `redis://HOST[:PORT][/DB]`, `rediss://…` (TLS), `unix:///PATH` — one redis-server
  (`redis.asyncio.Redis`);
* `redis+cluster://HOST:PORT` (`rediss+cluster://` for TLS) — a Redis Cluster found through
  that seed node (`redis.asyncio.cluster.RedisCluster`: slot map, MOVED/ASK, a refreshed map
  after a failover). Every key of one mirrored cluster shares the `{cluster}` hash tag, so it
  lives in one slot, hence on one master: a batch's transaction and the lease scripts never
  cross slots.

Promises of the helpers, for either client:

* `slot_connection(client, key)` — a connection to the server holding `key` (the master of
  its slot on a cluster), and the function that gives it back; a raw transaction sent on it
  runs where its keys live;
* `refresh(client)` — after a failed call on such a connection (MOVED after a failover, a
  master that died): the next `slot_connection` reads the slot map again; never raises;
* `ping(client)` — PING the server, or every master of the cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from redis import asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import SlotNotCoveredError

Client = aioredis.Redis | RedisCluster

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
SCHEMES = ("redis", "rediss", "unix", *CLUSTER_SCHEMES)


def is_cluster_url(url: str) -> bool:
    return url.partition("://")[0] in CLUSTER_SCHEMES


def connect(url: str, **options: Any) -> Client:
    """A client for one server or a cluster (see the module docstring)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in CLUSTER_SCHEMES:
        options.pop("health_check_interval", None)  # per node, not for the cluster client
        return RedisCluster.from_url(f"{CLUSTER_SCHEMES[scheme]}://{rest}", **options)
    return aioredis.Redis.from_url(url, **options)


async def slot_connection(
    client: Client, key: str
) -> tuple[AbstractConnection, Callable[[AbstractConnection], Any]]:
    """A connection to where `key` lives, and how to give it back (may be awaitable)."""
    if isinstance(client, RedisCluster):
        await client.initialize()  # the slot map: read once, again after `refresh`
        node = client.get_node_from_key(key)
        if node is None:  # no master serves the slot (a failover under way)
            raise SlotNotCoveredError(f"no master serves the slot of {key}")
        connection: AbstractConnection = node.acquire_connection()
        return connection, node.release  # type: ignore[return-value]
    pool = client.connection_pool
    return await pool.get_connection(), pool.release


async def refresh(client: Client) -> None:
    """Read the cluster's slot map again before the next `slot_connection` (no-op on one
    server). The old map's connections are closed: some lead to a node that is gone."""
    if isinstance(client, RedisCluster):
        with contextlib.suppress(Exception):
            await client.aclose()  # the next initialize() reads CLUSTER SLOTS afresh


async def ping(client: Client) -> None:
    if isinstance(client, RedisCluster):
        await client.ping(target_nodes=RedisCluster.PRIMARIES)
    else:
        await client.ping()
