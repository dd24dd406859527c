"""explain_claim: one test per verdict, with the exact message an on-call engineer reads."""

from __future__ import annotations

from dra_mirror.service.diagnostics.explain import Diagnosis, explain_claim
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.records import (
    ClaimRecord,
    Consumer,
    Container,
    Meta,
    NodeRecord,
    ObjectKey,
    PodClaim,
    PodRecord,
    key_of,
)
from tests.diagnostics.builders import CLASSES, CLUSTER, claim, device_class, gpu, held, request


def pod(
    name: str,
    claim_name: str | None = None,
    *,
    phase: str = "Running",
    node: str | None = "n1",
    cpu: str | None = None,
    namespace: str = "default",
) -> PodRecord:
    return PodRecord(
        meta=Meta(cluster=CLUSTER, name=name, namespace=namespace, uid=f"uid-{name}"),
        phase=phase,
        node_name=node,
        claims=(PodClaim(name="gpu", claim_name=claim_name),) if claim_name else (),
        containers=(Container(name="main", requests={"cpu": cpu} if cpu else {}),),
    )


def node(name: str, *, cpu: str = "8", gpus: str | None = None, **labels: str) -> NodeRecord:
    capacity = {"cpu": cpu, "memory": "64Gi"}
    if gpus:
        capacity["nvidia.com/gpu"] = gpus
    return NodeRecord(
        meta=Meta(cluster=CLUSTER, name=name, labels=labels),
        capacity=capacity,
        allocatable=dict(capacity),
        ready=True,
    )


def reserved(c: ClaimRecord, *pods: PodRecord) -> ClaimRecord:
    consumers = tuple(Consumer(resource="pods", name=p.meta.name, uid=p.meta.uid) for p in pods)
    state = "reserved" if consumers else ("allocated" if c.allocation else "pending")
    return ClaimRecord(
        meta=c.meta,
        requests=c.requests,
        allocation=c.allocation,
        reserved_for=consumers,
        state=state,
    )


def explain(
    target: ClaimRecord,
    *,
    claims=(),
    pods=(),
    nodes=(node("n1"),),
    devices=None,
    classes=CLASSES,
    **kw,
) -> Diagnosis:
    devices = devices if devices is not None else [gpu(0), gpu(1)]
    everything = {key_of(c): c for c in (*claims, target)}
    ledger = Ledger(Holdings.build(devices, everything.values()))
    return explain_claim(
        target,
        classes=classes,
        devices=devices,
        ledger=ledger,
        claims=everything,
        pods=list(pods),
        nodes=list(nodes),
        **kw,
    )


def key(name: str, kind: str = "ResourceClaim") -> ObjectKey:
    return ObjectKey(CLUSTER, kind, "default", name)


def test_class_does_not_exist() -> None:
    d = explain(
        claim("c", request(device_class_name="gpu.nvidia.cmo")),
        pods=[pod("p", "c", phase="Pending", node=None)],
    )
    assert (d.verdict, d.state) == ("class-missing", "pending")
    assert d.message == "request gpu: DeviceClass gpu.nvidia.cmo does not exist"
    assert d.pods == [key("p", "Pod")]


def test_driver_publishes_no_devices_on_gpu_nodes() -> None:
    nodes = [
        node("gpu-1", gpus="8"),
        node("gpu-2", **{"nvidia.com/gpu.present": "true"}),
        node("cpu-1"),
    ]
    d = explain(claim("c", request()), nodes=nodes, devices=[])
    assert d.verdict == "driver-missing"
    assert d.nodes_without_driver == ["gpu-1", "gpu-2"]
    assert d.message == (
        "request gpu: the driver gpu.nvidia.com publishes no devices (no ResourceSlice from it); "
        "GPU nodes without its devices: gpu-1, gpu-2"
    )


def test_no_device_matches_names_the_selector() -> None:
    selector = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"
    d = explain(claim("c", request(selectors=(selector,))))
    assert d.verdict == "no-match"
    assert d.requests[0].class_matched == 2
    assert (
        d.message == f"request gpu: no device matches the conditions: {selector!r} rejected 2 of 2"
    )


def test_selector_error_is_not_no_match() -> None:
    selector = "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"
    d = explain(claim("c", request(selectors=(selector,))))
    assert d.verdict == "selector-error"
    assert 'Key not found in map : "profile"' in d.message


