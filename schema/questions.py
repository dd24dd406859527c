"""The on-call questions as fields of the graph, merged into the root `Query`:

    freeDevices(className, cluster, selector, first)  -> FreeDevices!
    waitingClaims(className, cluster, first)          -> ClaimList!
    idleClaims(cluster, first)                        -> ClaimList!
    capacity(cluster)                                 -> [DeviceCapacity!]!
    podDevices(namespace, name, cluster)              -> [PodDevices!]!

Each resolver calls the question of `service.questions` (`free`, `claims`, `capacity`,
`pods`) with the request's asker and returns its answer as it is, field for field (the
types here carry the answer dataclasses' fields, camelCased): a client of the graph, the
command line over HTTP and the MCP stdio tools read the very answer Slack and `/mcp` give. An
unknown cluster, an unknown class or a selector that fails everywhere is a GraphQL error with
a code (`UNKNOWN_CLUSTER`, `BAD_INPUT`).
"""

from __future__ import annotations

from typing import Any

import strawberry

from dra_mirror.service.questions import capacity, claims, free, pods
from dra_mirror.service.questions.asking import BadQuestion
from dra_mirror.service.questions.claims import Claims

from .asked import asked
from .context import Info


def _fields(value: Any) -> dict[str, Any]:
    return dict(vars(value))


@strawberry.type(description="A free device; its free partitions are listed, not counted.")
class FreeDevice:
    cluster: str
    node: str | None
    device: str
    driver: str
    pool: str
    uuid: str | None
    model: str | None
    taints: list[str] = strawberry.field(
        description="NoSchedule/NoExecute taints (`key=value:Effect`, a rule's named): free "
        "only for claims tolerating them."
    )
    partitions: list[str] = strawberry.field(
        description="Its free partitions (device names): the same hardware, not counted again."
    )


@strawberry.type(description="Devices free now, in devices: a partition and its whole device "
                 "never both counted.")  # fmt: skip
class FreeDevices:
    class_name: str | None
    cluster: str | None
    selector: str | None
    total: int = strawberry.field(
        description="Free devices; partitions of a free whole device are not counted."
    )
    partitions: int = strawberry.field(
        description="Free partitions listed under their free whole device (not in `total`)."
    )
    evaluation_error_count: int = strawberry.field(
        description="Devices on which `selector` failed to evaluate (left out)."
    )
    evaluation_errors: list[str] = strawberry.field(description="The first of those failures.")
    devices: list[FreeDevice] = strawberry.field(description="The first `first` of them.")

    @classmethod
    def of(cls, answer: free.Free) -> FreeDevices:
        fields = _fields(answer)
        fields["devices"] = [FreeDevice(**_fields(d)) for d in answer.devices]
        return cls(**fields)


@strawberry.type(description="A waiting claim, or an idle holder, in one line.")
class ListedClaim:
    cluster: str
    claim: str = strawberry.field(description="namespace/name")
    origin: str = strawberry.field(description="TEMPLATE, EXTENDED_RESOURCE or MANUAL")
    classes: list[str] = strawberry.field(description="Classes its requests ask for.")
    created_at: str | None
    pending_seconds: float | None = strawberry.field(description="Seconds waiting (Pending).")
    idle_since: str | None
    node: str | None
    devices: list[str] = strawberry.field(description="Devices it holds: `name (uuid)`.")
    consumers: list[str] = strawberry.field(description="Consumer pods: `name (phase)`.")
    waiting_for_class: int = strawberry.field(
        description="Idle holders: Pending claims asking for one of its classes."
    )


@strawberry.type(description="Claims waiting, or holding devices idle; `total` counts all.")
class ClaimList:
    cluster: str | None
    class_name: str | None
    total: int
    claims: list[ListedClaim]

    @classmethod
    def of(cls, answer: Claims) -> ClaimList:
        fields = _fields(answer)
        fields["claims"] = [ListedClaim(**_fields(c)) for c in answer.claims]
        return cls(**fields)


@strawberry.type(
    description="A physical device (a GPU, a NIC) whose parts are in use: partitions or shares, "
    "listed under it."
)
class PhysicalDeviceUse:
    physical: str = strawberry.field(
        description="Its uuid (else driver/pool/<counter set or device>)."
    )
    node: str | None
    state: str = strawberry.field(description="partitioned or shared.")
    held_equivalents: float = strawberry.field(
        description="GPU-equivalents of it held: a partition its share of the memory slices, a "
        "share its consumed capacity over the device's."
    )
    in_use: list[str] = strawberry.field(description="Its devices held or shared.")


