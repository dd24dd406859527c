"""A ResourcePoolStatusRequest answered as kube-controller-manager would answer it — its pools
counted by the oracle from the raw objects (tests.oracle.pools) — shown by the mirror beside
its own status with no difference, over the `shared-gpus` world (dozens of shares per H200:
each device allocated once) and the `dra-only` world."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from dra_mirror.service.model.kinds import BY_PLURAL as RESOURCES
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from tests.feeding import feed
from tests.oracle.pools import PoolTruth
from tests.oracle.truth import answer

GPU = "gpu.nvidia.com"
KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "Pod", "Node")
PLURALS = {r.kind: r.plural for r in RESOURCES.values()}
QUERY = """{ resourcePoolStatusRequests {
  name poolCount pools { poolName allocatedDevices differences { field reported mirrored } }
  unreportedPools { poolName } } }"""


def answered(pools: list[PoolTruth]) -> dict[str, Any]:
    """The request and the status the controller writes: pools sorted by driver, then name."""
    ordered = sorted(pools, key=lambda p: (p.driver, p.pool))
    written = []
    for p in ordered:
        pool: dict[str, Any] = {"driver": p.driver, "poolName": p.pool, "generation": p.generation}
        counts = {
            "resourceSliceCount": p.resource_slice_count, "nodeName": p.node_name,
            "totalDevices": p.total, "allocatedDevices": p.allocated,
            "availableDevices": p.available, "unavailableDevices": p.unavailable,
            "validationError": p.validation_error,
        }  # fmt: skip
        written.append(pool | {k: v for k, v in counts.items() if v is not None})
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "ResourcePoolStatusRequest",
        "metadata": {"name": "gpus", "uid": "uid-gpus"},
        "spec": {"driver": GPU},
        "status": {"poolCount": len(written), "pools": written,
                   "conditions": [{"type": "Complete", "status": "True", "reason": "Calculated",
                                   "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}]},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("scenario", "cluster"), [("shared-gpus", "shared"), ("dra-only", "dra-only")]
)
async def test_an_answer_computed_from_the_raw_objects_agrees_with_the_mirror(scenario, cluster):
    store = build_world(load_scenario(scenario)).stores[cluster]
    raw = [o for kind in KINDS for o in store.list(PLURALS[kind])]
    truth = answer(raw)
    pools = [p for (driver, _), p in truth.pools.items() if driver == GPU]
    if scenario == "shared-gpus":  # 35, 24 and 4 shares: each H200 counts as one allocated
        assert {p.pool: p.allocated for p in pools} == {
            "shared-h200-0": 1, "shared-h200-1": 1, "shared-h200-2": 1,
        }  # fmt: skip
    mirror = MemoryStore()
    records = [normalize(o["kind"], o, cluster="c") for o in [*raw, answered(pools)]]
    await feed(mirror, "c", upserts=records, at="2026-12-01T00:00:00Z")
    app = compose_app(Settings(), store=mirror)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            body = (await http.post("/graphql", json={"query": QUERY})).json()
    assert "errors" not in body, body
    [request] = body["data"]["resourcePoolStatusRequests"]
    assert request["poolCount"] == len(pools) > 0
    assert all(p["differences"] == [] for p in request["pools"]), request["pools"]
    assert request["unreportedPools"] == []
