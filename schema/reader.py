"""The only way resolvers reach the state store: scoped, batched, with errors translated once.

`ScopedReader` wraps a `StateReader` (memory or Redis) with the request's access `Scope`:

* every list and lookup drops what the scope does not allow (a record the scope hides reads
  as `None`, exactly like one that does not exist), so access control can later be added by
  giving a request a narrower `Scope` — no resolver changes;
* `StoreUnavailable` from the backend becomes `StateStoreUnavailable`, a GraphQL error whose
  message says "state store unavailable" — clients see a clear error, never an HTTP 500.

It keeps the store's batched shape (`get(keys)`, `lookup(relation, keys)`…) so that the
per-request DataLoaders in `schema.loaders` make one store call per relation and batch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from graphql import GraphQLError

from dra_mirror.service.model.records import DeviceEntry, DeviceKey, ObjectKey, Record
from dra_mirror.service.stores.protocols import (
    ClusterStatus,
    Relation,
    StateReader,
    StoreUnavailable,
)

T = TypeVar("T")


class StateStoreUnavailable(GraphQLError):
    """The state store (Redis) cannot be reached: the answer would be incomplete, so none."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(
            f"state store unavailable: {cause}",
            extensions={"code": "STATE_STORE_UNAVAILABLE"},
        )


class Scope:
    """What a request may see. `everything()` for now; a narrower scope (per team, per
    namespace) overrides `allows` — every read in the graph goes through it."""

    @classmethod
    def everything(cls) -> Scope:
        return cls()

    def allows(self, cluster: str, namespace: str = "") -> bool:
        """May this request see objects of `cluster` in `namespace` ("" = cluster-scoped)?"""
        return True


def _allows_record(scope: Scope, record: Record) -> bool:
    return scope.allows(record.meta.cluster, record.meta.namespace)


def _allows_key(scope: Scope, key: Any) -> bool:
    """Relation results are ObjectKeys, DeviceKeys or AllocationRefs; check each kind."""
    if isinstance(key, ObjectKey):
        return scope.allows(key.cluster, key.namespace)
    if isinstance(key, DeviceKey):
        return scope.allows(key.cluster, "")
    claim = getattr(key, "claim", None)  # AllocationRef: the holding claim's namespace counts
    if isinstance(claim, ObjectKey):
        return scope.allows(claim.cluster, claim.namespace)
    return True


class ScopedReader:
    """A `StateReader` seen through a `Scope`, raising only `StateStoreUnavailable`."""

    def __init__(self, store: StateReader, scope: Scope) -> None:
        self.store = store
        self.scope = scope

    async def _call(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        try:
            return await fn(*args, **kwargs)
        except StoreUnavailable as error:
            raise StateStoreUnavailable(error) from error

    async def clusters(self) -> list[ClusterStatus]:
        statuses = await self._call(self.store.clusters)
        return [s for s in statuses if self.scope.allows(s.name, "")]

    async def get(self, keys: Sequence[ObjectKey]) -> list[Record | None]:
        records = await self._call(self.store.get, keys)
        return [r if r is not None and _allows_record(self.scope, r) else None for r in records]

    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> list[Record]:
        records = await self._call(self.store.list, kind, cluster=cluster, namespace=namespace)
        return [r for r in records if _allows_record(self.scope, r)]

    async def devices(self, keys: Sequence[DeviceKey]) -> list[DeviceEntry | None]:
        entries = await self._call(self.store.devices, keys)
        return [e if e is not None and _allows_key(self.scope, e.key) else None for e in entries]

    async def list_devices(
        self, *, cluster: str | None = None, driver: str | None = None
    ) -> list[DeviceEntry]:
        entries = await self._call(self.store.list_devices, cluster=cluster, driver=driver)
        return [e for e in entries if _allows_key(self.scope, e.key)]

    async def lookup(self, relation: Relation, keys: Sequence[Any]) -> list[list[Any]]:
        found = await self._call(self.store.lookup, relation, keys)
        return [[item for item in items if _allows_key(self.scope, item)] for items in found]

    async def idle_since(self, claims: Sequence[ObjectKey]) -> list[str | None]:
        return await self._call(self.store.idle_since, claims)

    @property
    def has_device_status(self) -> bool:
        """Does the store answer device statuses itself (batched, beyond the Protocol)?"""
        return callable(getattr(self.store, "device_status", None))

    async def device_status(self, keys: Sequence[DeviceKey]) -> list[str | None]:
        """free | held | shared | blocked per device as the store's index derived it (None:
        not in a valid pool). Only when `has_device_status`; callers scope the keys."""
        return await self._call(self.store.device_status, keys)  # type: ignore[attr-defined]
