"""Worlds for the audit oracle: a cluster's raw objects minute by minute, drawn by Hypothesis.

A world is nodes with GPUs in every layout the audits must weigh — whole GPUs, partitionable
GPUs (a counter set of 8 memory slices and a larger share of multiprocessors, with or without
their whole device, the whole device with or without a uuid), static MIG devices naming their
parent by `parentUUID`, shared GPUs (`allowMultipleAllocations`, shares consuming memory) —
and NICs (shared by bandwidth or whole); three DeviceClasses selecting them by CEL; and claims
with a lifetime each: created (minute 0: before the mirror listed the cluster), allocated or
never, deleted or not, with a consumer pod or none (a claim no pod uses), the pod created,
scheduled when its claim is allocated, Running at once, late (pulling its image) or never,
deleted or Succeeded.

`snapshots(world)` gives the raw objects (resource.k8s.io/v1 and core/v1 dicts, keyed by kind,
namespace and name) as they stand in each minute [0, END): what the API server would list
then. The mirror is fed the first as its first LIST and the differences after as watch
events; the naive truth (`tests.oracle.audit_truth`) reads the same snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.oracle import objects as o

END = 60  # minutes: the audit window [0, END) is a whole hour (peaks read the hourly cache)
GRACE = 10  # minutes: DRA_MIRROR_CLUSTERS_IDLE_GRACE's default (600 s)
GPU_DRIVER = "gpu.nvidia.com"
NIC_DRIVER = "nic.example.com"
NAMESPACES = ("team-a", "team-b")
CLASSES = {  # name -> CEL selecting its devices
    "gpu.nvidia.com": f'device.driver == "{GPU_DRIVER}" && '
    f'device.attributes["{GPU_DRIVER}"].type == "gpu"',
    "mig.nvidia.com": f'device.driver == "{GPU_DRIVER}" && '
    f'device.attributes["{GPU_DRIVER}"].type == "mig"',
    "nic": f'device.driver == "{NIC_DRIVER}"',
}
# partition layouts of 8 memory slices: (first slice, slices, multiprocessors of 98)
LAYOUTS = (
    ((0, 4, 42), (4, 2, 28), (6, 1, 14)),
    tuple((i, 1, 14) for i in range(7)),
    ((0, 2, 28), (2, 2, 28), (4, 4, 56)),
)
STATIC_MEMORY = ((40, 20, 10), (10, 10, 10, 10), (20, 20))  # Gi of an 80Gi parent
SHARES = (10, 20, 40)  # Gi of an 80Gi shared GPU; G of a 100G NIC


@dataclass(frozen=True)
class Gpu:
    layout: str  # plain | dynamic | static | shared
    variant: int = 0  # which of LAYOUTS / STATIC_MEMORY
    whole: bool = True  # dynamic: the whole device is published
    whole_uuid: bool = True  # dynamic: the whole device publishes a uuid


@dataclass(frozen=True)
class Node:
    gpus: tuple[Gpu, ...]
    nic: str | None  # None | shared | whole
    appears: int  # minute its slices are published


@dataclass(frozen=True)
class Pod:
    created: int
    delay: int  # minutes from the claim's allocation to the pod's scheduling
    slow: int | None  # minutes from scheduling to Running (None: never)
    ends: int | None  # minute the pod ends
    finish: str  # deleted | Succeeded


@dataclass(frozen=True)
class Claim:
    namespace: str
    device: int | None  # index into `offered(world)` (None: never allocated)
    klass: str
    share: int  # the share's consumption (shared devices)
    created: int
    allocated: int | None
    deleted: int | None
    pod: Pod | None


@dataclass(frozen=True)
class World:
    nodes: tuple[Node, ...]
    claims: tuple[Claim, ...]


@dataclass(frozen=True)
class Offer:
    """A device a claim may be allocated: where it is, its class, whether several share it."""

    node: int
    driver: str
    name: str
    klass: str
    shared: bool
    exclusive_key: str  # two claims never hold the same exclusive device at once


def _gpu_devices(n: int, i: int, gpu: Gpu) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """The raw devices of one GPU and the counter sets they consume."""
    name, uuid = f"gpu-{i}", f"GPU-{n}-{i}"
    memory = {"memory": "80Gi"}
    if gpu.layout == "plain":
        return [o.device(name, uuid=uuid, capacity=memory)], {}
    if gpu.layout == "shared":
        return [o.device(name, uuid=uuid, capacity=memory, shareable=True)], {}
    if gpu.layout == "static":
        parent = o.device(name, uuid=uuid, capacity=memory)
        parent["attributes"]["productName"] = {"string": "H100"}
        out = [parent]
        for k, gi in enumerate(STATIC_MEMORY[gpu.variant]):
            part = o.device(
                f"{name}-mig-{k}", uuid=f"MIG-{n}-{i}-{k}", capacity={"memory": f"{gi}Gi"}
            )
            part["attributes"].update(type={"string": "mig"}, parentUUID={"string": uuid},
                                      productName={"string": "H100"})  # fmt: skip
            out.append(part)
        return out, {}
    counter_set = f"{name}-cs"
    slices = {f"memory-slice-{s}": "1" for s in range(8)}
    out = []
    if gpu.whole:
        out.append(o.device(name, uuid=uuid if gpu.whole_uuid else None, capacity=memory,
                            consumes={counter_set: {**slices, "multiprocessors": "98"}}))  # fmt: skip
    for k, (first, count, mp) in enumerate(LAYOUTS[gpu.variant]):
        used = {f"memory-slice-{s}": "1" for s in range(first, first + count)}
        part = o.device(f"{name}-mig-{count}g-{k}", capacity={"memory": f"{10 * count}Gi"},
                        consumes={counter_set: {**used, "multiprocessors": str(mp)}})  # fmt: skip
        part["attributes"]["type"] = {"string": "mig"}
        out.append(part)
    return out, {counter_set: {**slices, "multiprocessors": "98"}}


def node_slices(n: int, node: Node) -> list[dict]:
    """The node's ResourceSlices: one of GPUs, one of its NIC."""
    devices: list[dict] = []
    counters: dict[str, dict[str, str]] = {}
    for i, gpu in enumerate(node.gpus):
        found, sets = _gpu_devices(n, i, gpu)
        devices.extend(found)
        counters.update(sets)
    out = [o.slice_(f"n{n}-gpus", GPU_DRIVER, f"n{n}", devices, node_name=f"n{n}",
                    counters=counters or None)]  # fmt: skip
    if node.nic is not None:
        nic = {"name": "eth0", "attributes": {"type": {"string": "nic"}},
               "capacity": {"bandwidth": {"value": "100G"}}}  # fmt: skip
        if node.nic == "shared":
            nic["allowMultipleAllocations"] = True
        out.append(o.slice_(f"n{n}-nics", NIC_DRIVER, f"n{n}", [nic], node_name=f"n{n}"))
    return out


