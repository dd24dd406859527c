"""DeviceTaintRules through the real watchers: each cluster's rules are watched at the newest
version it serves for them (v1alpha3 up to 1.35, v1beta2 from 1.36, v1 from 1.37), apart from
the other DRA kinds; a cluster serving none is mirrored without them and syncs all the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dra_mirror.service.model.records import DeviceKey
from dra_mirror.service.reactor.reactor import run_reactors
from dra_mirror.service.sim.run import ClusterSpec
from dra_mirror.service.stores.memory import MemoryStore
from tests.clusters.conftest import eventually
from tests.clusters.world import DRIVER, serving, small_world
from tests.reactor.test_reactor import SETTINGS, Statuses, mirrored


def drain_rule(name: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": pool},
            "taint": {"key": "example.com/drain", "effect": "NoExecute"},
        },
    }


def _rules(store: MemoryStore, cluster: str, pool: str, device: str = "gpu-0") -> list[str]:
    index = store.index(cluster)
    assert index is not None
    entry = index.device(DeviceKey(cluster, DRIVER, pool, device))
    return [t.rule for t in entry.rule_taints] if entry is not None else []


async def test_each_cluster_watches_rules_at_its_own_version_or_not_at_all(tmp_path: Path) -> None:
    worlds = {name: small_world(name, nodes=1) for name in ("k32", "k35", "k36", "k37")}
    for name in ("k35", "k36", "k37"):
        worlds[name].create("devicetaintrules", drain_rule("drain", "node-0"))
    specs = [
        ClusterSpec(world, versions=("v1",), kubernetes=int(name[1:]))
        for name, world in worlds.items()
    ]
    store, statuses = MemoryStore(), Statuses()
    async with serving(tmp_path, *specs) as (_sim, connections):
        async with await run_reactors(
            connections,
            open_index=store.open_index,
            sinks=[store],
            status_sink=statuses,
            settings=SETTINGS,
            tune_gc=False,
        ) as reactors:
            await reactors.wait_synced()  # k32 serves no DeviceTaintRule: it syncs without
            for name in worlds:
                held = await mirrored(store, name)
                assert len([k for k in held if k.kind == "DeviceTaintRule"]) == (name != "k32")
            assert {n: _rules(store, n, "node-0") for n in worlds} == {
                "k32": [], "k35": ["drain"], "k36": ["drain"], "k37": ["drain"],
            }  # fmt: skip
            await eventually(lambda: all(s.synced for s in reactors.statuses()))
            found = {
                s.name: (s.api_version, {"DeviceTaintRule": s.optional["DeviceTaintRule"]})
                for s in reactors.statuses()
            }
            assert found == {
                "k32": ("v1", {"DeviceTaintRule": None}),
                "k35": ("v1", {"DeviceTaintRule": "v1alpha3"}),
                "k36": ("v1", {"DeviceTaintRule": "v1beta2"}),
                "k37": ("v1", {"DeviceTaintRule": "v1"}),
            }
            assert all(s.connected and s.dra_served for s in reactors.statuses())

            worlds["k37"].delete("devicetaintrules", "", "drain")  # an admin lifts the taint
            worlds["k36"].create("devicetaintrules", drain_rule("later", "node-0"))
            await eventually(lambda: _rules(store, "k37", "node-0") == [])
            await eventually(lambda: _rules(store, "k36", "node-0") == ["drain", "later"])


async def test_class_and_cel_selectors_count_where_served_and_are_gone_from_1_35(
    tmp_path: Path,
) -> None:
    """1.34 serves a v1alpha3 rule's deviceClassName and selectors; 1.35 tombstoned them, so
    the same rule written there selects by driver and pool alone."""
    worlds = {name: small_world(name, nodes=1) for name in ("k34", "k35")}
    for world in worlds.values():
        by_class, by_cel = drain_rule("by-class", "node-0"), drain_rule("by-cel", "node-0")
        by_class["spec"]["deviceSelector"]["deviceClassName"] = "absent.example.com"
        uuid = 'device.attributes["gpu.example.com"].uuid == "GPU-node-0-1"'
        by_cel["spec"]["deviceSelector"]["selectors"] = [{"cel": {"expression": uuid}}]
        world.create("devicetaintrules", by_class)
        world.create("devicetaintrules", by_cel)
    specs = [ClusterSpec(w, versions=("v1",), kubernetes=int(n[1:])) for n, w in worlds.items()]
    store = MemoryStore()
    async with serving(tmp_path, *specs) as (_sim, connections):
        async with await run_reactors(
            connections, open_index=store.open_index, sinks=[store], status_sink=Statuses(),
            settings=SETTINGS, tune_gc=False,
        ) as reactors:  # fmt: skip
            await reactors.wait_synced()
            found = {
                (name, device): _rules(store, name, "node-0", device)
                for name in worlds
                for device in ("gpu-0", "gpu-1")
            }
    assert found == {
        ("k34", "gpu-0"): [], ("k34", "gpu-1"): ["by-cel"],
        ("k35", "gpu-0"): ["by-cel", "by-class"], ("k35", "gpu-1"): ["by-cel", "by-class"],
    }  # fmt: skip
