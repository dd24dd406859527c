"""DRA state as Prometheus series, computed at scrape time from the state store.

Grafana should not need GraphQL to draw "GPUs free per class" or "claims waiting": this module
reads the state store (memory or Redis, the same `StateReader` the API reads) and turns it into
series named as kube-state-metrics names its DRA metrics, each with a `cluster` label, plus our
own derived ones (docs/operations.md, "Metrics", lists every name and label).
`kube_pod_resourceclaim_info` is kube-state-metrics' own (v2.20, ALPHA, internal/store/pod.go);
the claim, slice and class names follow its open proposal for DRA (pull request 3020), which
may still change them:

    kube_deviceclass_info{cluster,deviceclass,extended_resource_name}            1
    kube_resourceslice_info{cluster,resourceslice,driver,pool_name,node_name,all_nodes}  1
    kube_resourceslice_devices_total{cluster,resourceslice,driver,pool,node}     devices
    kube_resourceclaim_info{cluster,namespace,resourceclaim,uid,origin}          1
    kube_resourceclaim_status_reserved_for{cluster,namespace,resourceclaim,consumer_api_group,
        consumer_resource,consumer_name,consumer_uid}                            1 per entry
    kube_resourceclaim_allocation_device_info{cluster,namespace,resourceclaim,request,driver,
        pool,device}                                                             1 per result
    kube_resourceclaim_status_allocated{cluster,namespace,resourceclaim}         0|1
    kube_resourceclaim_status_reserved{cluster,namespace,resourceclaim}          0|1
    kube_pod_resourceclaim_info{cluster,namespace,pod,uid,claim_name,resourceclaim_name,
        resourceclaim_template_name}                                             1
    dra_mirror_devices{cluster,class,status}                                     devices
    dra_mirror_claims{cluster,state}                                             claims
    dra_mirror_claim_pending_seconds{cluster}                                    histogram
    dra_mirror_idle_held_devices{cluster}                                        devices

Promises:

* every read is batched, and the event loop gets a turn between the steps: per cluster one `list` per kind, one `list_devices`, one
  `device_status` (or one `DEVICE_ALLOCATIONS` lookup) and one `idle_since` call, whatever
  the number of objects;
* a device's classes are the DeviceClasses of its cluster whose CEL selectors all accept it
  (`service.diagnostics.cel`, the code `explainClaim` and the graph use); a device that no
  class accepts is counted under `class=""`, and one accepted by two classes counts in both;
  a selector that does not compile or evaluate means "not in that class" (the graph does the
  same; `explainClaim` is where selector errors are reported);
* `dra_mirror_devices` counts the devices of the valid generation of each pool (the
  inventory); `kube_resourceslice_devices_total` counts what each slice publishes;
* `dra_mirror_claim_pending_seconds` is the age (now - creationTimestamp) of the claims that are
  pending NOW, as a histogram of that moment: read its buckets directly
  (`histogram_quantile(0.9, dra_mirror_claim_pending_seconds_bucket)`), never through `rate()`;
* `dra_mirror_idle_held_devices` counts distinct devices held by idle claims (allocated, no
  consumer pod Running: the model's `idle_since`).

`DraSnapshot.read(store, clusters, now=...)` computes it (from a state store, or from a
watcher's own indexes through `IndexReader`) and `render(snapshot)`
(`service.http.metrics_dra_text`) writes it as Prometheus text; `service.http.metrics` caches
both and appends them to its registry's text.
"""

from __future__ import annotations

import asyncio
import builtins
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector
from dra_mirror.service.model import inventory
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    PENDING,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    PodRecord,
    Record,
    SliceRecord,
)
from dra_mirror.service.model.relations import Relation
from dra_mirror.service.model.view import IndexView

# Upper bounds of the pending-age buckets, seconds: a starting pod's claim is allocated within
# seconds; minutes mean contention; hours mean a claim nothing can satisfy.
PENDING_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0,
                   21600.0, 86400.0)  # fmt: skip

CLAIM_STATES = ("pending", "allocated", "reserved", "deleting")
DEVICE_STATUSES = ("free", "held", "shared", "blocked")