def test_every_device_held_some_idle() -> None:
    devices = [gpu(0), gpu(1)]
    busy_pod = pod("trainer", "busy")
    busy = reserved(claim("busy", request(), allocation=held(devices[0])), busy_pod)
    idle = claim("leftover", request(), allocation=held(devices[1]))  # nobody reserves it
    d = explain(
        claim("c", request()),
        claims=[busy, idle],
        pods=[busy_pod],
        devices=devices,
        idle_since={key("leftover"): "2026-11-29T20:00:00Z"},
    )
    assert d.verdict == "all-held"
    assert d.message == (
        "request gpu: no devices left: every matching device is held by default/leftover (idle), "
        "default/busy; 1 of them idle"
    )
    [b, i] = d.holders
    assert (b.claim, b.pods, b.running, b.idle) == (
        key("busy"),
        [key("trainer", "Pod")],
        True,
        False,
    )
    assert (i.claim, i.idle, i.idle_since) == (key("leftover"), True, "2026-11-29T20:00:00Z")


def test_sharing_off_and_another_pod_took_it_first() -> None:
    devices = [gpu(0)]
    first = pod("replica-0", "replica-0-gpu")
    taken = reserved(claim("replica-0-gpu", request(), allocation=held(devices[0])), first)
    waiting = pod("replica-1", "replica-1-gpu", phase="Pending", node=None)
    d = explain(
        claim("replica-1-gpu", request()), claims=[taken], pods=[first, waiting], devices=devices
    )
    assert d.verdict == "sharing-off"
    assert d.message == (
        "request gpu: sharing is off and another pod took the device first: default/replica-0 "
        "(through default/replica-0-gpu)"
    )


def test_pending_claim_that_could_be_allocated_now() -> None:
    d = explain(claim("c", request()), pods=[pod("p", "c", phase="Pending", node=None)])
    assert d.verdict == "allocatable"
    assert (
        d.message == "devices are free on node n1: the claim waits for its pod to be scheduled (p)"
    )


def test_allocated_and_in_use_passes_the_checklist() -> None:
    devices = [gpu(0)]
    p = pod("p", "c")
    c = reserved(claim("c", request(), allocation=held(devices[0])), p)
    c = ClaimRecord(
        **{**{f: getattr(c, f) for f in c.__struct_fields__}, "allocation": held(devices[0])}
    )
    d = explain(c, pods=[p], devices=devices)
    assert d.verdict == "ok"
    assert [(ch.name, ch.ok) for ch in d.checks] == [
        ("allocated", True),
        ("node", True),
        ("devices", True),
        ("consumers", True),
        ("running", True),
    ]
    assert d.checks[2].detail == "gpu.nvidia.com/n1/gpu-0"


def test_allocated_but_pod_pending_for_cpu() -> None:
    devices = [gpu(0)]
    allocation = held(devices[0])
    allocation = type(allocation)(results=allocation.results, node_name="n1")
    busy = pod("batch", cpu="7")
    waiting = pod("p", "c", phase="Pending", node=None, cpu="2")
    c = reserved(claim("c", request(), allocation=allocation), waiting)
    d = explain(c, pods=[busy, waiting], devices=devices, nodes=[node("n1", cpu="8")])
    assert d.verdict == "node-resources"
    assert d.message == (
        "the claim is allocated on n1, but pod p is Pending: the node lacks cpu "
        "(9 requested with the pods already there, 8 allocatable)"
    )


def test_allocated_but_idle() -> None:
    devices = [gpu(0)]
    c = claim("c", request(), allocation=held(devices[0]))
    d = explain(c, devices=devices)
    assert d.verdict == "idle"
    assert [ch.name for ch in d.checks if not ch.ok] == ["consumers", "running"]
    assert d.message == "allocated (gpu.nvidia.com/n1/gpu-0) but no consumer pod is Running"


def test_deleting() -> None:
    c = claim("c", request())
    c = ClaimRecord(
        meta=Meta(
            cluster=CLUSTER,
            name="c",
            namespace="default",
            deleted_at="2026-11-29T21:00:00Z",
            finalizers=("resource.kubernetes.io/delete-protection",),
        ),
        requests=c.requests,
        state="deleting",
    )
    d = explain(c)
    assert d.verdict == "deleting"
    assert "resource.kubernetes.io/delete-protection" in d.message


