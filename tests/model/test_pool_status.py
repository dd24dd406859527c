"""KEP-5677 pool status from slices and claims: generations, incomplete pools, clusters apart,
shared and unpublished holdings, taints."""

from __future__ import annotations

from msgspec.structs import replace

from dra_mirror.service.model.pool_status import PoolStatus, pool_statuses
from tests.model.builders import CLUSTER, DRIVER, claim, device, slice_

TAINT = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}


def test_each_pool_of_each_cluster_counts_its_highest_generation() -> None:
    old = slice_("n1-old", pool="n1", node="n1", devices=(device("gpu-0"),), generation=1)
    tainted = replace(device("gpu-2"), taints=(TAINT,))
    ignored = replace(device("gpu-3"), taints=({"key": "k", "effect": "None"},))
    new = slice_("n1-new", pool="n1", node="n1", generation=2,
                 devices=(device("gpu-0"), device("gpu-1"), tainted, ignored))  # fmt: skip
    half = slice_("n2-a", pool="n2", node="n2", devices=(device("gpu-0"),), count=2)
    west = slice_("w1", pool="n1", node="w1", devices=(device("gpu-0"),), cluster="west")
    claims = [
        claim("a", devices=(("n1", "gpu-0"),), shares={"gpu-0": {}}),
        claim("b", devices=(("n1", "gpu-0"), ("n1", "gpu-9")), shares={"gpu-0": {}}),
    ]  # a shared device counts once; gpu-9, published by no slice, still counts
    assert pool_statuses([old, new, half, west], claims) == [
        PoolStatus(CLUSTER, DRIVER, "n1", 2, "n1", 1, 4, 2, 1, 1),
        PoolStatus(CLUSTER, DRIVER, "n2", 0, "n2", None, None, None, None, None,
                   f"PoolIncomplete: pool {DRIVER}/n2 is incomplete: observed 1/2 slices at "
                   "generation 0"),
        PoolStatus("west", DRIVER, "n1", 0, "w1", 1, 1, 0, 1, 0),
    ]  # fmt: skip