@dataclass
class ClusterFigures:
    """Everything one cluster contributes to the DRA series (label values already strings)."""

    classes: list[tuple[str, str]] = field(default_factory=list)  # (name, extended resource)
    slices: list[tuple[str, str, str, str, int, bool]] = field(default_factory=list)
    claims: list[tuple[str, str, str, str, bool, bool]] = field(default_factory=list)
    # (namespace, claim, api group, resource, name, uid) per status.reservedFor entry
    reserved_for: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    # (namespace, claim, request, driver, pool, device) per allocation result
    allocated_devices: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    # (namespace, pod, pod uid, pod-local name, claim, template)
    pod_claims: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    devices: Counter[tuple[str, str]] = field(default_factory=Counter)  # (class, status)
    claim_states: Counter[str] = field(default_factory=Counter)
    pending_ages: list[float] = field(default_factory=list)
    idle_held_devices: int = 0


@dataclass
class DraSnapshot:
    """The DRA figures of some clusters at one moment."""

    clusters: dict[str, ClusterFigures] = field(default_factory=dict)

    @classmethod
    async def read(cls, store: DraReader, clusters: Iterable[str], *, now: datetime) -> DraSnapshot:
        snapshot = cls()
        for cluster in sorted(set(clusters)):
            snapshot.clusters[cluster] = await _read_cluster(store, cluster, now)
        return snapshot


class DraReader(Protocol):
    """The reads the DRA series take: a `StateReader`'s, or a watcher's own indexes."""

    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> Sequence[Record]: ...

    async def list_devices(
        self, *, cluster: str | None = None, driver: str | None = None
    ) -> Sequence[DeviceEntry]: ...

    async def device_status(self, keys: Sequence[DeviceKey]) -> builtins.list[str | None]: ...

    async def idle_since(self, claims: Sequence[ObjectKey]) -> builtins.list[str | None]: ...

    async def lookup(
        self, relation: Relation, keys: Sequence[Hashable]
    ) -> builtins.list[builtins.list[Any]]: ...


class IndexReader:
    """A watcher's own cluster indexes (`Reactor.index`) read like a state store.

    They hold exactly what the watcher writes to the state store, at most one batch ahead, so
    a watcher computes its DRA series from memory: over Redis the same 40,000-object reads cost
    ~7 s of client decoding, from the index well under one. Reads are synchronous, so each
    answer is one consistent moment of the index."""

    def __init__(self, indexes: Mapping[str, IndexView]) -> None:
        self.indexes = dict(indexes)

    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> list[Record]:
        index = self.indexes.get(cluster or "")
        return list(index.records(kind)) if index is not None else []

    async def list_devices(
        self, *, cluster: str | None = None, driver: str | None = None
    ) -> builtins.list[DeviceEntry]:
        index = self.indexes.get(cluster or "")
        return list(index.devices()) if index is not None else []

    async def device_status(self, keys: Sequence[DeviceKey]) -> builtins.list[str | None]:
        return [self._index(key[0]).device_status(key) for key in keys]

    async def idle_since(self, claims: Sequence[ObjectKey]) -> builtins.list[str | None]:
        return [self._index(key[0]).idle_since(key) for key in claims]

    async def lookup(
        self, relation: Relation, keys: Sequence[Hashable]
    ) -> builtins.list[builtins.list[Any]]:
        return [self._index(_cluster_of(key)).lookup(relation, key) for key in keys]

    def _index(self, cluster: str) -> IndexView:
        return self.indexes[cluster]


def _cluster_of(key: Hashable) -> str:
    assert isinstance(key, tuple)  # the relations these series read are keyed by cluster
    cluster: str = key[0]
    return cluster


