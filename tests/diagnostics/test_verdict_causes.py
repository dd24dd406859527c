"""Verdicts that name the cause: a tainted free device is `tainted` (which taint, and who put
it), a shortage of a shareable device's capacity is `no-capacity` (asked vs left per device),
a request larger than any node is `never-fits` — never "held by others" or a wait."""

from __future__ import annotations

from dra_mirror.service.model.records import (
    Allocation,
    AllocationResult,
    Capacity,
    DeviceEntry,
    RuleTaint,
)
from tests.diagnostics.builders import NIC, attrs, claim, entry, gpu, held, request
from tests.diagnostics.test_explain import explain, key, node, pod, reserved

DRAIN = {"key": "example.com/drain", "value": "maintenance", "effect": "NoSchedule"}
UNHEALTHY = {"key": "gpu.nvidia.com/unhealthy", "value": "xid-79", "effect": "NoExecute"}


def _busy_and_tainted(tainted: DeviceEntry) -> tuple[list, list]:
    busy_gpu = gpu(0)
    runner = pod("trainer", "busy")
    busy = reserved(claim("busy", request(), allocation=held(busy_gpu)), runner)
    return [busy_gpu, tainted], [busy]


def test_a_free_gpu_with_a_slice_taint_is_tainted_not_sharing_off() -> None:
    devices, claims = _busy_and_tainted(gpu(1, taints=(UNHEALTHY,)))
    d = explain(
        claim("c", request()), devices=devices, claims=claims, pods=[pod("trainer", "busy")]
    )
    assert d.verdict == "tainted"
    assert d.message == (
        "request gpu: the free matching devices are tainted and not tolerated: "
        "gpu.nvidia.com/unhealthy=xid-79:NoExecute (from its driver's ResourceSlice)"
    )


def test_a_rule_taint_names_the_device_taint_rule() -> None:
    tainted = gpu(1)
    tainted = DeviceEntry(
        key=tainted.key, device=tainted.device, slice=tainted.slice, node=tainted.node,
        rule_taints=(RuleTaint("drain-n1", DRAIN),),
    )  # fmt: skip
    devices, claims = _busy_and_tainted(tainted)
    d = explain(
        claim("c", request()), devices=devices, claims=claims, pods=[pod("trainer", "busy")]
    )
    assert d.verdict == "tainted"
    assert d.message.endswith("example.com/drain=maintenance:NoSchedule (DeviceTaintRule drain-n1)")


def test_a_tolerated_taint_is_no_cause() -> None:
    devices, claims = _busy_and_tainted(gpu(1, taints=(UNHEALTHY,)))
    tolerant = request(tolerations=({"key": "gpu.nvidia.com/unhealthy", "operator": "Exists"},))
    d = explain(claim("c", tolerant), devices=devices, claims=claims)
    assert d.verdict == "allocatable"


def _nic() -> DeviceEntry:
    return entry(
        "eth1",
        driver=NIC,
        shareable=True,
        attributes=attrs(NIC, interfaceName="eth1"),
        capacity={f"{NIC}/bandwidth": Capacity("10G")},
    )


def test_a_bandwidth_shortage_is_no_capacity_with_asked_and_left() -> None:
    nic = _nic()
    share = AllocationResult(
        request="nic", driver=NIC, pool=nic.key.pool, device="eth1", share_id="s-1",
        consumed_capacity={f"{NIC}/bandwidth": "8G"},
    )  # fmt: skip
    runner = pod("streamer", "streaming")
    streaming = reserved(
        claim("streaming", request("nic", "network-interface"), allocation=Allocation((share,))),
        runner,
    )
    wanted = request("nic", "network-interface", capacity={f"{NIC}/bandwidth": "5G"})
    d = explain(claim("c", wanted), devices=[nic], claims=[streaming], pods=[runner])
    assert d.verdict == "no-capacity"
    assert d.message == (
        "request nic: no matching device has the capacity asked left: "
        f"{NIC}/n1/eth1 (1 claims) has {NIC}/bandwidth 2G left, one share takes 5G"
    )
    assert d.requests[0].held_by  # the shares that took it are still named


