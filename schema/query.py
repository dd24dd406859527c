"""The root `Query` of the core graph: entry points with filters and Relay paging.

Every entry point reads through `info.context.reader` (scoped) and the request's loaders.
Lists without paging are sorted by identity; connections (claims, pods, devices) page in
identity order too (see `schema.paging`): the store pages and counts them itself, filters
included (`StateReader.select`: the in-memory store from its indexes' kept orders, Redis from
the writer's indexes), so a page costs the page, not the cluster.
"""

from __future__ import annotations

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
    DeviceEntry,
    ObjectKey,
    PodGroupRecord,
    PodRecord,
    Record,
    SliceRecord,
)
from dra_mirror.service.stores.protocols import DEVICES, Relation, Selection

from . import device_state
from .claims import ResourceClaim, ResourceClaimTemplate
from .context import Info
from .devices import Device, DeviceClass, ResourceSlice
from .nodes import Cluster, Node
from .paging import Connection, connection, cursor_key, page_size
from .pod_groups import PodGroup
from .pods import Pod
from .pool_requests import ResourcePoolStatusRequest, resource_pool_status_requests
from .pools import ResourcePoolStatus, resource_pools
from .scalars import ClaimState, DeviceStatus
from .whoholds import Holding, devices_named, who_holds


def _identity(record: Record) -> tuple[str, str, str]:
    return (record.meta.cluster, record.meta.namespace, record.meta.name)


def _device_key(entry: DeviceEntry) -> tuple[str, ...]:
    return tuple(entry.key)


def _claim(record: Record) -> ClaimRecord:
    assert isinstance(record, ClaimRecord)  # a page of claims
    return record


def _pod(record: Record) -> PodRecord:
    assert isinstance(record, PodRecord)  # a page of pods
    return record


async def _cluster_names(info: Info, cluster: str | None) -> list[str]:
    if cluster is not None:
        return [cluster]
    return sorted(s.name for s in await info.context.reader.clusters())


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
        description="ResourcePoolStatusRequests (KEP-5677) where the cluster serves them, each "
        "reported pool beside the mirror's own status of it and where they differ."
    )
    async def resource_pool_status_requests(
        self, info: Info, cluster: str | None = None
    ) -> list[ResourcePoolStatusRequest]:
        return await resource_pool_status_requests(info, cluster)

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
        wanted = Selection(
            DEVICES,
            "",
            node=node,
            driver=driver,
            status=status.value if status is not None else None,
            class_name=class_name,
            published=published,
        )
        page = await info.context.reader.page(
            wanted, cluster=cluster, after=cursor_key(after),
            first=page_size(first, info.context.settings),
        )  # fmt: skip
        entries: list[DeviceEntry] = page.items
        if status is not None:  # every entry of the page has that status
            device_state.prime_statuses(loaders, {e.key: status.value for e in entries})
        await device_state.prefetch(loaders, entries)
        return connection(page, key=_device_key, node=lambda e: Device(entry=e))

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
        wanted = Selection(
            RESOURCE_CLAIM, "", state=state.value if state is not None else None, idle=idle
        )
        page = await info.context.reader.page(
            wanted, cluster=cluster, namespace=namespace, after=cursor_key(after),
            first=page_size(first, info.context.settings),
        )  # fmt: skip
        return connection(page, key=_identity, node=lambda c: ResourceClaim(record=_claim(c)))

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
        wanted = Selection(POD, "", node=node, uses_devices=uses_devices)
        page = await info.context.reader.page(
            wanted, cluster=cluster, namespace=namespace, after=cursor_key(after),
            first=page_size(first, info.context.settings),
        )  # fmt: skip
        return connection(page, key=_identity, node=lambda p: Pod(record=_pod(p)))

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