async def _read_cluster(store: DraReader, cluster: str, now: datetime) -> ClusterFigures:
    figures = ClusterFigures()
    classes = [
        c
        for c in await store.list(DEVICE_CLASS, cluster=cluster)
        if isinstance(c, DeviceClassRecord)
    ]
    for device_class in classes:
        figures.classes.append((device_class.meta.name, device_class.extended_resource_name or ""))
    for record in await store.list(RESOURCE_SLICE, cluster=cluster):
        if not isinstance(record, SliceRecord):
            continue
        figures.slices.append(
            (record.meta.name, record.driver, record.pool.name, record.node_name or "",
             len(record.devices), record.all_nodes)
        )  # fmt: skip
    await _yield()
    claims = [
        c for c in await store.list(RESOURCE_CLAIM, cluster=cluster) if isinstance(c, ClaimRecord)
    ]
    for claim in claims:
        meta = claim.meta
        figures.claims.append(
            (meta.namespace, meta.name, meta.uid, claim.origin,
             claim.allocation is not None, bool(claim.reserved_for))
        )  # fmt: skip
        for c in claim.reserved_for:
            figures.reserved_for.append(
                (meta.namespace, meta.name, c.api_group or "", c.resource, c.name, c.uid)
            )
        for r in claim.allocation.results if claim.allocation is not None else ():
            figures.allocated_devices.append(
                (meta.namespace, meta.name, r.request, r.driver, r.pool, r.device)
            )
        figures.claim_states[claim.state] += 1
        if claim.state == PENDING and meta.created_at:
            figures.pending_ages.append(_age(meta.created_at, now))
    await _yield()
    for pod in await store.list(POD, cluster=cluster):
        if not isinstance(pod, PodRecord):
            continue
        for entry in pod.claims:
            if entry.claim_name is None and entry.template_name is None:
                continue  # references neither a claim nor a template (as kube-state-metrics)
            figures.pod_claims.append(
                (pod.meta.namespace, pod.meta.name, pod.meta.uid, entry.name,
                 entry.claim_name or "", entry.template_name or "")
            )  # fmt: skip
    await _yield()
    entries = await store.list_devices(cluster=cluster)
    statuses = await _statuses(store, entries)
    await _yield()
    selectors = [(c.meta.name, _compiled(c)) for c in classes]
    for device_entry, status in zip(entries, statuses, strict=True):
        names = [n for n, compiled in selectors if _accepts(compiled, device_entry)] or [""]
        for name in names:
            figures.devices[(name, status)] += 1
    await _yield()
    figures.idle_held_devices = await _idle_held_devices(store, claims)
    return figures


async def _yield() -> None:
    # The in-memory store answers without awaiting: let requests run between the steps of a
    # 40,000-object cluster (each ~0.1-0.2 s) instead of after all of them.
    await asyncio.sleep(0)


def _age(created_at: str, now: datetime) -> float:
    try:
        created = datetime.fromisoformat(created_at)
    except ValueError:
        return 0.0
    return max(0.0, (now - created).total_seconds())


def _compiled(device_class: Any) -> list[Any] | None:
    """The class's compiled selectors; None when one does not compile (the class accepts
    nothing)."""
    try:
        return [compile_selector(expression) for expression in device_class.selectors]
    except SelectorError:
        return None


def _accepts(selectors: list[Any] | None, entry: DeviceEntry) -> bool:
    """Do all the selectors accept the device? (an evaluation error: no)"""
    if selectors is None:
        return False
    device, driver = entry.device, entry.key.driver
    return all(selector.answer(device, driver) is True for selector in selectors)


async def _statuses(store: DraReader, entries: Sequence[DeviceEntry]) -> list[str]:
    """free | held | shared | blocked per device, in one store call (the stores keep them as
    the model derived them); a status a store lacks is taken from the holders alone (a
    blocked partition then reads free)."""
    keys = [entry.key for entry in entries]
    found = await store.device_status(keys) if keys else []
    missing = [i for i, status in enumerate(found) if status is None]
    holds = await store.lookup(Relation.DEVICE_ALLOCATIONS, [keys[i] for i in missing])
    derived = {
        i: inventory.device_status(entries[i], hold) for i, hold in zip(missing, holds, strict=True)
    }
    return [status if status is not None else derived[i] for i, status in enumerate(found)]


async def _idle_held_devices(store: DraReader, claims: Sequence[ClaimRecord]) -> int:
    allocated = [c for c in claims if c.allocation is not None]
    if not allocated:
        return 0
    keys = [
        ObjectKey(c.meta.cluster, RESOURCE_CLAIM, c.meta.namespace, c.meta.name) for c in allocated
    ]
    since = await store.idle_since(keys)
    held: set[DeviceKey] = set()
    for claim, idle in zip(allocated, since, strict=True):
        if idle is None or claim.allocation is None:
            continue
        for result in claim.allocation.results:
            held.add(DeviceKey(claim.meta.cluster, result.driver, result.pool, result.device))
    return len(held)
