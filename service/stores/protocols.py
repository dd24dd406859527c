"""The seams between the reactor, the stores and the schema.

A state store holds the current state of every cluster: records, the indexes that walk the
graph both ways, device statuses, idle marks — all as the model derived them (the store
derives nothing). Declared here, and implemented in full by every store and every wrapper:

* `ChangeSink` — what the reactor hands each batch to (state store, history outbox): `apply`
  one `Changes`, plus the watch hooks `cluster_started` / `record_gap` (a sink that keeps no
  history implements them as no-ops);
* `StatusSink` — where the reactor pushes each cluster's `ClusterStatus`;
* `StateReader` — the batched reads of the GraphQL schema, the CLI and Slack (one store call
  per DataLoader batch), the paged, filtered and counted lists (`select`: a page costs the
  page, in every store), the live events (`subscribe`) and, for a store whose indexes live in
  this process, the index itself to read in place (`index`, else None);
* `StateSink` — a sink and a status sink: a state store as a reactor writes it;
* `StateWriter` — a `StateSink` that also says which index a writer folds a cluster into (`open_index`: the in-memory store's own, which it then serves; a fresh one for
  a store outside the process, which persists the Changes alone);
* `StateStore` — both, and `close`; `ClosableReader` — what an API replica is handed.

Two capabilities are the Redis store's alone and are used only through its own type, by the
composition root that built it (service.runtime): leases with fencing tokens, and the records
it holds for a cluster (`RedisStore.held`) that a new watcher's index is seeded with.

Errors: every store raises `StoreUnavailable` (and only that) when its backend cannot be
reached; callers turn it into a clear API error or a retry.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any, Protocol, runtime_checkable

from msgspec import Struct, field

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.model.records import (
    AllocationRef,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    Record,
)
from dra_mirror.service.model.relations import Relation
from dra_mirror.service.model.view import IndexView
from dra_mirror.service.stores.bus import Delivery


class StoreError(Exception):
    """Base of the store errors."""


class StoreUnavailable(StoreError):
    """The backend (Redis, SQL) cannot be reached now; nothing was lost, try again later."""


class ClusterStatus(Struct):
    name: str
    connected: bool = False
    synced: bool = False
    api_version: str | None = None  # resource.k8s.io version in use (v1, v1beta2, v1beta1)
    last_event_at: str | None = None
    last_sync_at: str | None = None
    error: str | None = None
    events: int = 0
    relists: int = 0
    malformed: dict[str, int] = field(default_factory=dict)  # kind -> objects skipped
    stalls: dict[str, int] = field(default_factory=dict)  # kind -> watch streams ended silent
    resets: int = 0  # resourceVersion resets seen (each relisted every kind)
    dra_served: bool | None = None  # None: not known yet; False: no version the mirror reads
    dra_versions: list[str] = field(default_factory=list)  # resource.k8s.io versions discovered
    # Each optional kind (`service.model.kinds.OPTIONAL`: served at versions of its own, e.g.
    # DeviceTaintRule's v1alpha3, v1beta2 from 1.36, v1 from 1.37) -> the version it is watched
    # at, None when the cluster serves none of them; a kind not named: not known yet.
    optional: dict[str, str | None] = field(default_factory=dict)


DEVICES = "Device"
"""`Selection.kind` of a list of devices (the other kinds are records' kinds)."""


class Selection(Struct, frozen=True):
    """One cluster's part of a filtered list (`StateReader.select`). Every filter given must
    hold; a filter that does not apply to the kind is None.

    * claims (`RESOURCE_CLAIM`): `namespaces`, `state` (pending | allocated | reserved |
      deleting), `idle` (allocated, no consumer pod Running: the model's idle mark);
    * pods (`POD`): `namespaces`, `node` (the pods bound to it), `uses_devices`
      (service.model.pods.uses_devices);
    * devices (`DEVICES`): `published` (True: of valid pool generations; False: held and
      published by no slice; None: both), `driver`, `node`, `status` (free | held | shared |
      blocked, as the model derives it), `class_name` (the DeviceClass offers it:
      service.model.class_members.class_accepts);
    * any other kind: `namespaces` alone.

    `namespaces`: None for every namespace, else only those (a request's access scope, a
    namespace filter); ignored for cluster-scoped kinds."""

    kind: str
    cluster: str
    namespaces: tuple[str, ...] | None = None
    node: str | None = None
    state: str | None = None
    idle: bool | None = None
    uses_devices: bool | None = None
    driver: str | None = None
    status: str | None = None
    class_name: str | None = None
    published: bool | None = True


class Page(Struct):
    """One page of a selection, in key order (records by (cluster, namespace, name), devices
    by their key), with what the whole selection counts: `total` items, and whether any lie
    before the cursor (`has_previous`) or after the page (`has_next`)."""

    items: list[Any]
    total: int
    has_previous: bool = False
    has_next: bool = False


class ChangeSink(Protocol):
    """Anything the reactor hands each batch to, in order (state store, history outbox)."""

    async def apply(self, changes: Changes) -> None:
        """Carry one batch out (atomically, for a state store)."""
        ...

    async def cluster_started(self, cluster: str, at: str) -> None:
        """A new index starts watching `cluster` (before its first Changes)."""
        ...

    async def record_gap(self, cluster: str, start: str, end: str) -> None:
        """`cluster` was not watched from `start` to `end` (a reconnect)."""
        ...

    async def cluster_watched(self, cluster: str, until: str) -> None:
        """`cluster` was watched until `until`, though nothing changed (a bookmark, a lease
        renewal, a clean stop)."""
        ...


class StatusSink(Protocol):
    async def set_status(self, status: ClusterStatus) -> None: ...


class UuidHolders(Struct):
    """What a uuid names, read together (`StateReader.holders_by_uuid`): its devices, each
    device's holds (every claim's, whatever a scope shows), and the holding claims' records
    (None: gone since). Empty devices: no device has that uuid."""

    devices: list[DeviceKey] = field(default_factory=list)
    holds: dict[DeviceKey, list[AllocationRef]] = field(default_factory=dict)
    claims: dict[ObjectKey, Record | None] = field(default_factory=dict)


class LookupReader(Protocol):
    """The two reads `composed_holders` makes."""

    async def get(self, keys: Sequence[ObjectKey]) -> list[Record | None]: ...

    async def lookup(
        self, relation: Relation, keys: Sequence[Hashable]
    ) -> builtins.list[builtins.list[Any]]: ...


async def composed_holders(reader: LookupReader, uuid: str) -> UuidHolders:
    """`holders_by_uuid` from a reader's lookups and `get` (three calls): what a store with
    no faster way answers."""
    (devices,) = await reader.lookup(Relation.UUID_DEVICES, [uuid])
    out = UuidHolders(devices=list(devices))
    if not devices:
        return out
    holds = await reader.lookup(Relation.DEVICE_ALLOCATIONS, devices)
    out.holds = dict(zip(devices, holds, strict=True))
    claims = list(dict.fromkeys(ref.claim for refs in holds for ref in refs))
    if claims:
        out.claims = dict(zip(claims, await reader.get(claims), strict=True))
    return out


class StateReader(Protocol):
    async def clusters(self) -> list[ClusterStatus]: ...

    async def get(self, keys: Sequence[ObjectKey]) -> list[Record | None]: ...

    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> Sequence[Record]:
        """Records sorted by key (cluster, then namespace and name): a read-only sequence."""
        ...

    async def devices(self, keys: Sequence[DeviceKey]) -> builtins.list[DeviceEntry | None]:
        """Each device's entry: published, or held and published by no slice (None: neither)."""
        ...

    async def list_devices(
        self,
        *,
        cluster: str | None = None,
        driver: str | None = None,
        published: bool | None = True,
    ) -> Sequence[DeviceEntry]:
        """Devices sorted by key (a read-only sequence): those slices publish (`published` True), those held and
        published by no slice (False), or both (None)."""
        ...

    async def lookup(
        self, relation: Relation, keys: Sequence[Hashable]
    ) -> builtins.list[builtins.list[Any]]: ...

    async def holders_by_uuid(self, uuid: str) -> UuidHolders:
        """The devices `uuid` names in every cluster, their holds and the holding claims: the
        `UUID_DEVICES` and `DEVICE_ALLOCATIONS` lookups and the claims' `get`, in one call."""
        ...

    async def idle_since(self, claims: Sequence[ObjectKey]) -> builtins.list[str | None]: ...

    async def select(
        self, selections: Sequence[Selection], *, after: tuple[str, ...] | None, first: int
    ) -> Page:
        """The items of `selections` (one per cluster, in cluster order) strictly after the
        sort key `after` (a record's (cluster, namespace, name), a device's key; a prefix of
        one counts as the position before everything it prefixes), at most `first` of them,
        with the selection's counts. Costs the page and the counting, not the cluster: the
        stores keep what each filter needs (Redis: the writer's indexes, docs/redis.md)."""
        ...

    async def device_status(self, keys: Sequence[DeviceKey]) -> builtins.list[str | None]:
        """free | held | shared | blocked per device as the model derived it (None: not in a
        valid pool, or a store that keeps no statuses)."""
        ...

    async def namespaces(self, kind: str, cluster: str) -> builtins.list[str]:
        """The namespaces holding objects of `kind` in `cluster`, sorted (what a request's
        scope is asked about before a `select`): O(namespaces), not O(objects)."""
        ...

    def subscribe(self, cluster: str, *, after: str | None = None) -> AsyncIterator[Delivery]:
        """The cluster's live events (service.model.live) with their ids, from now on — or
        from just after `after`, the id a subscriber last saw, or a `Resync` saying that cannot
        be done (service.stores.bus)."""
        ...

    def index(self, cluster: str) -> IndexView | None:
        """The cluster's index when this store keeps it in this process (read in place,
        synchronously); None for a store outside the process."""
        ...


class StateSink(ChangeSink, StatusSink, Protocol):
    """A state store as a reactor writes it: each batch, each status."""


class StateWriter(StateSink, Protocol):
    def open_index(self, cluster: str) -> ClusterIndex:
        """The index a (new) writer of `cluster` folds its events into."""
        ...


class ClosableReader(StateReader, Protocol):
    async def close(self) -> None: ...


@runtime_checkable  # for tests asserting that a store has every method
class StateStore(StateReader, StateWriter, Protocol):
    async def close(self) -> None: ...
