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
* `publish_command(client)` — `PUBLISH` on one server, `SPUBLISH` (sharded pub/sub, Redis
  7) on a cluster: the message stays on the channel's shard, whose channel `P:{cluster}:events`
  hashes to the cluster's slot, so it can sit inside the cluster's transaction;
* `Subscription(client, channel)` — subscribe, and read messages (None after `wait` seconds
  without one), SUBSCRIBE or SSUBSCRIBE to match;
* `ping(client)` — PING the server, or every master of the cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from redis import asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterPubSub, RedisCluster
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


def publish_command(client: Client) -> bytes:
    return b"SPUBLISH" if isinstance(client, RedisCluster) else b"PUBLISH"


class Subscription:
    """One channel's messages: `await start()`, then `await message(wait)` (the payload, or
    None); `await close()`."""

    def __init__(self, client: Client, channel: str) -> None:
        self.client = client
        self.channel = channel
        self.pubsub: PubSub | ClusterPubSub = client.pubsub()
        self.sharded = isinstance(self.pubsub, ClusterPubSub)

    async def start(self) -> None:
        if isinstance(self.pubsub, ClusterPubSub) and isinstance(self.client, RedisCluster):
            await self.client.initialize()  # the slot map tells which node holds the channel
            await self.pubsub.ssubscribe(self.channel)
        else:
            await self.pubsub.subscribe(self.channel)

    async def message(self, wait: float) -> bytes | None:
        if isinstance(self.pubsub, ClusterPubSub):
            found = await self.pubsub.get_sharded_message(
                ignore_subscribe_messages=True, timeout=wait
            )
            wanted = "smessage"
        else:
            found = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=wait)
            wanted = "message"
        if found is None or found.get("type") not in (wanted, wanted.encode()):
            return None
        data: bytes = found["data"]
        return data

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.pubsub.aclose()


async def ping(client: Client) -> None:
    if isinstance(client, RedisCluster):
        await client.ping(target_nodes=RedisCluster.PRIMARIES)
    else:
        await client.ping()