def test_class_matching_no_device_of_a_present_driver() -> None:
    classes = dict(
        CLASSES,
        b200=device_class(
            "b200",
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName == 'B200'",
        ),
    )
    d = explain(claim("c", request(device_class_name="b200")), classes=classes)
    assert d.verdict == "no-devices"
    assert d.message == "request gpu: DeviceClass b200 matches no published device"


def test_long_holder_lists_are_cut_but_keep_the_idle_and_the_count() -> None:
    devices = [gpu(i) for i in range(60)]
    pods = [pod(f"p{i:02d}", f"c{i:02d}") for i in range(59)]
    claims = [
        reserved(claim(f"c{i:02d}", request(), allocation=held(devices[i])), pods[i])
        for i in range(59)
    ]
    claims.append(claim("zz-idle", request(), allocation=held(devices[59])))
    d = explain(claim("new", request()), claims=claims, pods=pods, devices=devices)
    assert d.verdict == "all-held"
    assert d.holders_total == 60 and len(d.holders) == 50
    assert key("zz-idle") in [h.claim for h in d.holders if h.idle]
    assert d.message.startswith(
        "request gpu: no devices left: every matching device is held by default/zz-idle (idle), default/c00"
    )
    assert d.message.endswith("and 50 more; 1 of them idle (of the first 50)")


def test_gpu_nodes_the_driver_does_not_cover_are_named() -> None:
    devices = [gpu(0)]
    holder = claim("h", request(), allocation=held(devices[0]))
    nodes = [node("n1", gpus="1"), node("legacy", gpus="4")]
    d = explain(claim("c", request()), claims=[holder], devices=devices, nodes=nodes)
    assert d.verdict == "all-held"
    assert d.nodes_without_driver == ["legacy"]
    assert d.message.endswith("(GPU nodes where gpu.nvidia.com publishes no devices: legacy)")
    # Asked about the nodes the pod may use only, the others are not mentioned.
    pinned = explain(
        claim("c", request()), claims=[holder], devices=devices, nodes=nodes, eligible_nodes=["n1"]
    )
    assert pinned.nodes_without_driver == [] and "legacy" not in pinned.message


def test_pending_claim_whose_free_devices_are_on_a_node_without_room() -> None:
    devices = [gpu(0, "n1"), gpu(0, "n2")]
    busy_n1 = pod("batch-1", cpu="7", node="n1")
    waiting = pod("p", "c", phase="Pending", node=None, cpu="2")
    nodes = [node("n1", cpu="8"), node("n2", cpu="8")]
    # n1 lacks CPU but n2 has room and a free GPU: the claim can be placed there.
    d = explain(claim("c", request()), pods=[busy_n1, waiting], devices=devices, nodes=nodes)
    assert (d.verdict, d.message.split(":")[0]) == ("allocatable", "devices are free on node n2")
    # n2's GPU is taken: the only free GPU is on a node without room for the pod.
    holder = claim("h", request(), allocation=held(devices[1]))
    d = explain(
        claim("c", request()),
        claims=[holder],
        pods=[busy_n1, waiting],
        devices=devices,
        nodes=nodes,
    )
    assert d.verdict == "node-resources"
    assert d.message == (
        "devices are free on node n1, but pod p does not fit there: the node lacks cpu (9 requested "
        "with the pods already there, 8 allocatable), and no node with room for the pod has free devices"
    )


def test_the_blocking_request_is_the_one_no_alternative_satisfies() -> None:
    from dra_mirror.service.model.records import SubRequest

    devices = [gpu(0)]
    b200 = SubRequest(
        name="b200",
        device_class_name="gpu.nvidia.com",
        selectors=("device.attributes['gpu.nvidia.com'].productName == 'B200'",),
    )
    any_gpu = SubRequest(name="any", device_class_name="gpu.nvidia.com")
    c = claim(
        "c",
        request("first", None, first_available=(b200, any_gpu)),
        request("second", "mig.nvidia.com"),
    )
    d = explain(c, devices=devices)
    # "first" could use its second choice; "second" (a MIG class with no MIG devices) blocks.
    assert [(v.request, v.verdict) for v in d.requests] == [
        ("first/b200", "no-match"),
        ("first/any", "fits"),
        ("second", "no-devices"),
    ]
    assert d.verdict == "no-devices" and d.message.startswith("request second:")
