"""The Redis state store: current state of every cluster, shared by any number of replicas.

`RedisStore.from_url(url, prefix=...)` implements `service.stores.protocols.StateStore` and
answers exactly as the in-memory store does (the same contract tests run against both). The key
layout is in `service.stores.redis_keys` and docs/redis.md. Promises:

* writes: each `apply(changes)` is one `MULTI … EXEC` per cluster (records, reverse maps,
  device entries and statuses, idle marks and the batch's live events together;
  redis_writes.py); when the store holds a fencing token for the cluster (`fence(cluster,
  token)`, given by the lease), the transaction runs only while that token is the cluster's
  current fence (WATCHed), else `Fenced` is raised; without a token it writes unfenced (one
  writer, e.g. tests);
* a failed write keeps everything pending and raises `StoreUnavailable`; the next `apply` (or
  the reactor's retry of the same batch) writes it all;
* reads are batched (one round trip per call), answer in key order, and sort lists as the
  in-memory store does; relations keyed by uuid or device name answer across clusters;
* every Redis error (refused, reset, timeout, loading, read-only replica) becomes
  `StoreUnavailable`, raised from the original error; nothing else leaves this module;
* `subscribe(cluster)` yields the cluster's live events (Redis pub/sub; service.stores.bus).

Beyond the Protocol: `device_status(keys)` (kept by the writer, as MemoryStore derives it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from dra_mirror.service.model.records import KINDS, DeviceEntry, DeviceKey, ObjectKey, Record
from dra_mirror.service.stores import bus
from dra_mirror.service.stores.protocols import ClusterStatus, Relation, StoreError
from dra_mirror.service.stores.redis_calls import redis_call
from dra_mirror.service.stores.redis_keys import (
    DEFAULT_PREFIX,
    HOLDS,
    SET_RELATIONS,
    Keys,
    clusters_key,
    decode_device_key,
    decode_member,
    decode_members,
    device_field,
    driver_prefix,
    encode,
    entry_decoder,
    holds_decoder,
    link_part,
    object_field,
    record_decoder,
    split_object_field,
    status_decoder,
)
from dra_mirror.service.stores.redis_writes import ClusterWriter, Ops, resp

log = logging.getLogger(__name__)
T = TypeVar("T")
_ACROSS_CLUSTERS = frozenset({Relation.UUID_DEVICES, Relation.NAME_DEVICES})


class Fenced(StoreError):
    """This replica no longer holds the cluster's lease: its writes are refused."""


