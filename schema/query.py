"""The root `Query` of the core graph: entry points with filters and Relay paging.

Every entry point reads through `info.context.reader` (scoped) and the request's loaders.
Lists without paging are sorted by identity; connections page in identity order too (see
`schema.paging`), the order the store's lists come in (kept by the in-memory store's
indexes, so a page of 40,000 claims costs a bisect and the page: nothing is sorted per
request), which every filter here keeps. Filters that need derived state (device `status`, claim `idle`, device
`className`) compute it batched for the candidates, then page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import strawberry

from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    NODE,
    POD,
    POD_GROUP,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    ObjectKey,
    PodGroupRecord,
    PodRecord,
    Record,
    SliceRecord,
)
from dra_mirror.service.stores.protocols import Relation

from . import classes, device_state
from .claims import ResourceClaim, ResourceClaimTemplate, claim_key
from .context import Info
from .devices import Device, DeviceClass, ResourceSlice
from .nodes import Cluster, Node
from .paging import Connection, paginate
from .pod_groups import PodGroup
from .pods import Pod
from .pods import uses_devices as pod_uses_devices
from .pools import ResourcePoolStatus, resource_pools
from .scalars import ClaimState, DeviceStatus
from .whoholds import Holding, devices_named, who_holds


def _identity(record: Record) -> tuple[str, str, str]:
    return (record.meta.cluster, record.meta.namespace, record.meta.name)


async def _cluster_names(info: Info, cluster: str | None) -> list[str]:
    if cluster is not None:
        return [cluster]
    return sorted(s.name for s in await info.context.reader.clusters())


async def _device_candidates(
    info: Info, cluster: str | None, node: str | None, driver: str | None, published: bool | None
) -> Sequence[DeviceEntry]:
    reader, loaders = info.context.reader, info.context.loaders
    if node is None:
        return await reader.list_devices(cluster=cluster, driver=driver, published=published)
    names = await _cluster_names(info, cluster)
    found = await loaders.relation(Relation.NODE_DEVICES).load_many([(c, node) for c in names])
    entries = await loaders.devices.load_many(sorted(k for keys in found for k in keys))
    return [
        e
        for e in entries
        if e is not None
        and (driver is None or e.key.driver == driver)
        and (published is None or e.published == published)
    ]


@strawberry.type
class Query:
    @strawberry.field(description="Every mirrored cluster, by name.")
    async def clusters(self, info: Info) -> list[Cluster]:
        statuses = await info.context.reader.clusters()
        return [Cluster(status_record=s) for s in sorted(statuses, key=lambda s: s.name)]

    @strawberry.field
    async def cluster(self, info: Info, name: str) -> Cluster | None:
        for status in await info.context.reader.clusters():
            if status.name == name:
                return Cluster(status_record=status)
        return None

    @strawberry.field
    async def device_classes(self, info: Info, cluster: str | None = None) -> list[DeviceClass]:
        records = await info.context.reader.list(DEVICE_CLASS, cluster=cluster)
        return [DeviceClass(record=r) for r in sorted(records, key=_identity)]

    @strawberry.field
    async def resource_slices(
        self,
        info: Info,
        cluster: str | None = None,
        node: str | None = None,
        driver: str | None = None,
    ) -> list[ResourceSlice]:
        if node is None:
            records = await info.context.reader.list(RESOURCE_SLICE, cluster=cluster)
        else:  # the node reverse map: no scan of every slice of the cluster
            loaders = info.context.loaders
            names = await _cluster_names(info, cluster)
            keys = await loaders.relation(Relation.NODE_SLICES).load_many(
                [(c, node) for c in names]
            )
            records = await loaders.records_of(SliceRecord, [k for ks in keys for k in ks])
        found = [
            r
            for r in records
            if (node is None or r.node_name == node) and (driver is None or r.driver == driver)
        ]
        return [ResourceSlice(record=r) for r in sorted(found, key=_identity)]

    @strawberry.field(
        description="Pool status per driver and pool, as KEP-5677's ResourcePoolStatusRequest "
        "counts it, over every cluster (or one)."
    )
    async def resource_pools(
        self, info: Info, cluster: str | None = None, driver: str | None = None
    ) -> list[ResourcePoolStatus]:
        return await resource_pools(info, cluster, driver)

    @strawberry.field(
        description="Devices of valid pool generations, filtered, paged. `published: false` "
        "lists instead the devices claims hold that no slice publishes; null lists both."
    )
    async def devices(
        self,
        info: Info,
        cluster: str | None = None,
        class_name: str | None = None,
        node: str | None = None,
        driver: str | None = None,
        status: DeviceStatus | None = None,
        first: int | None = None,
        after: str | None = None,
        published: bool | None = True,
    ) -> Connection[Device]:
        loaders = info.context.loaders
        entries = await _device_candidates(info, cluster, node, driver, published)
        if class_name is not None:
            names = {e.key.cluster for e in entries}
            found = await loaders.records_of(
                DeviceClassRecord,
                [ObjectKey(c, DEVICE_CLASS, "", class_name) for c in sorted(names)],
            )
            by_cluster = {r.meta.cluster: r for r in found}
            entries = [
                e
                for e in entries
                if e.key.cluster in by_cluster
                and classes.class_matches(loaders, by_cluster[e.key.cluster], e)
            ]
        if status is not None:  # every entry here has that status: the page's are primed below
            statuses = await device_state.statuses(loaders, entries, prime=False)
            entries = [e for e, s in zip(entries, statuses, strict=True) if s == status.value]
        page = paginate(
            entries,
            key=lambda e: tuple(e.key),
            node=lambda e: Device(entry=e),
            first=first,
            after=after,
            settings=info.context.settings,
            presorted=True,  # the store's key order, kept by the filters
        )
        if status is not None:
            device_state.prime_statuses(
                loaders, {edge.node.entry.key: status.value for edge in page.edges}
            )
        await device_state.prefetch(loaders, [edge.node.entry for edge in page.edges])
        return page

    @strawberry.field
    async def resource_claims(
        self,
        info: Info,
        cluster: str | None = None,
        namespace: str | None = None,
        state: ClaimState | None = None,
        idle: bool | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> Connection[ResourceClaim]:
        records = await info.context.reader.list(
            RESOURCE_CLAIM, cluster=cluster, namespace=namespace
        )
        claims = cast(Sequence[ClaimRecord], records)  # records of that kind, in key order
        if state is not None:
            claims = [c for c in claims if c.state == state.value]
        if idle is not None:
            keys = [claim_key(c) for c in claims]
            since = await info.context.reader.idle_since(keys)  # one call, no future per claim
            info.context.loaders.idle_since.prime_many(dict(zip(keys, since, strict=True)))
            claims = [c for c, s in zip(claims, since, strict=True) if (s is not None) == idle]
        return paginate(
            claims,
            key=_identity,
            node=lambda c: ResourceClaim(record=c),
            first=first,
            after=after,
            settings=info.context.settings,
            presorted=True,
        )

    @strawberry.field
    async def resource_claim(
        self, info: Info, cluster: str, namespace: str, name: str
    ) -> ResourceClaim | None:
        record = await info.context.loaders.records.load(
            ObjectKey(cluster, RESOURCE_CLAIM, namespace, name)
        )
        return ResourceClaim(record=record) if isinstance(record, ClaimRecord) else None

    @strawberry.field(
        description="PodGroups (scheduling.k8s.io, KEP-5729) where the cluster serves them."
    )
    async def pod_groups(
        self, info: Info, cluster: str | None = None, namespace: str | None = None
    ) -> list[PodGroup]:
        records = await info.context.reader.list(POD_GROUP, cluster=cluster, namespace=namespace)
        return [PodGroup(record=r) for r in records]

    @strawberry.field
    async def pod_group(
        self, info: Info, cluster: str, namespace: str, name: str
    ) -> PodGroup | None:
        key = ObjectKey(cluster, POD_GROUP, namespace, name)
        record = await info.context.loaders.record(PodGroupRecord, key)
        return PodGroup(record=record) if record is not None else None

    @strawberry.field
    async def resource_claim_templates(
        self, info: Info, cluster: str | None = None, namespace: str | None = None
    ) -> list[ResourceClaimTemplate]:
        records = await info.context.reader.list(
            RESOURCE_CLAIM_TEMPLATE, cluster=cluster, namespace=namespace
        )
        return [ResourceClaimTemplate(record=r) for r in sorted(records, key=_identity)]

    @strawberry.field
    async def pods(
        self,
        info: Info,
        cluster: str | None = None,
        namespace: str | None = None,
        node: str | None = None,
        uses_devices: bool | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> Connection[Pod]:
        reader, loaders = info.context.reader, info.context.loaders
        records: Sequence[Record]
        if node is None:
            records = await reader.list(POD, cluster=cluster, namespace=namespace)
        else:  # node reverse maps, in cluster order, each sorted: key order
            names = await _cluster_names(info, cluster)
            found = await loaders.relation(Relation.NODE_PODS).load_many([(c, node) for c in names])
            loaded = await loaders.records.load_many([k for keys in found for k in keys])
            records = [r for r in loaded if r is not None]
            if namespace is not None:
                records = [r for r in records if r.meta.namespace == namespace]
        pods = cast(Sequence[PodRecord], records)
        if uses_devices is not None:
            pods = [p for p in pods if pod_uses_devices(p) == uses_devices]
        return paginate(
            pods,
            key=_identity,
            node=lambda p: Pod(record=p),
            first=first,
            after=after,
            settings=info.context.settings,
            presorted=True,
        )

    @strawberry.field
    async def nodes(self, info: Info, cluster: str | None = None) -> list[Node]:
        records = await info.context.reader.list(NODE, cluster=cluster)
        return [Node(record=r) for r in sorted(records, key=_identity)]

    @strawberry.field(
        description='Claims holding a device named by uuid ("GPU-…", "MIG-…"), "node/device", '
        '"driver/pool/device" or a bare device name; ambiguous names return every match.'
    )
    async def who_holds(self, info: Info, device: str, cluster: str | None = None) -> list[Holding]:
        return await who_holds(info, device, cluster)

    @strawberry.field(
        description="The devices a name designates, as whoHolds reads it (uuid, node/device, "
        "driver/pool/device or a bare device name), held or free."
    )
    async def devices_named(
        self, info: Info, device: str, cluster: str | None = None
    ) -> list[Device]:
        return await devices_named(info, device, cluster)
