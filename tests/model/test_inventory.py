"""Derived device states, decided in the model: free, held exclusively, shared (N claims,
capacity remaining) or blocked (counters consumed by sibling partitions)."""

from __future__ import annotations

import pytest

from dra_mirror.service.model.inventory import counters_free, device_status, remaining_capacity
from dra_mirror.service.model.records import (
    BLOCKED,
    FREE,
    HELD,
    SHARED,
    AllocationRef,
    CounterSet,
    Device,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
)
from tests.model.builders import DRIVER, device

CLAIM = ObjectKey("east", "ResourceClaim", "ns", "c1")
OTHER = ObjectKey("east", "ResourceClaim", "ns", "c2")
GPU_COUNTERS = (CounterSet(name="gpu-0", counters={"memory": "80Gi", "slices": "7"}),)
WHOLE = device("gpu-0", consumes={"gpu-0": {"memory": "80Gi", "slices": "7"}})
MIG_3G = device("gpu-0-mig-3g", consumes={"gpu-0": {"memory": "40Gi", "slices": "4"}})
MIG_3G_B = device("gpu-0-mig-3g-b", consumes={"gpu-0": {"memory": "40Gi", "slices": "3"}})
MIG_1G = device("gpu-0-mig-1g", consumes={"gpu-0": {"memory": "10Gi", "slices": "1"}})


def hold(claim: ObjectKey = CLAIM, *, admin: bool = False, **consumed: str) -> AllocationRef:
    return AllocationRef(
        claim=claim,
        request="r",
        share_id="s" if consumed else None,
        consumed_capacity={f"gpu.nvidia.com/{k}": v for k, v in consumed.items()},
        admin_access=admin,
    )


def short(claim: ObjectKey = CLAIM, **consumed: str) -> AllocationRef:
    """A share whose consumedCapacity names capacities without their domain."""
    return AllocationRef(claim=claim, request="r", share_id="s", consumed_capacity=consumed)


def entry(d: Device) -> DeviceEntry:
    return DeviceEntry(
        key=DeviceKey("east", DRIVER, "n1", d.name),
        device=d,
        slice=ObjectKey("east", "ResourceSlice", "", "s"),
        node="n1",
    )


@pytest.mark.parametrize(
    ("target", "allocated", "holds", "status"),
    [
        (device("g"), (), (), FREE),
        (device("g"), (), (hold(),), HELD),
        (device("g", shareable=True), (), (), FREE),
        (device("g", shareable=True), (), (hold(memory="10Gi"),), SHARED),
        (device("g", shareable=True), (), (hold(memory="10Gi"), hold(OTHER, memory="5Gi")), SHARED),
        # Partitions of one GPU: a 3g (4 slices) leaves room for a 1g but not for the whole GPU
        # nor for the other 3g needing 4 slices... which fits 3: exactly the 7 slices.
        (WHOLE, (MIG_3G,), (), BLOCKED),
        (MIG_1G, (MIG_3G,), (), FREE),
        (MIG_3G_B, (MIG_3G,), (), FREE),
        (MIG_3G_B, (MIG_3G, MIG_1G), (), BLOCKED),
        (MIG_3G, (WHOLE,), (), BLOCKED),
        (WHOLE, (WHOLE,), (hold(),), HELD),  # held beats blocked
        (MIG_1G, (), (), FREE),
        # Admin access observes: it neither holds nor shares the device.
        (device("g"), (), (hold(admin=True),), FREE),
        (device("g", shareable=True), (), (hold(admin=True), hold(memory="1Gi")), SHARED),
        (device("g"), (), (hold(admin=True), hold(OTHER)), HELD),
        (WHOLE, (MIG_3G,), (hold(admin=True),), BLOCKED),
    ],
)
def test_device_status(target, allocated, holds, status) -> None:
    free = counters_free(GPU_COUNTERS, allocated)
    assert device_status(target, list(holds), counters_free=free) == status


def test_counters_of_an_unpublished_set_block_nothing() -> None:
    free = counters_free((), [MIG_3G])
    assert device_status(WHOLE, [], counters_free=free) == FREE
    assert device_status(WHOLE, [], counters_free=None) == FREE


def test_counters_free_subtracts_each_allocated_device() -> None:
    free = counters_free(GPU_COUNTERS, [MIG_3G, MIG_1G])
    assert free == {"gpu-0": {"memory": 30 * 1024**3, "slices": 2}}


@pytest.mark.parametrize(
    ("target", "holds", "remaining"),
    [
        (device("g", memory="80Gi"), (), {"gpu.nvidia.com/memory": "80Gi"}),
        (device("g", memory="80Gi"), (hold(),), {"gpu.nvidia.com/memory": "0"}),
        (
            device("g", memory="80Gi", shareable=True),
            (hold(memory="10Gi"), hold(OTHER, memory="30Gi")),
            {"gpu.nvidia.com/memory": "40Gi"},
        ),
        (
            device("g", memory="143771Mi", shareable=True),
            (hold(memory="71885Mi"),),
            {"gpu.nvidia.com/memory": "71886Mi"},
        ),
        (
            device("g", memory="1Gi", shareable=True),
            (hold(memory="2Gi"),),
            {"gpu.nvidia.com/memory": "0"},
        ),
        # consumedCapacity as the scheduler writes the device's own spelling: `memory` of
        # gpu.nvidia.com is gpu.nvidia.com/memory (QualifiedName).
        (
            device("g", memory="143771Mi", shareable=True),
            (short(memory="40Gi"), short(OTHER, memory="20Gi")),
            {"gpu.nvidia.com/memory": "82331Mi"},
        ),
        # Admin access takes no capacity, exclusive or shared.
        (device("g", memory="80Gi"), (hold(admin=True),), {"gpu.nvidia.com/memory": "80Gi"}),
        (
            device("g", memory="80Gi", shareable=True),
            (hold(admin=True, memory="80Gi"), hold(OTHER, memory="10Gi")),
            {"gpu.nvidia.com/memory": "70Gi"},
        ),
    ],
)
def test_remaining_capacity(target, holds, remaining) -> None:
    assert remaining_capacity(entry(target), list(holds)) == remaining