def test_more_gpus_than_any_node_has_never_fits() -> None:
    devices = [gpu(i, n) for n in ("n1", "n2") for i in range(4)]
    d = explain(claim("c", request(count=9)), devices=devices, nodes=[node("n1"), node("n2")])
    assert d.verdict == "never-fits"
    assert d.message == (
        "request gpu: it asks for 9 devices, and the most any node it may use has is 4: "
        "no release will ever let it in"
    )
    # Five fit on no node either, even though eight devices exist.
    assert explain(claim("c", request(count=5)), devices=devices).verdict == "never-fits"
    # Four fit on one node: a wait, not never.
    busy = claim("busy", request(), allocation=held(devices[0], devices[4]))
    assert explain(claim("c", request(count=4)), devices=devices, claims=[busy]).verdict != (
        "never-fits"
    )


def test_an_unsatisfiable_constraint_is_never_fits_even_while_every_device_is_held() -> None:
    from dra_mirror.service.model.records import Constraint

    devices = [gpu(0), gpu(1)]
    runner = pod("trainer", "busy")
    busy = reserved(claim("busy", request(count=2), allocation=held(*devices)), runner)
    # Two GPUs with the same uuid: no two devices ever share one.
    same_uuid = claim(
        "c", request(count=2), constraints=(Constraint(match_attribute="gpu.nvidia.com/uuid"),)
    )
    d = explain(same_uuid, devices=devices, claims=[busy], pods=[runner])
    assert d.verdict == "never-fits"
    assert d.message.startswith(
        "it can never be placed on the nodes its pods may use, even with every holder gone: "
    )
    # The same claim without the constraint waits for the holder.
    assert (
        explain(claim("c", request(count=2)), devices=devices, claims=[busy], pods=[runner]).verdict
        == "sharing-off"
    )


def _created(p, at: str):
    import msgspec

    return msgspec.structs.replace(p, meta=msgspec.structs.replace(p.meta, created_at=at))


def test_a_wait_names_the_earlier_waiters_served_first() -> None:
    devices = [gpu(0), gpu(1)]
    runner = pod("trainer", "busy")
    busy = reserved(claim("busy", request(count=2), allocation=held(*devices)), runner)
    first = _created(
        pod("first", "first-claim", phase="Pending", node=None), "2026-01-01T10:00:00Z"
    )
    mine = _created(pod("second", "c", phase="Pending", node=None), "2026-01-01T10:05:00Z")
    later = _created(pod("third", "later", phase="Pending", node=None), "2026-01-01T10:09:00Z")
    other_class = _created(pod("cpu", "nics", phase="Pending", node=None), "2026-01-01T09:00:00Z")
    d = explain(
        claim("c", request()),
        devices=devices,
        claims=[busy, claim("first-claim", request()), claim("later", request()),
                claim("nics", request("nic", "network-interface"))],
        pods=[runner, first, mine, later, other_class],
    )  # fmt: skip
    assert d.ahead == [key("first", "Pod")]
    assert d.message.endswith("; pods ahead of it in the queue, served first: default/first")


def test_earlier_waiters_outside_the_askers_scope_are_counted_not_named() -> None:
    devices = [gpu(0)]
    runner = pod("trainer", "busy")
    busy = reserved(claim("busy", request(), allocation=held(*devices)), runner)
    first = _created(
        pod("first", "first-claim", phase="Pending", node=None, namespace="secret"),
        "2026-01-01T10:00:00Z",
    )
    mine = _created(pod("second", "c", phase="Pending", node=None), "2026-01-01T10:05:00Z")
    d = explain(
        claim("c", request()),
        devices=devices,
        claims=[busy, claim("first-claim", request(), namespace="secret")],
        pods=[runner, first, mine],
        visible=lambda namespace: namespace != "secret",
    )
    assert d.ahead == []
    assert "secret" not in d.message
    assert d.message.endswith("served first: 1 pod(s) outside your scope")
