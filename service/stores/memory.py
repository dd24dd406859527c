"""The in-memory state store (embedded default): one `ClusterIndex` per cluster.

It implements `service.stores.protocols.StateStore` and promises:

* it is fed ONLY by `apply(changes)`: each batch's deletes and upserts are folded into the
  cluster's own index (the same pure code the reactor runs), so its reverse maps, device
  statuses and `idle_since` are derived here exactly as the model derives them — nothing is
  stored by hand;
* `apply` runs without awaiting, so a reader never sees a half-applied batch;
* every read is batched (one call per DataLoader batch) and answers in the order of its keys;
  lists come sorted by key, so Relay cursors over them are stable;
* keys may arrive as plain tuples or lists (e.g. decoded from a GraphQL cursor);
* relations keyed by uuid or device name answer across clusters, the others within the
  cluster named by the key's first element.

Beyond the Protocol it offers `device_status(keys)` and `counters_free(...)` (derived device
status needs the pool's counters), and `index(cluster)` for the CLI and tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec.structs import replace

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.index import DELETED, MODIFIED, ClusterIndex, Event
from dra_mirror.service.model.records import DeviceEntry, DeviceKey, ObjectKey, Record
from dra_mirror.service.stores.protocols import ClusterStatus, Relation

# Relations whose key is not tied to one cluster.
_ACROSS_CLUSTERS = frozenset({Relation.UUID_DEVICES, Relation.NAME_DEVICES})


def _as_key(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


class MemoryStore:
    """Current state of every cluster, in this process."""

    def __init__(self) -> None:
        self._indexes: dict[str, ClusterIndex] = {}
        self._statuses: dict[str, ClusterStatus] = {}

    def index(self, cluster: str) -> ClusterIndex | None:
        return self._indexes.get(cluster)

    def _sorted_indexes(self, cluster: str | None = None) -> list[ClusterIndex]:
        if cluster is not None:
            index = self._indexes.get(cluster)
            return [index] if index is not None else []
        return [self._indexes[name] for name in sorted(self._indexes)]

    # --- StateWriter ----------------------------------------------------------------------------

    async def apply(self, changes: Changes) -> None:
        index = self._indexes.get(changes.cluster)
        if index is None:
            index = self._indexes[changes.cluster] = ClusterIndex(
                changes.cluster, transitions=False
            )
        events = [Event(DELETED, record) for record in changes.deletes]
        events.extend(Event(MODIFIED, record) for record in changes.upserts)
        index.apply(
            events,
            at=changes.at,
            resource_version=changes.resource_version,
            listed=changes.listed_kind,
        )

    async def set_status(self, status: ClusterStatus) -> None:
        self._statuses[status.name] = replace(status, malformed=dict(status.malformed))

    # --- StateReader ----------------------------------------------------------------------------

    async def clusters(self) -> list[ClusterStatus]:
        names = sorted(self._statuses.keys() | self._indexes.keys())
        return [self._statuses.get(name) or ClusterStatus(name=name) for name in names]

    async def get(self, keys: Sequence[ObjectKey]) -> list[Record | None]:
        out: list[Record | None] = []
        for key in keys:
            key = _as_key(key)
            index = self._indexes.get(key[0])
            out.append(index.get(key) if index is not None else None)
        return out

    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> list[Record]:
        out: list[Record] = []
        for index in self._sorted_indexes(cluster):
            records = index.records(kind)
            if namespace is not None:
                records = [r for r in records if r.meta.namespace == namespace]
            out.extend(sorted(records, key=lambda r: (r.meta.namespace, r.meta.name)))
        return out

    async def devices(self, keys: Sequence[DeviceKey]) -> list[DeviceEntry | None]:
        out: list[DeviceEntry | None] = []
        for key in keys:
            key = _as_key(key)
            index = self._indexes.get(key[0])
            out.append(index.device(key) if index is not None else None)
        return out

    async def list_devices(
        self, *, cluster: str | None = None, driver: str | None = None
    ) -> list[DeviceEntry]:
        out: list[DeviceEntry] = []
        for index in self._sorted_indexes(cluster):
            entries = index.devices()
            if driver is not None:
                entries = [e for e in entries if e.key.driver == driver]
            out.extend(sorted(entries, key=lambda e: e.key))
        return out

    async def lookup(self, relation: Relation | str, keys: Sequence[Any]) -> list[list[Any]]:
        relation = Relation(relation)
        out: list[list[Any]] = []
        for key in keys:
            key = _as_key(key)
            if relation in _ACROSS_CLUSTERS:
                found: list[Any] = []
                for index in self._sorted_indexes():
                    found.extend(index.lookup(relation.value, key))
                out.append(found)
                continue
            index = self._indexes.get(key[0]) if isinstance(key, tuple) and key else None
            out.append(index.lookup(relation.value, key) if index is not None else [])
        return out

    async def idle_since(self, claims: Sequence[ObjectKey]) -> list[str | None]:
        out: list[str | None] = []
        for key in claims:
            key = _as_key(key)
            index = self._indexes.get(key[0])
            out.append(index.idle_since(key) if index is not None else None)
        return out

    # --- beyond the Protocol --------------------------------------------------------------------

    async def device_status(self, keys: Sequence[DeviceKey]) -> list[str | None]:
        """free | held | shared | blocked per device (None: not in a valid pool)."""
        out: list[str | None] = []
        for key in keys:
            key = DeviceKey(*_as_key(key))
            index = self._indexes.get(key.cluster)
            out.append(index.device_status(key) if index is not None else None)
        return out

    async def counters_free(
        self, cluster: str, driver: str, pool: str
    ) -> dict[str, dict[str, Any]]:
        """What is left of a pool's shared counters (Fractions), after its allocated devices."""
        index = self._indexes.get(cluster)
        return index.counters_free(driver, pool) if index is not None else {}

    async def close(self) -> None:
        self._indexes.clear()
        self._statuses.clear()