@strawberry.type(
    description="Devices of one driver in one cluster and what they do now: `devices` and "
    "`partitions` in devices of that driver (a partition is never counted beside its whole "
    "device), `physical*` in physical devices of `type` (a GPU with its partitions is one)."
)
class DeviceCapacity:
    cluster: str
    driver: str
    devices: int = strawberry.field(description="Devices (whole devices; partitions apart).")
    free: int
    in_use: int = strawberry.field(description="Held, or shared by several claims.")
    partitioned: int = strawberry.field(description="Free itself, some partitions in use.")
    tainted: int = strawberry.field(description="With a NoSchedule/NoExecute taint.")
    partitions: int = strawberry.field(description="Partitions of those devices.")
    partitions_free: int
    partitions_in_use: int
    unpublished: int = strawberry.field(description="Held devices no slice publishes any more.")
    type: str = strawberry.field(
        description="gpu, nic, or the driver's name: what the physical counts count (types are "
        "never added together)."
    )
    physical: int = strawberry.field(
        description="Physical devices: a GPU and its partitions (the devices consuming one "
        "counter set, or static MIG devices under their parent) are one."
    )
    physical_free: int = strawberry.field(description="Physical devices nothing uses.")
    physical_whole: int = strawberry.field(description="Physical devices in use whole.")
    physical_partitioned: int = strawberry.field(
        description="Physical devices some partitions of which are in use."
    )
    physical_shared: int = strawberry.field(
        description="Shareable physical devices shared by claims."
    )
    held_equivalents: float = strawberry.field(
        description="GPU-equivalents (physical devices of `type`) held: a whole device 1, a "
        "partition its share of the GPU's memory slices, a share its consumed capacity over "
        "the device's capacity, admin access 0."
    )
    partitioned_devices: list[PhysicalDeviceUse] = strawberry.field(
        description="The partitioned and shared physical devices, each with its devices in use."
    )

    @classmethod
    def of(cls, row: Any) -> DeviceCapacity:
        fields = _fields(row)
        fields["partitioned_devices"] = [
            PhysicalDeviceUse(**_fields(p)) for p in row.partitioned_devices
        ]
        return cls(**fields)


@strawberry.type(description="A device allocated to one of a pod's claims.")
class PodDevice:
    claim: str
    request: str
    driver: str
    pool: str
    device: str
    node: str | None
    uuid: str | None
    model: str | None
    status: str | None = strawberry.field(description="FREE, HELD, SHARED or BLOCKED.")
    share_id: str | None = strawberry.field(name="shareID")


@strawberry.type(description="A pod's claims and the devices allocated to them.")
class PodDevices:
    cluster: str
    namespace: str
    pod: str
    phase: str
    node: str | None
    claims: list[str]
    devices: list[PodDevice]
    pending: list[str] = strawberry.field(description="Its claims not allocated yet.")
    missing: list[str] = strawberry.field(description="Its claims not there (or not visible).")

    @classmethod
    def of(cls, answer: pods.PodDevices) -> PodDevices:
        fields = _fields(answer)
        fields["devices"] = [PodDevice(**_fields(d)) for d in answer.devices]
        return cls(**fields)


def _first(first: int) -> int:
    if not 1 <= first <= 1000:
        raise BadQuestion("first must be between 1 and 1000")
    return first


@strawberry.type
class Query:
    @strawberry.field(
        description="Devices free now (of a DeviceClass, matching a CEL selector), in devices: "
        "partitions of a free whole device are listed under it, not counted."
    )
    async def free_devices(
        self,
        info: Info,
        class_name: str | None = None,
        cluster: str | None = None,
        selector: str | None = None,
        first: int = 50,
    ) -> FreeDevices:
        async def answer() -> free.Free:
            return await free.free_devices(
                info.context.asker, class_name, cluster, selector=selector, limit=_first(first)
            )

        return FreeDevices.of(await asked(answer()))

    @strawberry.field(description="Pending claims (of a class), longest waiting first.")
    async def waiting_claims(
        self,
        info: Info,
        class_name: str | None = None,
        cluster: str | None = None,
        first: int = 50,
    ) -> ClaimList:
        async def answer() -> Claims:
            return await claims.waiting(info.context.asker, class_name, cluster,
                                        limit=_first(first))  # fmt: skip

        return ClaimList.of(await asked(answer()))

    @strawberry.field(
        description="Claims holding devices with no consumer pod Running, those most claims "
        "wait behind first."
    )
    async def idle_claims(
        self, info: Info, cluster: str | None = None, first: int = 50
    ) -> ClaimList:
        async def answer() -> Claims:
            return await claims.idle(info.context.asker, cluster, limit=_first(first))

        return ClaimList.of(await asked(answer()))

    @strawberry.field(description="Devices per cluster and driver, and what they do now.")
    async def capacity(self, info: Info, cluster: str | None = None) -> list[DeviceCapacity]:
        rows = await asked(capacity.capacity(info.context.asker, cluster))
        return [DeviceCapacity.of(r) for r in rows]

    @strawberry.field(description="A pod's claims and the devices allocated to them.")
    async def pod_devices(
        self, info: Info, namespace: str, name: str, cluster: str | None = None
    ) -> list[PodDevices]:
        found = await asked(pods.pod_devices(info.context.asker, namespace, name, cluster))
        return [PodDevices.of(p) for p in found]
