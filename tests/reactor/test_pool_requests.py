"""ResourcePoolStatusRequests (KEP-5677, resource.k8s.io/v1alpha3 from 1.36) through the real
watchers: watched where the cluster serves them, their answer (status) mirrored as the
controller writes it, nothing of them where the kind is not served."""

from __future__ import annotations

from pathlib import Path

from dra_mirror.service.model.records import PoolStatusRequestRecord
from dra_mirror.service.reactor.reactor import run_reactors
from dra_mirror.service.sim.run import ClusterSpec
from dra_mirror.service.stores.memory import MemoryStore
from tests.clusters.conftest import eventually
from tests.clusters.world import serving, small_world
from tests.reactor.test_reactor import SETTINGS, Statuses, mirrored

KIND = "ResourcePoolStatusRequest"


def pool_request(name: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"driver": "gpu.nvidia.com", "limit": 5},
    }


async def test_requests_are_watched_where_served_and_their_answer_mirrored(
    tmp_path: Path,
) -> None:
    worlds = {name: small_world(name, nodes=1) for name in ("k35", "k37")}
    worlds["k37"].create("resourcepoolstatusrequests", pool_request("gpus"))
    specs = [
        ClusterSpec(worlds["k35"], versions=("v1",), kubernetes=35),
        ClusterSpec(worlds["k37"], versions=("v1",), kubernetes=37),
    ]
    store = MemoryStore()
    async with serving(tmp_path, *specs) as (_sim, connections):
        async with await run_reactors(
            connections, open_index=store.open_index, sinks=[store], status_sink=Statuses(),
            settings=SETTINGS, tune_gc=False,
        ) as reactors:  # fmt: skip
            await reactors.wait_synced()
            served = {s.name: s.optional[KIND] for s in reactors.statuses()}
            assert served == {"k35": None, "k37": "v1alpha3"}

            async def requests(name: str) -> list[PoolStatusRequestRecord]:
                found = (await mirrored(store, name)).values()
                return [r for r in found if isinstance(r, PoolStatusRequestRecord)]

            [unanswered] = await requests("k37")
            assert (unanswered.driver, unanswered.limit, unanswered.answered) == (
                "gpu.nvidia.com", 5, False,
            )  # fmt: skip
            # kube-controller-manager answers through the status subresource
            current = worlds["k37"].get("resourcepoolstatusrequests", None, "gpus")
            assert current is not None
            status = {"poolCount": 1, "pools": [{"driver": "gpu.nvidia.com", "poolName": "k37-0",
                      "generation": 1, "totalDevices": 8, "allocatedDevices": 0,
                      "availableDevices": 8, "unavailableDevices": 0}],
                      "conditions": [{"type": "Complete", "status": "True", "reason": "Done",
                                      "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}]}  # fmt: skip
            worlds["k37"].update(
                "resourcepoolstatusrequests", {**current, "status": status}, subresource="status"
            )

            async def answered() -> bool:
                found = await requests("k37")
                return bool(found) and found[0].answered

            await eventually(answered)
            [done] = await requests("k37")
            assert done.pool_count == 1 and done.pools[0].total == 8
            assert await requests("k35") == []
