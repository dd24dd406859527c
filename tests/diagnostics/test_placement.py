"""The allocator, table by table: exclusive devices, ExactCount/All, firstAvailable, shareable
capacity with requestPolicy rounding, MIG counters, constraints, taints, admin access — and the
verdict with its counts whenever a claim cannot be placed."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from service.diagnostics.placement import Ledger, Unsatisfiable, allocate
from service.model.records import Allocation, Capacity, Constraint, DeviceEntry
from tests.diagnostics.builders import (
    CLASSES,
    NIC,
    NVIDIA,
    attrs,
    claim,
    claim_key,
    device_class,
    entry,
    gpu,
    h200_mig,
    held,
    request,
    sub,
)


def share_ids():
    counter = itertools.count()
    return lambda: f"share-{next(counter)}"


def place(c, devices, ledger=None, **kw: Any) -> Allocation | Unsatisfiable:
    ledger = ledger if ledger is not None else Ledger.build(devices, [])
    return allocate(c, classes=CLASSES, devices=devices, ledger=ledger, **kw)


def devices_of(allocation: Allocation | Unsatisfiable) -> list[str]:
    assert isinstance(allocation, Allocation), allocation
    return [f"{r.pool}/{r.device}" for r in allocation.results]


# --- exclusive devices, ExactCount and All ----------------------------------------------------


def test_exclusive_device_goes_to_one_claim_and_pins_the_node() -> None:
    devices = [gpu(0), gpu(1)]
    ledger = Ledger.build(devices, [claim("holder", request(), allocation=held(devices[0]))])
    allocation = place(claim("new", request()), devices, ledger)
    assert devices_of(allocation) == ["n1/gpu-1"]
    assert allocation.node_name == "n1"
    assert allocation.node_selector == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }
    assert allocation.allocated_at is None
    assert allocation.results[0].share_id is None and allocation.results[0].request == "gpu"


def test_exact_count_two_with_one_free_on_the_node() -> None:
    devices = [gpu(0), gpu(1), gpu(0, "n2")]
    ledger = Ledger.build(devices, [claim("holder", request(), allocation=held(devices[0]))])
    verdict = place(claim("pair", request(count=2)), devices, ledger, node="n1")
    assert isinstance(verdict, Unsatisfiable)
    [v] = verdict.requests
    assert (v.request, v.class_name, v.class_exists, v.class_matched) == (
        "gpu",
        "gpu.nvidia.com",
        True,
        2,
    )
    assert (v.free_or_shareable, v.nodes, v.needed) == (1, ["n1"], 2)
    assert v.held_by == [claim_key("holder")]
    assert v.verdict == "not-enough"
    assert verdict.node == "n1"
    assert verdict.message == (
        "cannot allocate all claims: request gpu: not enough free matching devices on one node"
    )
    # Two free GPUs exist in the cluster, but on two nodes: still not enough on one node.
    anywhere = place(claim("pair", request(count=2)), devices, ledger)
    assert isinstance(anywhere, Unsatisfiable)
    assert anywhere.requests[0].free_or_shareable == 2
    assert anywhere.requests[0].nodes == ["n1", "n2"]
    assert anywhere.requests[0].verdict == "not-enough"


def test_node_none_picks_the_first_node_that_fits() -> None:
    devices = [gpu(0), gpu(0, "n2"), gpu(1, "n2")]
    allocation = place(claim("pair", request(count=2)), devices)
    assert devices_of(allocation) == ["n2/gpu-0", "n2/gpu-1"]
    assert allocation.node_name == "n2"


def test_all_mode_takes_every_matching_device_or_nothing() -> None:
    devices = [gpu(0), gpu(1), gpu(2)]
    assert devices_of(place(claim("all", request(allocation_mode="All", count=0)), devices)) == [
        "n1/gpu-0",
        "n1/gpu-1",
        "n1/gpu-2",
    ]
    ledger = Ledger.build(devices, [claim("holder", request(), allocation=held(devices[1]))])
    verdict = place(claim("all", request(allocation_mode="All", count=0)), devices, ledger)
    assert isinstance(verdict, Unsatisfiable)
    v = verdict.requests[0]
    assert (v.free_or_shareable, v.needed, v.verdict, v.held_by) == (
        2,
        3,
        "not-enough",
        [claim_key("holder")],
    )


def test_every_matching_device_held() -> None:
    devices = [gpu(0), gpu(1)]
    ledger = Ledger.build(
        devices,
        [
            claim("a", request(), allocation=held(devices[0])),
            claim("b", request(), allocation=held(devices[1])),
        ],
    )
    verdict = place(claim("c", request()), devices, ledger)
    assert isinstance(verdict, Unsatisfiable)
    v = verdict.requests[0]
    assert (v.class_matched, v.free_or_shareable, v.verdict) == (2, 0, "all-held")
    assert v.held_by == [claim_key("a"), claim_key("b")]
    # Released: the device is free again.
    ledger.release(claim_key("b"))
    assert devices_of(place(claim("c", request()), devices, ledger)) == ["n1/gpu-1"]


# --- classes and selectors --------------------------------------------------------------------


def test_missing_class_and_class_without_devices() -> None:
    devices = [gpu(0)]
    missing = place(claim("c", request(device_class_name="no-such-class")), devices)
    assert isinstance(missing, Unsatisfiable)
    assert (missing.requests[0].class_exists, missing.requests[0].verdict) == (
        False,
        "class-missing",
    )
    assert "DeviceClass no-such-class does not exist" in missing.message
    none = place(claim("c", request(device_class_name="mig.nvidia.com")), devices)
    assert isinstance(none, Unsatisfiable)
    assert (none.requests[0].class_matched, none.requests[0].verdict) == (0, "no-devices")


def test_selectors_report_how_many_pass_each_in_order() -> None:
    devices = [gpu(i) for i in range(4)]
    selectors = (
        "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'",
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'",
        "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('1Gi'))",
    )
    verdict = place(claim("c", request(selectors=selectors)), devices)
    assert isinstance(verdict, Unsatisfiable)
    v = verdict.requests[0]
    assert v.class_matched == 4
    assert v.selector_matches == [(selectors[0], 4), (selectors[1], 0), (selectors[2], 0)]
    assert v.verdict == "no-match" and v.selector_errors == []


def test_a_selector_error_fails_the_claim_and_is_reported() -> None:
    # gpu-1 lacks the attribute the selector reads: Kubernetes aborts with a CEL runtime error.
    devices = [gpu(0), entry("gpu-1", attributes=attrs(NVIDIA, type="gpu"))]
    expression = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
    verdict = place(claim("c", request(selectors=(expression,))), devices)
    assert isinstance(verdict, Unsatisfiable)
    v = verdict.requests[0]
    assert v.verdict == "selector-error"
    [(failed, message)] = v.selector_errors
    assert failed == expression
    assert "east/gpu.nvidia.com/n1/gpu-1" in message and "productName" in message


def test_a_selector_that_does_not_compile() -> None:
    verdict = place(claim("c", request(selectors=("device.driver ==",))), [gpu(0)])
    assert isinstance(verdict, Unsatisfiable)
    assert verdict.requests[0].verdict == "selector-error"
    assert "Syntax error" in verdict.requests[0].selector_errors[0][1]


# --- firstAvailable ---------------------------------------------------------------------------


def test_first_available_falls_back_in_order() -> None:
    devices = [gpu(0)]
    bleeding = sub(
        "bleeding", selectors=("device.attributes['gpu.nvidia.com'].productName == 'B200'",)
    )
    older = sub("older")
    allocation = place(claim("c", request("gpu", None, first_available=(bleeding, older))), devices)
    assert isinstance(allocation, Allocation)
    assert [r.request for r in allocation.results] == ["gpu/older"]
    # Both fail: one verdict per subrequest.
    ledger = Ledger.build(devices, [claim("h", request(), allocation=held(devices[0]))])
    verdict = place(
        claim("c", request("gpu", None, first_available=(bleeding, older))), devices, ledger
    )
    assert isinstance(verdict, Unsatisfiable)
    assert [(v.request, v.verdict) for v in verdict.requests] == [
        ("gpu/bleeding", "no-match"),
        ("gpu/older", "all-held"),
    ]


# --- shareable devices with consumable capacity ------------------------------------------------


def nic(policy: dict[str, Any] | None, value: str = "10G") -> DeviceEntry:
    return entry(
        "eth1",
        driver=NIC,
        shareable=True,
        attributes=attrs(NIC, interfaceName="eth1"),
        capacity={
            f"{NIC}/bandwidth": Capacity(value, policy),
            f"{NIC}/queues": Capacity("8"),
        },
    )


def nic_request(bandwidth: str | None, queues: str | None = "1") -> Any:
    capacity = {}
    if bandwidth is not None:
        capacity[f"{NIC}/bandwidth"] = bandwidth
    if queues is not None:
        capacity[f"{NIC}/queues"] = queues
    return request("nic", "network-interface", capacity=capacity)


VALID_VALUES = {"default": "1G", "validValues": ["1G", "5G", "10G"]}
VALID_RANGE = {"default": "1G", "validRange": {"min": "1G", "max": "4G", "step": "500M"}}


@pytest.mark.parametrize(
    ("policy", "requested", "consumed"),
    [
        (VALID_VALUES, "2G", "5G"),  # smallest listed value >= request
        (VALID_VALUES, "5G", "5G"),
        (VALID_VALUES, None, "1G"),  # no request: the default
        (VALID_VALUES, "11G", None),  # above every listed value: not allocatable
        (VALID_RANGE, "200M", "1G"),  # below min: min
        (VALID_RANGE, "1200M", "1500M"),  # min + n*step, rounded up
        (VALID_RANGE, "4G", "4G"),
        (VALID_RANGE, "4100M", None),  # above max: not allocatable
        (None, "3G", "3G"),  # no policy: as requested
        (None, None, "10G"),  # no policy, no request: the whole capacity
    ],
)
def test_request_policy_rounding(policy, requested, consumed) -> None:
    devices = [nic(policy)]
    result = place(claim("c", nic_request(requested)), devices, share_id=share_ids())
    if consumed is None:
        assert isinstance(result, Unsatisfiable)
        assert result.requests[0].verdict == "no-capacity"
        return
    assert isinstance(result, Allocation), result
    [r] = result.results
    assert r.share_id == "share-0"
    # consumedCapacity lists every capacity of the device.
    assert r.consumed_capacity == {f"{NIC}/bandwidth": consumed, f"{NIC}/queues": "1"}


def test_shares_until_capacity_is_exhausted() -> None:
    devices = [nic(VALID_VALUES)]
    ledger = Ledger.build(devices, [])
    ids = share_ids()
    first = place(claim("a", nic_request("2G")), devices, ledger, share_id=ids)
    assert isinstance(first, Allocation)
    ledger.commit(claim_key("a"), first)
    second = place(claim("b", nic_request("5G")), devices, ledger, share_id=ids)
    assert isinstance(second, Allocation)
    assert second.results[0].share_id == "share-1"
    ledger.commit(claim_key("b"), second)
    # 10G - 5G - 5G = 0 left: even the smallest share does not fit.
    third = place(claim("c", nic_request("1G")), devices, ledger, share_id=ids)
    assert isinstance(third, Unsatisfiable)
    v = third.requests[0]
    assert (v.free_or_shareable, v.verdict) == (0, "all-held")
    assert v.held_by == [claim_key("a"), claim_key("b")]
    ledger.release(claim_key("a"))
    assert isinstance(
        place(claim("c", nic_request("1G")), devices, ledger, share_id=ids), Allocation
    )


def test_a_capacity_the_device_lacks_is_not_allocatable() -> None:
    devices = [nic(VALID_VALUES)]
    c = claim("c", request("nic", "network-interface", capacity={f"{NIC}/lanes": "1"}))
    verdict = place(c, devices)
    assert isinstance(verdict, Unsatisfiable) and verdict.requests[0].verdict == "no-capacity"


# --- partitionable devices (H200 MIG counters) ------------------------------------------------


def mig_request(profile: str, name: str = "mig", count: int = 1) -> Any:
    selector = f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"
    return request(name, "mig.nvidia.com", selectors=(selector,), count=count)


def test_mig_partitions_block_each_other_and_the_full_gpu() -> None:
    devices, counters = h200_mig()
    ledger = Ledger.build(devices, [], slices=[counters])
    first = place(claim("m1", mig_request("3g.71gb")), devices, ledger)
    assert devices_of(first) == ["n1/gpu-0-mig-3g71gb-0"]
    ledger.commit(claim_key("m1"), first)
    # A 3g takes memory slices 0-3: the only 4g placement (slice 0) is blocked.
    blocked = place(claim("m2", mig_request("4g.71gb")), devices, ledger)
    assert isinstance(blocked, Unsatisfiable)
    v = blocked.requests[0]
    assert (v.class_matched, v.selector_matches[0][1], v.free_or_shareable) == (18, 1, 0)
    assert (v.verdict, v.held_by) == ("all-held", [claim_key("m1")])
    # The full GPU is blocked too.
    full = place(claim("g", request()), devices, ledger)
    assert isinstance(full, Unsatisfiable) and full.requests[0].verdict == "all-held"
    # One more 3g fits (slices 4-7), then no 1g is left.
    second = place(claim("m3", mig_request("3g.71gb")), devices, ledger)
    assert devices_of(second) == ["n1/gpu-0-mig-3g71gb-4"]
    ledger.commit(claim_key("m3"), second)
    none = place(claim("m4", mig_request("1g.18gb")), devices, ledger)
    assert isinstance(none, Unsatisfiable)
    assert none.requests[0].held_by == [claim_key("m1"), claim_key("m3")]
    # Released, the full GPU fits again.
    ledger.release(claim_key("m1"))
    ledger.release(claim_key("m3"))
    assert devices_of(place(claim("g", request()), devices, ledger)) == ["n1/gpu-0"]


def test_counters_within_one_claim_add_up() -> None:
    devices, counters = h200_mig()
    ledger = Ledger.build(devices, [], slices=[counters])
    # Seven 1g.18gb fit (slices 0..6); an eighth does not.
    assert len(devices_of(place(claim("c", mig_request("1g.18gb", count=7)), devices, ledger))) == 7
    assert isinstance(
        place(claim("c", mig_request("1g.18gb", count=8)), devices, ledger), Unsatisfiable
    )
    # A 3g and a 4g together: the 4g needs slice 0, so the 3g must go to slice 4.
    both = place(
        claim("c", mig_request("4g.71gb", "a"), mig_request("3g.71gb", "b")), devices, ledger
    )
    assert devices_of(both) == ["n1/gpu-0-mig-4g71gb-0", "n1/gpu-0-mig-3g71gb-4"]


def test_counter_set_not_published_means_not_allocatable() -> None:
    devices, _ = h200_mig()
    verdict = place(claim("c", mig_request("1g.18gb")), devices, Ledger.build(devices, []))
    assert isinstance(verdict, Unsatisfiable) and verdict.requests[0].verdict == "no-capacity"


# --- constraints -------------------------------------------------------------------------------


def test_match_attribute_parent_uuid_backtracks_to_another_gpu() -> None:
    gpu0, set0 = h200_mig("n1", 0)
    gpu1, set1 = h200_mig("n1", 1)
    devices = gpu0 + gpu1
    # gpu-0 keeps one free 1g.18gb (slice 6): 4g at 0-3 and 2g at 4-5 are held.
    taken = [d for d in gpu0 if d.key.device in ("gpu-0-mig-4g71gb-0", "gpu-0-mig-2g35gb-4")]
    ledger = Ledger.build(
        devices, [claim("h", request(), allocation=held(*taken))], slices=[set0, set1]
    )
    two = claim(
        "c",
        mig_request("1g.18gb", "a"),
        mig_request("1g.18gb", "b"),
        constraints=(Constraint(match_attribute=f"{NVIDIA}/parentUUID"),),
    )
    allocation = place(two, devices, ledger)
    assert devices_of(allocation) == ["n1/gpu-1-mig-1g18gb-0", "n1/gpu-1-mig-1g18gb-1"]
    # Without the constraint the first free ones are taken, across both GPUs.
    loose = place(
        claim("c", mig_request("1g.18gb", "a"), mig_request("1g.18gb", "b")), devices, ledger
    )
    assert devices_of(loose) == ["n1/gpu-0-mig-1g18gb-6", "n1/gpu-1-mig-1g18gb-0"]


def test_constraint_that_cannot_hold_is_named() -> None:
    devices, counters = h200_mig()
    c = claim(
        "c",
        mig_request("1g.18gb", "a"),
        mig_request("1g.18gb", "b"),
        constraints=(Constraint(requests=("a", "b"), distinct_attribute=f"{NVIDIA}/parentUUID"),),
    )
    verdict = place(c, devices, Ledger.build(devices, [], slices=[counters]))
    assert isinstance(verdict, Unsatisfiable)
    assert [v.verdict for v in verdict.requests] == ["constraints", "constraints"]


def test_distinct_attribute() -> None:
    devices = [gpu(0), gpu(1)]
    c = claim("c", request(count=2), constraints=(Constraint(distinct_attribute=f"{NVIDIA}/uuid"),))
    assert devices_of(place(c, devices)) == ["n1/gpu-0", "n1/gpu-1"]
    same = claim(
        "c", request(count=2), constraints=(Constraint(distinct_attribute=f"{NVIDIA}/productName"),)
    )
    assert isinstance(place(same, devices), Unsatisfiable)


# --- taints and admin access -------------------------------------------------------------------


NO_SCHEDULE = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}


def test_tainted_devices_are_skipped_unless_tolerated() -> None:
    devices = [
        gpu(0, taints=(NO_SCHEDULE,)),
        gpu(1, taints=({"key": "info", "effect": "None"},)),
    ]
    assert devices_of(place(claim("c", request()), devices)) == ["n1/gpu-1"]
    verdict = place(claim("c", request(count=2)), devices)
    assert isinstance(verdict, Unsatisfiable) and verdict.requests[0].verdict == "not-enough"
    only_tainted = [devices[0]]
    verdict = place(claim("c", request()), only_tainted)
    assert isinstance(verdict, Unsatisfiable) and verdict.requests[0].verdict == "tainted"
    for toleration in (
        {"key": "maintenance", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        {"key": "maintenance", "operator": "Exists"},
        {"operator": "Exists"},
    ):
        tolerant = claim("c", request(tolerations=(toleration,)))
        assert devices_of(place(tolerant, only_tainted)) == ["n1/gpu-0"]
    wrong = claim("c", request(tolerations=({"key": "maintenance", "value": "false"},)))
    assert isinstance(place(wrong, only_tainted), Unsatisfiable)


def test_admin_access_ignores_holders_and_holds_nothing() -> None:
    devices = [gpu(0)]
    ledger = Ledger.build(devices, [claim("holder", request(), allocation=held(devices[0]))])
    admin = place(claim("admin", request(admin_access=True)), devices, ledger)
    assert isinstance(admin, Allocation) and admin.results[0].admin_access
    ledger.commit(claim_key("admin"), admin)
    ledger.release(claim_key("holder"))
    # The admin claim does not hold the device for anyone else.
    assert devices_of(place(claim("next", request()), devices, ledger)) == ["n1/gpu-0"]


# --- network-attached devices and configuration -----------------------------------------------


def test_network_attached_devices_pin_no_node() -> None:
    devices = [entry("nic-0", node=None, driver=NIC, attributes=attrs(NIC, interfaceName="eth0"))]
    allocation = place(claim("c", request("nic", "network-interface")), devices, node="n7")
    assert devices_of(allocation) == ["network/nic-0"]
    assert (allocation.node_name, allocation.node_selector) == (None, None)


def test_class_and_claim_configuration_are_merged() -> None:
    opaque = {"opaque": {"driver": NVIDIA, "parameters": {"sharing": "MPS"}}}
    classes = dict(CLASSES, **{"gpu.nvidia.com": device_class("gpu.nvidia.com", config=(opaque,))})
    c = claim("c", request())
    c = type(c)(meta=c.meta, requests=c.requests, config=({"requests": ["gpu"], **opaque},))
    allocation = allocate(c, classes=classes, devices=[gpu(0)], ledger=Ledger())
    assert isinstance(allocation, Allocation)
    assert allocation.config == (
        {"source": "FromClass", "requests": ["gpu"], **opaque},
        {"source": "FromClaim", "requests": ["gpu"], **opaque},
    )


def test_ledger_commit_replaces_and_never_mutated_by_allocate() -> None:
    devices = [gpu(0), gpu(1)]
    ledger = Ledger.build(devices, [])
    place(claim("c", request()), devices, ledger)
    assert ledger.holds == {} and ledger.exclusive == {}
    ledger.commit(claim_key("c"), held(devices[0]))
    ledger.commit(claim_key("c"), held(devices[1]))
    assert ledger.exclusive == {devices[1].key: claim_key("c")}
    assert ledger.holders(devices[0].key) == []


def test_requests_of_one_claim_share_a_device_while_capacity_lasts() -> None:
    devices = [nic(VALID_VALUES)]

    def nic_req(name: str) -> Any:
        return request(
            name, "network-interface", capacity={f"{NIC}/bandwidth": "5G", f"{NIC}/queues": "1"}
        )

    two = place(claim("c", nic_req("a"), nic_req("b")), devices, share_id=share_ids())
    assert isinstance(two, Allocation)
    assert [(r.request, r.device, r.share_id) for r in two.results] == [
        ("a", "eth1", "share-0"),
        ("b", "eth1", "share-1"),
    ]
    three = place(claim("c", nic_req("a"), nic_req("b"), nic_req("c")), devices)
    assert isinstance(three, Unsatisfiable)
    # An exclusive device serves one request only.
    assert isinstance(place(claim("c", request("a"), request("b")), [gpu(0)]), Unsatisfiable)
    assert devices_of(place(claim("c", request("a"), request("b")), [gpu(0), gpu(1)])) == [
        "n1/gpu-0",
        "n1/gpu-1",
    ]
