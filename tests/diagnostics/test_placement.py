"""The allocator, table by table: exclusive devices, ExactCount/All, firstAvailable, taints,
admin access, network-attached devices (capacity, counters and constraints: test_placement_capacity) — and the
verdict with its counts whenever a claim cannot be placed."""

from __future__ import annotations

from dra_mirror.service.diagnostics.placement import Ledger, Unsatisfiable, allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.records import Allocation
from tests.diagnostics.builders import (
    CLASSES,
    NIC,
    NVIDIA,
    attrs,
    claim,
    claim_key,
    device_class,
    devices_of,
    entry,
    gpu,
    held,
    place,
    request,
    sub,
)

# --- exclusive devices, ExactCount and All ----------------------------------------------------


def test_exclusive_device_goes_to_one_claim_and_pins_the_node() -> None:
    devices = [gpu(0), gpu(1)]
    ledger = Ledger(
        Holdings.build(devices, [claim("holder", request(), allocation=held(devices[0]))])
    )
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
    ledger = Ledger(
        Holdings.build(devices, [claim("holder", request(), allocation=held(devices[0]))])
    )
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
    ledger = Ledger(
        Holdings.build(devices, [claim("holder", request(), allocation=held(devices[1]))])
    )
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
    ledger = Ledger(
        Holdings.build(
            devices,
            [
                claim("a", request(), allocation=held(devices[0])),
                claim("b", request(), allocation=held(devices[1])),
            ],
        )
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
    ledger = Ledger(Holdings.build(devices, [claim("h", request(), allocation=held(devices[0]))]))
    verdict = place(
        claim("c", request("gpu", None, first_available=(bleeding, older))), devices, ledger
    )
    assert isinstance(verdict, Unsatisfiable)
    assert [(v.request, v.verdict) for v in verdict.requests] == [
        ("gpu/bleeding", "no-match"),
        ("gpu/older", "all-held"),
    ]


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
    ledger = Ledger(
        Holdings.build(devices, [claim("holder", request(), allocation=held(devices[0]))])
    )
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
    ledger = Ledger(Holdings.build(devices, []))
    place(claim("c", request()), devices, ledger)
    assert not any(ledger.taken(d.key) for d in devices)
    ledger.commit(claim_key("c"), held(devices[0]))
    ledger.commit(claim_key("c"), held(devices[1]))
    assert [ledger.taken(d.key) for d in devices] == [False, True]
    assert ledger.holders(devices[1].key) == [claim_key("c")]
    assert ledger.holders(devices[0].key) == []


def test_a_claim_without_requests_gets_an_empty_allocation() -> None:
    allocation = place(claim("empty"), [gpu(0)], node="n1")
    assert allocation == Allocation(results=(), node_name=None, node_selector=None, config=())


def test_bad_input_from_a_cluster_is_refused_not_raised() -> None:
    devices = [gpu(0)]
    unparsable = claim("c", request(capacity={"gpu.nvidia.com/memory": "lots"}))
    verdict = place(unparsable, devices)
    assert isinstance(verdict, Unsatisfiable) and verdict.requests[0].verdict == "no-capacity"
    unknown_mode = place(claim("c", request(allocation_mode="Some")), devices)
    assert isinstance(unknown_mode, Unsatisfiable)
    assert unknown_mode.requests[0].verdict == "unsupported"


def test_all_mode_verdict_looks_node_by_node() -> None:
    devices = [gpu(0, "n1"), gpu(1, "n1"), gpu(0, "n2")]
    ledger = Ledger(Holdings.build(devices, [claim("h", request(), allocation=held(devices[0]))]))
    # n2's only GPU is free: All can be satisfied there.
    assert devices_of(
        place(claim("all", request(allocation_mode="All", count=0)), devices, ledger)
    ) == ["n2/gpu-0"]
    verdict = place(
        claim("all", request(allocation_mode="All", count=0)), devices, ledger, node="n1"
    )
    assert isinstance(verdict, Unsatisfiable) and verdict.requests[0].verdict == "not-enough"
    # When another request blocks the claim, the All request is still reported as fitting.
    both = claim("all", request(allocation_mode="All", count=0), request("mig", "mig.nvidia.com"))
    verdict = place(both, devices, ledger)
    assert isinstance(verdict, Unsatisfiable)
    assert [v.verdict for v in verdict.requests] == ["fits", "no-devices"]