def offered(world_nodes: tuple[Node, ...]) -> list[Offer]:
    """Every device of the world a claim may be given, in a fixed order."""
    out = []
    for n, node in enumerate(world_nodes):
        for raw in node_slices(n, node):
            driver = raw["spec"]["driver"]
            for d in raw["spec"]["devices"]:
                kind = d["attributes"]["type"]["string"]
                klass = {"gpu": "gpu.nvidia.com", "mig": "mig.nvidia.com", "nic": "nic"}[kind]
                shared = bool(d.get("allowMultipleAllocations"))
                out.append(Offer(n, driver, d["name"], klass, shared, f"{n}/{driver}/{d['name']}"))
    return out


gpus = st.one_of(
    st.builds(Gpu, st.just("plain")),
    st.builds(Gpu, st.just("shared")),
    st.builds(Gpu, st.just("static"), st.integers(0, len(STATIC_MEMORY) - 1)),
    st.builds(Gpu, st.just("dynamic"), st.integers(0, len(LAYOUTS) - 1), st.booleans(),
              st.booleans()),
)  # fmt: skip
nodes = st.builds(Node, st.lists(gpus, min_size=1, max_size=2).map(tuple),
                  st.sampled_from([None, "shared", "whole"]),
                  st.sampled_from([0, 0, 0, 5, 20]))  # fmt: skip


@st.composite
def worlds(draw: st.DrawFn) -> World:
    world_nodes = tuple(draw(st.lists(nodes, min_size=1, max_size=3)))
    offers = offered(world_nodes)
    busy: dict[str, list[tuple[int, int]]] = {}  # exclusive device -> held [from, to)
    claims = []
    for _ in range(draw(st.integers(1, 8))):
        created = draw(st.one_of(st.just(0), st.integers(1, END - 5)))  # 0: before the mirror
        deleted = draw(st.one_of(st.none(), st.integers(created + 1, END - 1)))
        last = END if deleted is None else deleted
        index = draw(st.one_of(st.none(), st.integers(0, len(offers) - 1)))
        allocated = None
        if index is not None:
            offer = offers[index]
            soonest = max(created, world_nodes[offer.node].appears)
            if soonest < last:
                allocated = draw(
                    st.sampled_from([soonest, *range(soonest, min(last, soonest + 20))])
                )
                held = busy.setdefault(offer.exclusive_key, [])
                if not offer.shared and any(a < last and allocated < b for a, b in held):
                    allocated = None  # taken then: this claim never gets it
                elif not offer.shared:
                    held.append((allocated, last))
            if allocated is None:
                index = None
        klass = offers[index].klass if index is not None else draw(st.sampled_from(sorted(CLASSES)))
        pod = None
        if draw(st.integers(0, 4)):  # most claims have a pod; some none (made by hand)
            pod_created = draw(st.one_of(st.just(created), st.integers(0, END - 2)))
            if created == 0 and allocated == 0 and pod_created == 0:
                delay = -draw(st.sampled_from([0, 3, 15]))  # scheduled before the mirror
            else:
                delay = draw(st.sampled_from([0, 0, 1, 3]))
            slow = draw(st.sampled_from([0, 0, 2, GRACE - 1, GRACE, GRACE + 5, None]))
            ends = draw(st.one_of(st.none(), st.integers(pod_created + 1, END - 1)))
            if ends is not None and ends == allocated:
                # which came first is not in the objects (a wait served or abandoned): apart
                ends = ends + 1 if ends + 1 < END else None
            finish = draw(st.sampled_from(["deleted", "Succeeded"]))
            pod = Pod(pod_created, delay, slow, ends, finish)
        share = draw(st.sampled_from(SHARES))
        namespace = draw(st.sampled_from(NAMESPACES))
        claims.append(Claim(namespace, index, klass, share, created, allocated, deleted, pod))
    return World(world_nodes, tuple(claims))


