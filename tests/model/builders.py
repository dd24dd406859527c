"""Small record builders for the model and store tests (records, not raw JSON)."""

from __future__ import annotations

from dra_mirror.service.model.claims import claim_origin, claim_state
from dra_mirror.service.model.records import (
    Allocation,
    AllocationResult,
    Attribute,
    Capacity,
    ClaimRecord,
    Consumer,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClassRecord,
    Meta,
    NodeRecord,
    OwnerRef,
    PodClaim,
    PodRecord,
    Pool,
    Request,
    SliceRecord,
    TaintRuleRecord,
    TaintSelector,
    TemplateRecord,
)

CLUSTER = "east"
DRIVER = "gpu.nvidia.com"


def device(
    name: str,
    *,
    uuid: str | None = None,
    memory: str = "80Gi",
    shareable: bool = False,
    consumes: dict[str, dict[str, str]] | None = None,
) -> Device:
    attributes = {f"{DRIVER}/uuid": Attribute("string", uuid)} if uuid else {}
    return Device(
        name=name,
        attributes=attributes,
        capacity={f"{DRIVER}/memory": Capacity(memory)},
        shareable=shareable,
        consumes_counters=tuple(
            CounterConsumption(counter_set=cs, counters=c) for cs, c in (consumes or {}).items()
        ),
        uuid=uuid,
    )


def taint_rule(
    name: str,
    *,
    pool: str | None = None,
    device: str | None = None,
    effect: str = "NoExecute",
    selector: bool = True,
    rv: str = "1",
) -> TaintRuleRecord:
    """A DeviceTaintRule of this driver (`selector=False`: none, which selects no device)."""
    return TaintRuleRecord(
        meta=Meta(cluster=CLUSTER, name=name, uid=f"uid-{name}", resource_version=rv),
        selector=TaintSelector(DRIVER, pool, device) if selector else None,
        taint={"key": f"example.com/{name}", "effect": effect},
    )


def slice_(
    name: str,
    *,
    pool: str,
    devices: tuple[Device, ...] = (),
    node: str | None = None,
    generation: int = 0,
    count: int = 1,
    counters: dict[str, dict[str, str]] | None = None,
    cluster: str = CLUSTER,
    rv: str = "1",
) -> SliceRecord:
    return SliceRecord(
        meta=Meta(cluster=cluster, name=name, uid=f"uid-{name}", resource_version=rv),
        driver=DRIVER,
        pool=Pool(name=pool, generation=generation, resource_slice_count=count),
        node_name=node,
        devices=devices,
        shared_counters=tuple(CounterSet(name=n, counters=c) for n, c in (counters or {}).items()),
    )


def claim(
    name: str,
    *,
    namespace: str = "ns",
    devices: tuple[tuple[str, str], ...] = (),  # (pool, device)
    shares: dict[str, dict[str, str]] | None = None,  # device -> consumed capacity (shareID'd)
    consumers: tuple[tuple[str, str], ...] = (),  # (pod name, pod uid)
    node: str | None = None,
    uid: str | None = None,
    class_name: str = "gpu.nvidia.com",
    deleted: bool = False,
    template_owner: str | None = None,
    cluster: str = CLUSTER,
    rv: str = "1",
) -> ClaimRecord:
    meta = Meta(
        cluster=cluster,
        name=name,
        namespace=namespace,
        uid=uid or f"uid-{name}",
        resource_version=rv,
        deleted_at="2026-01-01T00:00:00Z" if deleted else None,
        annotations={"resource.kubernetes.io/pod-claim-name": "gpu"} if template_owner else {},
        owners=(
            OwnerRef(kind="Pod", name=template_owner, uid=f"uid-{template_owner}", controller=True),
        )
        if template_owner
        else (),
    )
    allocation = None
    if devices:
        shares = shares or {}
        allocation = Allocation(
            results=tuple(
                AllocationResult(
                    request="r",
                    driver=DRIVER,
                    pool=pool,
                    device=dev,
                    share_id=f"share-{name}" if dev in shares else None,
                    consumed_capacity=shares.get(dev, {}),
                )
                for pool, dev in devices
            ),
            node_name=node,
        )
    reserved = tuple(Consumer(resource="pods", name=p, uid=u) for p, u in consumers)
    return ClaimRecord(
        meta=meta,
        requests=(Request(name="r", device_class_name=class_name),),
        allocation=allocation,
        reserved_for=reserved,
        state=claim_state(meta, allocation, reserved),
        origin=claim_origin(meta),
    )


def pod(
    name: str,
    *,
    namespace: str = "ns",
    phase: str = "Running",
    node: str | None = None,
    claims: tuple[tuple[str, str | None, str | None], ...] = (),  # (local, claim, template)
    uid: str | None = None,
    cluster: str = CLUSTER,
    rv: str = "1",
    pod_group: str | None = None,
    extended_claim: str | None = None,
) -> PodRecord:
    return PodRecord(
        meta=Meta(
            cluster=cluster,
            name=name,
            namespace=namespace,
            uid=uid or f"uid-{name}",
            resource_version=rv,
        ),
        phase=phase,
        node_name=node,
        claims=tuple(
            PodClaim(name=local, claim_name=claim_name, template_name=template)
            for local, claim_name, template in claims
        ),
        pod_group=pod_group,
        extended_claim_name=extended_claim,
    )


def node(name: str, *, cluster: str = CLUSTER) -> NodeRecord:
    return NodeRecord(meta=Meta(cluster=cluster, name=name, uid=f"uid-{name}"), ready=True)


def device_class(name: str, *, cluster: str = CLUSTER) -> DeviceClassRecord:
    return DeviceClassRecord(meta=Meta(cluster=cluster, name=name), selectors=("true",))


def template(name: str, *, namespace: str = "ns", cluster: str = CLUSTER) -> TemplateRecord:
    return TemplateRecord(
        meta=Meta(cluster=cluster, name=name, namespace=namespace),
        requests=(Request(name="r", device_class_name="gpu.nvidia.com"),),
    )