def _as_key(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


class RedisStore:
    """See the module docstring."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self.redis = client
        self.prefix = prefix
        self._keys: dict[str, Keys] = {}
        self._writers: dict[str, ClusterWriter] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._tokens: dict[str, str] = {}

    @classmethod
    def from_url(cls, url: str, *, prefix: str = DEFAULT_PREFIX, **options: Any) -> RedisStore:
        options.setdefault("socket_connect_timeout", 2.0)
        options.setdefault("socket_timeout", 30.0)
        options.setdefault("retry", Retry(ExponentialBackoff(cap=0.5, base=0.05), 2))
        options.setdefault("health_check_interval", 10)
        return cls(aioredis.Redis.from_url(url, **options), prefix=prefix)

    def keys(self, cluster: str) -> Keys:
        found = self._keys.get(cluster)
        if found is None:
            found = self._keys[cluster] = Keys(self.prefix, cluster)
        return found

    async def _call(self, awaitable: Awaitable[T]) -> T:
        return await redis_call(awaitable)

    # --- fencing (service.stores.lease) -------------------------------------------------------

    def fence(self, cluster: str, token: str) -> None:
        """Write `cluster` only while `token` is its fence; forget what an earlier holding wrote
        or left pending (the next batch reloads the cluster from Redis)."""
        self._tokens[cluster] = token
        self._writers.pop(cluster, None)

    def unfence(self, cluster: str) -> None:
        """The lease is gone: drop the cluster's writer and its pending writes."""
        self._tokens.pop(cluster, None)
        self._writers.pop(cluster, None)

    # --- StateWriter --------------------------------------------------------------------------

    async def apply(self, changes: Any) -> None:
        cluster = changes.cluster
        async with self._locks.setdefault(cluster, asyncio.Lock()):
            writer = await self._writer(cluster)
            listed = getattr(changes, "listed_kind", None)
            writer.fold(changes.upserts, changes.deletes, changes.at, listed)
            await self._flush(writer)

    async def set_status(self, status: ClusterStatus) -> None:
        cluster = status.name
        async with self._locks.setdefault(cluster, asyncio.Lock()):
            writer = await self._writer(cluster)
            if status.synced and writer.unseen:
                count = len(writer.unseen)
                if writer.sweep(status.last_sync_at or ""):
                    log.info(
                        "removed %d objects gone since the last writer",
                        count,
                        extra={"cluster": cluster},
                    )
            await self._flush(writer, status=encode(status))

    async def _writer(self, cluster: str) -> ClusterWriter:
        writer = self._writers.get(cluster)
        if writer is None:
            writer = ClusterWriter(self.keys(cluster), self._tokens.get(cluster, ""))
        if not writer.loaded:
            records = await self._load(cluster)
            writer.load(records)
            self._writers[cluster] = writer
        return writer

    async def _load(self, cluster: str) -> list[Record]:
        keys = self.keys(cluster)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.sadd(clusters_key(self.prefix), cluster)
            for kind in KINDS:
                pipe.hvals(keys.objects(kind))
            found = await self._call(pipe.execute())
        return [record_decoder.decode(raw) for values in found[1:] for raw in values]

    async def _flush(self, writer: ClusterWriter, *, status: bytes | None = None) -> None:
        if not writer.pending() and status is None:
            return
        ops = writer.ops()
        if status is not None:
            ops.add(b"SET", writer.keys.status, [status])
        events = bus.events_encoder.encode(writer.events) if writer.events else b""
        await self._call(self._write(writer.token, ops, writer.keys.events, events))
        writer.written()

    async def _write(self, token: str, ops: Ops, channel: str, events: bytes) -> None:
        """One batch on one connection: [WATCH fence, GET fence, compare], then MULTI … EXEC
        packed as one request. EXEC answers nil when the fence changed after the WATCH.

        A pooled connection that Redis closed (it restarted) fails on first use: the batch is
        sent once more on a fresh connection. Sending twice is harmless: every command sets a
        final state, and the fence is checked again."""
        try:
            await self._write_once(token, ops, channel, events)
        except (RedisConnectionError, RedisTimeoutError, OSError):
            await self._write_once(token, ops, channel, events)

    async def _write_once(self, token: str, ops: Ops, channel: str, events: bytes) -> None:
        pool = self.redis.connection_pool
        connection = await pool.get_connection()
        try:
            if token:
                await connection.send_packed_command(
                    resp([b"WATCH", ops.fence_key.encode()])
                    + resp([b"GET", ops.fence_key.encode()])
                )
                await connection.read_response()
                current = await connection.read_response()
                if current != token.encode():
                    await connection.send_packed_command(resp([b"UNWATCH"]))
                    await connection.read_response()
                    raise Fenced(f"the fence of {ops.fence_key} is {current!r}, not ours")
            await connection.send_packed_command(ops.transaction(channel, events))
            for _ in range(ops.replies(events) - 1):
                await connection.read_response()
            result = await connection.read_response()
            if result is None:
                raise Fenced(f"the fence of {ops.fence_key} moved during the write")
        except BaseException as error:
            if not isinstance(error, Fenced):
                await connection.disconnect()
            raise
        finally:
            await pool.release(connection)

    # --- StateReader --------------------------------------------------------------------------

    async def _cluster_names(self) -> list[str]:
        names = await self._call(self.redis.smembers(clusters_key(self.prefix)))
        return sorted(n.decode() for n in names)

    async def clusters(self) -> list[ClusterStatus]:
        names = await self._cluster_names()
        if not names:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.get(self.keys(name).status)
            found = await self._call(pipe.execute())
        return [
            status_decoder.decode(raw) if raw is not None else ClusterStatus(name=name)
            for name, raw in zip(names, found, strict=True)
        ]

    async def get(self, keys: Sequence[ObjectKey]) -> list[Record | None]:
        keys = [ObjectKey(*_as_key(k)) for k in keys]
        if not keys:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(self.keys(key.cluster).objects(key.kind), object_field(key))
            found = await self._call(pipe.execute())
        return [record_decoder.decode(raw) if raw is not None else None for raw in found]

    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> list[Record]:
        names = [cluster] if cluster is not None else await self._cluster_names()
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(self.keys(name).objects(kind))
            found = await self._call(pipe.execute())
        prefix = f"{namespace}/".encode() if namespace is not None else b""
        out: list[Record] = []
        for fields in found:
            chosen = sorted(
                (split_object_field(field), raw)
                for field, raw in fields.items()
                if field.startswith(prefix)
            )
            out.extend(record_decoder.decode(raw) for _, raw in chosen)
        return out

    async def devices(self, keys: Sequence[DeviceKey]) -> list[DeviceEntry | None]:
        keys = [DeviceKey(*_as_key(k)) for k in keys]
        if not keys:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(self.keys(key.cluster).devices, device_field(key))
            found = await self._call(pipe.execute())
        return [entry_decoder.decode(raw) if raw is not None else None for raw in found]

    async def list_devices(
        self, *, cluster: str | None = None, driver: str | None = None
    ) -> list[DeviceEntry]:
        names = [cluster] if cluster is not None else await self._cluster_names()
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(self.keys(name).devices)
            found = await self._call(pipe.execute())
        prefix = driver_prefix(driver) if driver is not None else b""
        out: list[DeviceEntry] = []
        for name, fields in zip(names, found, strict=True):
            chosen = sorted(
                (decode_device_key(name, field), raw)
                for field, raw in fields.items()
                if field.startswith(prefix)
            )
            out.extend(entry_decoder.decode(raw) for _, raw in chosen)
        return out

    async def lookup(self, relation: Relation | str, keys: Sequence[Any]) -> list[list[Any]]:
        relation = Relation(relation)
        name = relation.value
        keys = [_as_key(k) for k in keys]
        across = relation in _ACROSS_CLUSTERS
        names = await self._cluster_names() if across else []
        as_set = name in SET_RELATIONS
        plan: list[list[str]] = []  # per key: the clusters asked, in order
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                asked = names if across else ([key[0]] if isinstance(key, tuple) and key else [])
                plan.append(asked)
                for cluster in asked:
                    cluster_keys = self.keys(cluster)
                    if as_set:
                        pipe.smembers(cluster_keys.link(name, key))
                    else:
                        pipe.hget(cluster_keys.links(name), link_part(key))
            found = await self._call(pipe.execute()) if any(plan) else []
        out: list[list[Any]] = []
        position = 0
        for asked in plan:
            values: list[Any] = []
            for cluster in asked:
                raw = found[position]
                position += 1
                if as_set:
                    values.extend(sorted(decode_member(cluster, name, m) for m in raw))
                elif raw is not None and name == HOLDS:
                    values.extend(holds_decoder.decode(raw))
                elif raw is not None:
                    values.extend(decode_members(cluster, name, raw))
            out.append(values)
        return out

    async def idle_since(self, claims: Sequence[ObjectKey]) -> list[str | None]:
        keys = [ObjectKey(*_as_key(k)) for k in claims]
        if not keys:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(self.keys(key.cluster).idle, object_field(key))
            found = await self._call(pipe.execute())
        return [raw.decode() if raw is not None else None for raw in found]

    async def device_status(self, keys: Sequence[DeviceKey]) -> list[str | None]:
        """free | held | shared | blocked per device (None: not in a valid pool)."""
        keys = [DeviceKey(*_as_key(k)) for k in keys]
        if not keys:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(self.keys(key.cluster).device_status, device_field(key))
            found = await self._call(pipe.execute())
        return [raw.decode() if raw is not None else None for raw in found]

    # --- live ---------------------------------------------------------------------------------

    async def subscribe(self, cluster: str) -> AsyncIterator[bus.LiveEvent]:
        """The cluster's live events from now on (Redis pub/sub; see service.stores.bus)."""
        pubsub = self.redis.pubsub()
        try:
            await self._call(pubsub.subscribe(self.keys(cluster).events))
            while True:
                message = await self._call(
                    pubsub.get_message(ignore_subscribe_messages=True, timeout=30.0)
                )
                if message is None or message.get("type") != "message":
                    continue
                for event in bus.events_decoder.decode(message["data"]):
                    yield event
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def ping(self) -> None:
        await self._call(self.redis.ping())

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.redis.aclose()
