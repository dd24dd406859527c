"""Reading a state store through an access scope: what every question reads with.

`ScopedReader(store, scope)` is a `StateReader` seen through the asker's scope:

* every list and lookup drops what the scope does not allow (a record the scope hides reads
  as `None`, exactly like one that does not exist); a scope that hides nothing gets the
  store's answers as they are (fresh lists of the store's: callers may keep them);
* an outage of the store (`StoreUnavailable`) is raised as `unavailable(error)` says: here a
  `QuestionUnavailable` (a `QuestionError` every front end shows as it is); the graph's reader
  (`schema.reader`) raises its GraphQL error instead;
* paged lists (`page`, `select`) go to the store with each cluster's part narrowed to the
  namespaces the scope shows, so the store counts only what the asker may see;
* it keeps the store's batched shape (`get(keys)`, `lookup(relation, keys)`…), and passes on
  the in-process index of a cluster unscoped (`index(cluster)`): the questions apply the scope
  per namespace (`service.questions.cluster_state`);
* `whole` is the same store unfiltered (errors raised the same way), for the questions that
  derive facts of a whole cluster — device status, capacity, counters, placement — and only
  then withhold the names the scope hides.

`ReadScope` is what a scope answers (`service.access.scope.AccessScope` is the subject's);
`Scope.everything()` sees everything (a mirror without authentication, the command line's
in-process questions, tests).
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, overload

from msgspec.structs import replace

from dra_mirror.service.model.records import (
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    AllocationRef,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    NodeRecord,
    ObjectKey,
    PodGroupRecord,
    PodRecord,
    Record,
    SliceRecord,
    TaintRuleRecord,
    TemplateRecord,
)
from dra_mirror.service.model.view import IndexView
from dra_mirror.service.stores.bus import Delivery
from dra_mirror.service.stores.protocols import (
    ClusterStatus,
    Page,
    Relation,
    Selection,
    StateReader,
    StoreUnavailable,
    UuidHolders,
)

from .asking import QuestionUnavailable

__all__ = ["ReadScope", "Scope", "ScopedReader"]

T = TypeVar("T")
P = ParamSpec("P")


class ReadScope(Protocol):
    """What every read asks of the asker's access scope (`Scope` below sees everything;
    `service.access.scope.AccessScope` is the subject's)."""

    @property
    def is_admin(self) -> bool: ...

    @property
    def history(self) -> bool: ...

    @property
    def grants(self) -> Mapping[str, frozenset[str]]: ...

    def allows(self, cluster: str, namespace: str = "") -> bool: ...

    def may_hide(self) -> bool: ...

    def all_namespaces(self, cluster: str) -> bool: ...

    def describe(self) -> str: ...


class Scope:
    """What an asker may see. `everything()` sees all; a narrower scope overrides `allows`
    — every read goes through it."""

    @classmethod
    def everything(cls) -> Scope:
        return cls()

    def allows(self, cluster: str, namespace: str = "") -> bool:
        """May this asker see objects of `cluster` in `namespace` ("" = cluster-scoped)?"""
        return True

    def may_hide(self) -> bool:
        """Whether `allows` can say no: only a narrower scope (one overriding it) can."""
        return type(self).allows is not Scope.allows

    @property
    def is_admin(self) -> bool:
        """Sees everything: only while `allows` is not narrowed."""
        return not self.may_hide()

    @property
    def history(self) -> bool:
        """History and audits may be asked."""
        return True

    @property
    def grants(self) -> Mapping[str, frozenset[str]]:
        """No namespace grants to list: what it sees is `allows`."""
        return {}

    def all_namespaces(self, cluster: str) -> bool:
        """Sees every namespace of `cluster` (aggregates over it may be shown): whatever
        `allows` says of the cluster itself."""
        return self.allows(cluster)

    def describe(self) -> str:
        return "admin" if self.is_admin else "custom"


NAMESPACED = frozenset({RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE, POD})


def _allows_record(scope: ReadScope, record: Record) -> bool:
    return scope.allows(record.meta.cluster, record.meta.namespace)


def _allows_key(scope: ReadScope, key: object) -> bool:
    """Relation results are ObjectKeys, DeviceKeys or AllocationRefs; check each kind."""
    if isinstance(key, ObjectKey):
        return scope.allows(key.cluster, key.namespace)
    if isinstance(key, DeviceKey):
        return scope.allows(key.cluster, "")
    if isinstance(key, AllocationRef):  # the holding claim's namespace counts
        return scope.allows(key.claim.cluster, key.claim.namespace)
    return True


