"""PodGroups (scheduling.k8s.io, KEP-5729) through the real watchers: watched where a cluster
serves them (v1alpha2 in 1.36, v1beta1 from 1.37; beta and off by default in 1.37), mirrored
without them elsewhere, and each optional kind's served version kept on its own (a cluster
serving DeviceTaintRules but not PodGroups must say both)."""

from __future__ import annotations

from pathlib import Path

from dra_mirror.service.model.records import PodGroupClaim, PodGroupRecord
from dra_mirror.service.reactor.reactor import run_reactors
from dra_mirror.service.sim.run import ClusterSpec
from dra_mirror.service.stores.memory import MemoryStore
from tests.clusters.conftest import eventually
from tests.clusters.world import pod_group, serving, small_world
from tests.reactor.test_reactor import SETTINGS, Statuses, mirrored


async def test_pod_groups_are_watched_where_served_and_each_optional_kind_keeps_its_version(
    tmp_path: Path,
) -> None:
    worlds = {name: small_world(name, nodes=1) for name in ("k35", "k36", "k37", "off37")}
    worlds["k36"].create("podgroups", pod_group("trainers", version="v1alpha2",
                                                 claim_name="claim-0"))  # fmt: skip
    worlds["k37"].create("podgroups", pod_group("trainers", template_name="gpu-template",
                                                generated="trainers-shared-gpus-x7k2p"))  # fmt: skip
    specs = [
        ClusterSpec(worlds["k35"], versions=("v1",), kubernetes=35),
        ClusterSpec(worlds["k36"], versions=("v1",), kubernetes=36),
        ClusterSpec(worlds["k37"], versions=("v1",), kubernetes=37),
        # 1.37 with DRAWorkloadResourceClaims' API switched off: rules served, groups not
        ClusterSpec(worlds["off37"], versions=("v1",), kubernetes=37,
                    optional_versions={"PodGroup": ()}),
    ]  # fmt: skip
    store = MemoryStore()
    async with serving(tmp_path, *specs) as (_sim, connections):
        async with await run_reactors(
            connections, open_index=store.open_index, sinks=[store], status_sink=Statuses(),
            settings=SETTINGS, tune_gc=False,
        ) as reactors:  # fmt: skip
            await reactors.wait_synced()
            await eventually(lambda: all(s.synced for s in reactors.statuses()))
            found = {s.name: s.optional for s in reactors.statuses()}
            requests = {"k35": None, "k36": "v1alpha3", "k37": "v1alpha3", "off37": "v1alpha3"}
            assert found == {
                name: {**kinds, "ResourcePoolStatusRequest": requests[name]}
                for name, kinds in {
                    "k35": {"DeviceTaintRule": "v1alpha3", "PodGroup": None},
                    "k36": {"DeviceTaintRule": "v1beta2", "PodGroup": "v1alpha2"},
                    "k37": {"DeviceTaintRule": "v1", "PodGroup": "v1beta1"},
                    "off37": {"DeviceTaintRule": "v1", "PodGroup": None},
                }.items()
            }
            assert all(s.connected and s.dra_served for s in reactors.statuses())
            groups = {
                name: [r for k, r in (await mirrored(store, name)).items() if k.kind == "PodGroup"]
                for name in worlds
            }
    assert {name: len(found) for name, found in groups.items()} == {
        "k35": 0, "k36": 1, "k37": 1, "off37": 0,
    }  # fmt: skip
    (k36,), (k37,) = groups["k36"], groups["k37"]
    assert isinstance(k36, PodGroupRecord) and isinstance(k37, PodGroupRecord)
    assert k36.claims == (PodGroupClaim("shared-gpus", "claim-0", None),)
    assert k37.claims == (
        PodGroupClaim("shared-gpus", "trainers-shared-gpus-x7k2p", "gpu-template"),
    )
    assert (k37.policy, k37.min_count, k37.workload) == ("Gang", 2, "training")
    assert k36.workload == "training"
