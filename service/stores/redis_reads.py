"""The reading half of the Redis state store: `StateReader` answered from a writer's keys.

`RedisReader` reads what `service.stores.redis.RedisStore` writes (the key layout is
`service.stores.redis_keys`, docs/redis.md) and promises what the store's docstring says of
reads: one round trip per call (pipelines, split by node on a Redis Cluster), answers in key
order, lists sorted as the in-memory store sorts them, relations keyed by uuid or device name
answered across clusters (the clusters named as of at most `NAMES_TTL` seconds ago); lists,
filters and counts from the writer's indexes (`select`: redis_select.py); every Redis error
becomes `StoreUnavailable` (`redis_call`).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Hashable, Sequence
from typing import Any, TypeVar

from dra_mirror.service.diagnostics.cel import rule_selector_matches
from dra_mirror.service.model.records import DeviceEntry, DeviceKey, ObjectKey, Record
from dra_mirror.service.model.relations import ACROSS_CLUSTERS, Relation
from dra_mirror.service.model.taint_rules import SelectorMatcher
from dra_mirror.service.stores import redis_holders, redis_select
from dra_mirror.service.stores.protocols import (
    ClusterStatus,
    Page,
    Selection,
    UuidHolders,
    composed_holders,
)
from dra_mirror.service.stores.redis_calls import redis_call
from dra_mirror.service.stores.redis_connect import Client
from dra_mirror.service.stores.redis_keys import (
    HOLDS,
    SET_RELATIONS,
    Keys,
    clusters_key,
    decode_device_key,
    decode_member,
    decode_members,
    device_field,
    driver_prefix,
    entry_decoder,
    holds_decoder,
    link_part,
    object_field,
    record_decoder,
    split_object_field,
    status_decoder,
)
from dra_mirror.service.stores.redis_plans import SELECT

T = TypeVar("T")
NAMES_TTL = 1.0  # seconds a lookup across clusters reuses the cluster names it read


def _as_key(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


class RedisReader:
    """Answers `StateReader` from the keys under `prefix` of `client`; `matcher` evaluates the
    CEL of DeviceClasses where no index answers (devices published by no slice, a cluster
    without the writer's indexes)."""

    select_script = SELECT

    def __init__(
        self, client: Client, *, prefix: str, matcher: SelectorMatcher = rule_selector_matches
    ) -> None:
        self.redis = client
        self.prefix = prefix
        self.matcher = matcher
        self._keys: dict[str, Keys] = {}
        self._names: tuple[float, list[str]] | None = None  # (read at, names): `_recent_names`

    def keys(self, cluster: str) -> Keys:
        found = self._keys.get(cluster)
        if found is None:
            found = self._keys[cluster] = Keys(self.prefix, cluster)
        return found

    async def _call(self, awaitable: Awaitable[T]) -> T:
        return await redis_call(awaitable)

    # --- StateReader --------------------------------------------------------------------------

    async def _cluster_names(self) -> list[str]:
        names = await self._call(self.redis.smembers(clusters_key(self.prefix)))
        return sorted(n.decode() if isinstance(n, bytes) else n for n in names)

    async def _recent_names(self) -> list[str]:
        """The cluster names as read at most `NAMES_TTL` seconds ago: what a lookup across
        clusters (a uuid, a device name) asks first. A cluster added since is found at most
        that much later; lists and `clusters()` read the names every time."""
        now = asyncio.get_running_loop().time()
        if self._names is None or now - self._names[0] > NAMES_TTL:
            self._names = (now, await self._cluster_names())
        return self._names[1]

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

    async def devices(self, keys: Sequence[DeviceKey]) -> builtins.list[DeviceEntry | None]:
        """Published entries first, else the entry of a device held and published by no
        slice: two HGETs per key, one round trip."""
        keys = [DeviceKey(*_as_key(k)) for k in keys]
        if not keys:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                field = device_field(key)
                cluster_keys = self.keys(key.cluster)
                pipe.hget(cluster_keys.devices, field)
                pipe.hget(cluster_keys.unpublished, field)
            found = await self._call(pipe.execute())
        pairs = zip(found[::2], found[1::2], strict=True)
        return [
            entry_decoder.decode(raw) if raw is not None else None
            for raw in (published if published is not None else held for published, held in pairs)
        ]

    async def list_devices(
        self,
        *,
        cluster: str | None = None,
        driver: str | None = None,
        published: bool | None = True,
    ) -> builtins.list[DeviceEntry]:
        names = [cluster] if cluster is not None else await self._cluster_names()
        wanted = (True, False) if published is None else (published,)
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                keys = self.keys(name)
                for which in wanted:
                    pipe.hgetall(keys.devices if which else keys.unpublished)
            found = await self._call(pipe.execute())
        prefix = driver_prefix(driver) if driver is not None else b""
        chosen: list[tuple[DeviceKey, bytes]] = []
        for position, fields in enumerate(found):
            name = names[position // len(wanted)]
            chosen.extend(
                (decode_device_key(name, field), raw)
                for field, raw in fields.items()
                if field.startswith(prefix)
            )
        chosen.sort(key=lambda pair: pair[0])
        return [entry_decoder.decode(raw) for _, raw in chosen]

    async def lookup(
        self, relation: Relation | str, keys: Sequence[Hashable]
    ) -> builtins.list[builtins.list[Any]]:
        relation = Relation(relation)
        name = relation.value
        keys = [_as_key(k) for k in keys]
        across = relation in ACROSS_CLUSTERS
        names = await self._recent_names() if across else []
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

    async def holders_by_uuid(self, uuid: str) -> UuidHolders:
        """One script per cluster (redis_holders.py), the clusters' calls in one pipeline."""
        names = await self._recent_names()
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                redis_holders.holders_call(pipe, self.keys(name), uuid)
            found = await self._call(pipe.execute()) if names else []
        out = UuidHolders()
        for name, reply in zip(names, found, strict=True):
            if not redis_holders.holders_answer(name, reply, out):
                return await composed_holders(self, uuid)
        return out

    async def idle_since(self, claims: Sequence[ObjectKey]) -> builtins.list[str | None]:
        keys = [ObjectKey(*_as_key(k)) for k in claims]
        if not keys:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(self.keys(key.cluster).idle, object_field(key))
            found = await self._call(pipe.execute())
        return [raw.decode() if raw is not None else None for raw in found]

    async def select(
        self, selections: Sequence[Selection], *, after: tuple[str, ...] | None, first: int
    ) -> Page:
        """From the writer's indexes: two round trips, the page and the counts
        (service.stores.redis_select)."""
        return await redis_select.select(self, selections, after=after, first=first)

    async def namespaces(self, kind: str, cluster: str) -> builtins.list[str]:
        """From the kind's index, one lexical jump per namespace (a cluster without the
        writer's indexes: from the names of every record)."""
        return await redis_select.namespaces(self, kind, cluster)

    async def device_status(self, keys: Sequence[DeviceKey]) -> builtins.list[str | None]:
        """free | held | shared | blocked per device (None: not in a valid pool)."""
        keys = [DeviceKey(*_as_key(k)) for k in keys]
        if not keys:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(self.keys(key.cluster).device_status, device_field(key))
            found = await self._call(pipe.execute())
        return [raw.decode() if raw is not None else None for raw in found]