class ScopedReader:
    """A `StateReader` seen through a scope; a store outage raises `unavailable(error)`."""

    def __init__(self, store: StateReader, scope: ReadScope) -> None:
        self.store = store
        self.scope = scope
        self._whole: ScopedReader | None = None

    @property
    def whole(self) -> ScopedReader:
        """The store behind the scope, unfiltered, its errors raised as this reader raises
        them: what derivations of a cluster's facts read (a device held by a claim the asker
        may not see is held); the names they show are still the scope's to decide."""
        if self._whole is None:
            self._whole = self if not self.scope.may_hide() else type(self)(self.store, Scope())
        return self._whole

    def unavailable(self, error: StoreUnavailable) -> Exception:
        """What a store outage is raised as (the graph's reader raises a GraphQL error)."""
        return QuestionUnavailable(
            f"state store unavailable: {error}", code="STATE_STORE_UNAVAILABLE"
        )

    async def _call(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except StoreUnavailable as error:
            raise self.unavailable(error) from error

    async def clusters(self) -> list[ClusterStatus]:
        statuses = await self._call(self.store.clusters)
        return [s for s in statuses if self.scope.allows(s.name, "")]

    async def get(self, keys: Sequence[ObjectKey]) -> list[Record | None]:
        records = await self._call(self.store.get, keys)
        if not self.scope.may_hide():  # the store's own fresh list, as it is
            return records
        return [r if r is not None and _allows_record(self.scope, r) else None for r in records]

    # The store lists records of the kind asked for: a kind's constant (`RESOURCE_CLAIM`…,
    # Final, so read as a literal) types the answer as that kind's records.
    @overload
    async def list(
        self,
        kind: Literal["DeviceClass"],
        *,
        cluster: str | None = ...,
        namespace: str | None = ...,
    ) -> Sequence[DeviceClassRecord]: ...
    @overload
    async def list(
        self,
        kind: Literal["ResourceSlice"],
        *,
        cluster: str | None = ...,
        namespace: str | None = ...,
    ) -> Sequence[SliceRecord]: ...
    @overload
    async def list(
        self,
        kind: Literal["ResourceClaim"],
        *,
        cluster: str | None = ...,
        namespace: str | None = ...,
    ) -> Sequence[ClaimRecord]: ...
    @overload
    async def list(
        self,
        kind: Literal["ResourceClaimTemplate"],
        *,
        cluster: str | None = ...,
        namespace: str | None = ...,
    ) -> Sequence[TemplateRecord]: ...
    @overload
    async def list(
        self, kind: Literal["Pod"], *, cluster: str | None = ..., namespace: str | None = ...
    ) -> Sequence[PodRecord]: ...
    @overload
    async def list(
        self, kind: Literal["Node"], *, cluster: str | None = ..., namespace: str | None = ...
    ) -> Sequence[NodeRecord]: ...
    @overload
    async def list(
        self,
        kind: Literal["DeviceTaintRule"],
        *,
        cluster: str | None = ...,
        namespace: str | None = ...,
    ) -> Sequence[TaintRuleRecord]: ...
    @overload
    async def list(
        self, kind: Literal["PodGroup"], *, cluster: str | None = ..., namespace: str | None = ...
    ) -> Sequence[PodGroupRecord]: ...
    @overload
    async def list(
        self, kind: str, *, cluster: str | None = ..., namespace: str | None = ...
    ) -> Sequence[Record]: ...
    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> Sequence[Record]:
        """In key order, as the store gives it: untouched when the scope hides nothing (a
        page of it then costs the page), else filtered."""
        records = await self._call(self.store.list, kind, cluster=cluster, namespace=namespace)
        if not self.scope.may_hide():
            return records
        return [r for r in records if _allows_record(self.scope, r)]

    async def devices(self, keys: Sequence[DeviceKey]) -> builtins.list[DeviceEntry | None]:
        entries = await self._call(self.store.devices, keys)
        if not self.scope.may_hide():
            return entries
        return [e if e is not None and _allows_key(self.scope, e.key) else None for e in entries]

    async def list_devices(
        self,
        *,
        cluster: str | None = None,
        driver: str | None = None,
        published: bool | None = True,
    ) -> Sequence[DeviceEntry]:
        entries = await self._call(
            self.store.list_devices, cluster=cluster, driver=driver, published=published
        )
        if not self.scope.may_hide():
            return entries
        return [e for e in entries if _allows_key(self.scope, e.key)]

    async def lookup(
        self, relation: Relation, keys: Sequence[Hashable]
    ) -> builtins.list[builtins.list[Any]]:
        found = await self._call(self.store.lookup, relation, keys)
        if not self.scope.may_hide():
            return found
        return [[item for item in items if _allows_key(self.scope, item)] for items in found]

    async def holders_by_uuid(self, uuid: str) -> UuidHolders:
        """As `lookup` and `get` would each show them: devices of the clusters the scope shows,
        the holds it shows, the claims it shows (None otherwise)."""
        found = await self._call(self.store.holders_by_uuid, uuid)
        scope = self.scope
        if not scope.may_hide():
            return found
        devices = [k for k in found.devices if _allows_key(scope, k)]
        return UuidHolders(
            devices=devices,
            holds={k: [r for r in found.holds[k] if _allows_key(scope, r)] for k in devices},
            claims={
                k: r if r is not None and _allows_record(scope, r) else None
                for k, r in found.claims.items()
            },
        )

    async def every_holder(self, keys: Sequence[DeviceKey]) -> builtins.list[builtins.list[Any]]:
        """Every claim's hold on each device, those outside the scope included: only counts
        and capacities may be answered from them (held is held, whoever holds it)."""
        return await self._call(self.store.lookup, Relation.DEVICE_ALLOCATIONS, keys)

    async def idle_since(self, claims: Sequence[ObjectKey]) -> builtins.list[str | None]:
        return await self._call(self.store.idle_since, claims)

    async def device_status(self, keys: Sequence[DeviceKey]) -> builtins.list[str | None]:
        """free | held | shared | blocked per device as the model derived it (None: not in a
        valid pool). Callers scope the keys."""
        return await self._call(self.store.device_status, keys)

    async def namespaces(self, kind: str, cluster: str) -> builtins.list[str]:
        """The namespaces holding objects of `kind` in `cluster` that the scope shows."""
        found = await self._call(self.store.namespaces, kind, cluster)
        return [n for n in found if self.scope.allows(cluster, n)]

    async def page(
        self,
        template: Selection,
        *,
        cluster: str | None,
        namespace: str | None = None,
        after: tuple[str, ...] | None = None,
        first: int,
    ) -> Page:
        """One page of a filtered list over one cluster (or every one the scope shows), with
        its counts: `template` is the selection's filters (its cluster is ignored)."""
        if cluster is not None:
            names = [cluster]
        else:
            names = [s.name for s in sorted(await self.clusters(), key=lambda s: s.name)]
        asked = None if namespace is None else (namespace,)
        selections = [replace(template, cluster=n, namespaces=asked) for n in names]
        return await self.select(selections, after=after, first=first)

    async def select(
        self, selections: Sequence[Selection], *, after: tuple[str, ...] | None, first: int
    ) -> Page:
        """The store's page of the selections as the scope shows them: a cluster it does not
        show is left out, each namespaced part narrowed to the namespaces it shows there (the
        store counts only what the scope shows)."""
        narrowed: list[Selection] = []
        for selection in selections:
            name = selection.cluster
            if not self.scope.allows(name, ""):
                continue
            namespaces = selection.namespaces
            if selection.kind in NAMESPACED and self.scope.may_hide():
                present = await self._call(self.store.namespaces, selection.kind, name)
                shown = [n for n in present if self.scope.allows(name, n)]
                if len(shown) < len(present):
                    namespaces = tuple(
                        n
                        for n in shown
                        if selection.namespaces is None or n in selection.namespaces
                    )
            narrowed.append(replace(selection, namespaces=namespaces))
        return await self._call(self.store.select, narrowed, after=after, first=first)

    async def subscribe(self, cluster: str, *, after: str | None = None) -> AsyncIterator[Delivery]:
        """The cluster's live events with their ids (callers filter them by the scope), with a
        store that cannot be reached raised as `unavailable(error)`."""
        try:
            async for delivery in self.store.subscribe(cluster, after=after):
                yield delivery
        except StoreUnavailable as error:
            raise self.unavailable(error) from error

    def index(self, cluster: str) -> IndexView | None:
        """The store's in-process index of `cluster`, unscoped: the questions apply `scope`."""
        return self.store.index(cluster)
