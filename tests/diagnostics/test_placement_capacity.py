"""The allocator, table by table: shareable capacity with requestPolicy rounding, H200 MIG
counters, and constraints (matchAttribute parentUUID, distinctAttribute)."""

from __future__ import annotations

from typing import Any

import pytest

from dra_mirror.service.diagnostics.placement import Ledger, Unsatisfiable
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.records import Allocation, Capacity, Constraint, DeviceEntry
from tests.diagnostics.builders import (
    NIC,
    NVIDIA,
    attrs,
    claim,
    claim_key,
    devices_of,
    entry,
    gpu,
    h200_mig,
    held,
    place,
    request,
    share_ids,
)

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
    ledger = Ledger(Holdings.build(devices, []))
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
    # The shares took the bandwidth: no capacity left (asked vs left), their claims named.
    assert (v.free_or_shareable, v.verdict) == (0, "no-capacity")
    assert [str(s) for s in v.short] == [
        f"{NIC}/n1/eth1 (2 claims) has {NIC}/bandwidth 0 left, one share takes 1G"
    ]
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
    ledger = Ledger(Holdings.build(devices, [], slices=[counters]))
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
    ledger = Ledger(Holdings.build(devices, [], slices=[counters]))
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
    verdict = place(
        claim("c", mig_request("1g.18gb")), devices, Ledger(Holdings.build(devices, []))
    )
    assert isinstance(verdict, Unsatisfiable) and verdict.requests[0].verdict == "no-capacity"


# --- constraints -------------------------------------------------------------------------------


def test_match_attribute_parent_uuid_backtracks_to_another_gpu() -> None:
    gpu0, set0 = h200_mig("n1", 0)
    gpu1, set1 = h200_mig("n1", 1)
    devices = gpu0 + gpu1
    # gpu-0 keeps one free 1g.18gb (slice 6): 4g at 0-3 and 2g at 4-5 are held.
    taken = [d for d in gpu0 if d.key.device in ("gpu-0-mig-4g71gb-0", "gpu-0-mig-2g35gb-4")]
    ledger = Ledger(
        Holdings.build(
            devices, [claim("h", request(), allocation=held(*taken))], slices=[set0, set1]
        )
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
    verdict = place(c, devices, Ledger(Holdings.build(devices, [], slices=[counters])))
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


def test_a_search_that_runs_out_of_budget_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import dra_mirror.service.diagnostics.placement as placement

    monkeypatch.setattr(placement, "SEARCH_BUDGET", 50)
    devices = [gpu(i) for i in range(20)]
    # Every pair has the same productName: no three distinct ones exist, found only by trying.
    c = claim(
        "c", request(count=3), constraints=(Constraint(distinct_attribute=f"{NVIDIA}/productName"),)
    )
    verdict = place(c, devices)
    assert isinstance(verdict, Unsatisfiable)
    assert verdict.requests[0].verdict == "search-limit"
    monkeypatch.setattr(placement, "SEARCH_BUDGET", 20_000)
    monkeypatch.setattr(placement, "TOTAL_BUDGET", 100)
    many_nodes = [gpu(i, f"n{n}") for n in range(10) for i in range(20)]
    verdict = place(c, many_nodes)
    assert isinstance(verdict, Unsatisfiable) and verdict.requests[0].verdict == "search-limit"
