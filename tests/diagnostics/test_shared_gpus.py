"""Dozens of shares on one H200 (the `shared-gpus` scenario, NVIDIA ConsumableShares): holders,
remaining capacity in 1Mi steps, the allocator and explainClaim's words."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dra_mirror.service.diagnostics.cluster import pods_eligible_nodes
from dra_mirror.service.diagnostics.placement import allocate
from dra_mirror.service.diagnostics.verdicts import Unsatisfiable
from dra_mirror.service.model.records import Allocation, ClaimRecord
from dra_mirror.service.sim.scenario import build_world, load_scenario
from tests.diagnostics.builders import claim, request
from tests.diagnostics.conftest import Cluster, mirror

MI = 1 << 20
H200_MIB = 143771


@pytest.fixture(scope="module")
def shared() -> Cluster:
    return mirror(build_world(load_scenario("shared-gpus")).stores["shared"])


def gpu_on(cluster: Cluster, node: str):
    [entry] = [e for e in cluster.devices if e.node == node]
    return entry


def test_holders_and_remaining_capacity_with_dozens_of_shares(shared: Cluster):
    memory = gpu_on(shared, "shared-h200-0")
    assert len(shared.ledger.holders(memory.key)) == 35
    assert shared.ledger.remaining_capacity(memory) == {
        "gpu.nvidia.com/memory": Fraction((H200_MIB - 35 * 4096) * MI)
    }
    unlimited = gpu_on(shared, "shared-h200-1")
    assert len(shared.ledger.holders(unlimited.key)) == 24
    assert shared.ledger.remaining_capacity(unlimited) == {
        "gpu.nvidia.com/memory": Fraction(H200_MIB * MI)  # "unlimited" shares consume 0
    }
    counted = gpu_on(shared, "shared-h200-2")
    assert shared.ledger.remaining_capacity(counted)["gpu.nvidia.com/shares"] == 0


def one(capacity: dict[str, str] | None = None) -> ClaimRecord:
    return claim("more", request(capacity=capacity or {}), namespace="inference")


def place(cluster: Cluster, c: ClaimRecord, node: str) -> Allocation | Unsatisfiable:
    return allocate(
        c, classes=cluster.classes, devices=cluster.devices, ledger=cluster.ledger, node=node
    )


def test_the_allocator_fits_what_is_left_to_the_mebibyte(shared: Cluster):
    fits = place(shared, one({"memory": "411Mi"}), "shared-h200-0")
    assert isinstance(fits, Allocation)
    assert fits.results[0].consumed_capacity == {"memory": "411Mi"}
    assert isinstance(place(shared, one({"memory": "412Mi"}), "shared-h200-0"), Unsatisfiable)
    # A claim that names no memory takes the policy's default: the whole GPU under "memory"
    # (no room), nothing under "unlimited" (always room).
    assert isinstance(place(shared, one(), "shared-h200-0"), Unsatisfiable)
    free = place(shared, one(), "shared-h200-1")
    assert isinstance(free, Allocation)
    assert free.results[0].consumed_capacity == {"memory": "0"}
    assert isinstance(place(shared, one(), "shared-h200-2"), Unsatisfiable)


@pytest.mark.parametrize(
    ("namespace", "says"),
    [
        ("inference", "gpu.nvidia.com/shared-h200-0/gpu-0 (35 claims) has gpu.nvidia.com/memory "
                      "411Mi left, one share takes 4Gi"),
        ("batch", "gpu.nvidia.com/shared-h200-2/gpu-0 (4 claims) has gpu.nvidia.com/shares 0 "
                  "left, one share takes 1"),
    ],
)  # fmt: skip
def test_explain_says_what_the_shared_gpu_lacks(shared: Cluster, namespace: str, says: str):
    waiting = [
        c for k, c in shared.claims.items() if k.namespace == namespace and c.allocation is None
    ]
    assert waiting
    for c in waiting:
        users = [
            p
            for p in shared.pods
            if p.meta.namespace == namespace and any(r.claim_name == c.meta.name for r in p.claims)
        ]
        diagnosis = shared.explain(c, eligible_nodes=pods_eligible_nodes(users, shared.nodes))
        assert diagnosis.verdict == "all-held"
        assert diagnosis.message.endswith(f"; shared devices too full: {says}")