def at(minute: int) -> str:
    """The instant of a minute after 10:00 (negative: before it)."""
    hour, m = divmod(minute, 60)
    return f"2026-03-02T{10 + hour:02d}:{m:02d}:00Z"


def _pod_state(pod: Pod, scheduled: int | None, t: int) -> str | None:
    """The pod's phase at minute t (None: it does not exist)."""
    if t < pod.created:
        return None
    if pod.ends is not None and t >= pod.ends:
        return None if pod.finish == "deleted" else "Succeeded"
    if scheduled is not None and t >= scheduled and pod.slow is not None:
        if t >= scheduled + pod.slow:
            return "Running"
    return "Pending"


def scheduled_at(claim: Claim) -> int | None:
    """When the claim's pod is scheduled (its claim is allocated first), None: never."""
    if claim.pod is None or claim.allocated is None:
        return None
    return max(claim.allocated + claim.pod.delay, claim.pod.created) if claim.pod.delay >= 0 \
        else claim.allocated + claim.pod.delay  # fmt: skip


def snapshots(world: World) -> list[dict[tuple[str, str, str], dict[str, Any]]]:
    """The raw objects at each minute [0, END), keyed by (kind, namespace, name)."""
    offers = offered(world.nodes)
    out = []
    for t in range(END):
        objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        for name, expression in CLASSES.items():
            objects[("DeviceClass", "", name)] = {
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": at(0)},
                "spec": {"selectors": [{"cel": {"expression": expression}}]},
            }  # fmt: skip
        for n, node in enumerate(world.nodes):
            if t >= node.appears:
                for raw in node_slices(n, node):
                    objects[("ResourceSlice", "", raw["metadata"]["name"])] = raw
        for c, claim in enumerate(world.claims):
            _claim_objects(objects, offers, c, claim, t)
        out.append(objects)
    return out


def _claim_objects(objects: dict, offers: list[Offer], c: int, claim: Claim, t: int) -> None:
    name, pod_name = f"claim-{c}", f"pod-{c}"
    scheduled = scheduled_at(claim)
    phase = None if claim.pod is None else _pod_state(claim.pod, scheduled, t)
    if phase is not None and claim.pod is not None:
        node = None
        if scheduled is not None and t >= scheduled and claim.device is not None:
            node = f"n{offers[claim.device].node}"
        raw = o.pod(pod_name, claim.namespace, claims=[name], phase=phase, node_name=node)
        born = claim.pod.created if claim.pod.created else min(0, scheduled or 0) - 1
        raw["metadata"]["creationTimestamp"] = at(born)
        if node is not None:
            raw["status"]["startTime"] = at(scheduled)  # type: ignore[arg-type]
        objects[("Pod", claim.namespace, pod_name)] = raw
    if t < claim.created or (claim.deleted is not None and t >= claim.deleted):
        return
    results = None
    node_name = None
    if claim.allocated is not None and t >= claim.allocated and claim.device is not None:
        offer = offers[claim.device]
        node_name = f"n{offer.node}"
        unit = "Gi" if offer.driver == GPU_DRIVER else "G"
        consumed = {("memory" if unit == "Gi" else "bandwidth"): f"{claim.share}{unit}"}
        results = [o.result("gpu", offer.driver, f"n{offer.node}", offer.name,
                            share_id=f"share-{c}" if offer.shared else None,
                            consumed=consumed if offer.shared else None)]  # fmt: skip
    reserved = None
    if results is not None and phase in ("Pending", "Running") and node_name is not None:
        if scheduled is not None and t >= scheduled:
            reserved = [(pod_name, f"uid-{claim.namespace}-{pod_name}")]
    raw = o.claim(name, claim.namespace, device_class_name=claim.klass, results=results,
                  node_name=node_name, reserved=reserved)  # fmt: skip
    raw["metadata"]["creationTimestamp"] = at(claim.created)
    objects[("ResourceClaim", claim.namespace, name)] = raw
