"""The join of dcgm-exporter's readings to devices: whole GPUs, MIG devices, a partitioned
GPU weighted by its instances, shared devices, a node without an exporter (unknown, not 0 %),
energy from the counter — read from the simulated exporter's own text."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dra_mirror.service.model.dcgm import METRICS, readings
from dra_mirror.service.model.identity import DeviceKey
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import DeviceEntry
from dra_mirror.service.model.utilization import (
    MJ_PER_KWH,
    busy_below_since,
    increase,
    join,
    weighed,
)
from dra_mirror.service.sim.dcgm import Exporters
from dra_mirror.service.sim.scenario import build_world, load_scenario


def scrape(exporters: Exporters, at: float, into: dict) -> None:
    for node in exporters.nodes():
        for family in text_string_to_metric_families(exporters.metrics(node) or ""):
            for sample in family.samples:
                key = tuple(sorted(sample.labels.items()))
                # the family's name is the series' as written (the parser adds _total)
                into.setdefault(family.name, {}).setdefault(key, []).append((at, sample.value))


@pytest.fixture(scope="module")
def demo():
    world = build_world(load_scenario("demo"))
    now = [0.0]
    series: dict = {}
    exporters = {c: Exporters(world.stores[c], clock=lambda: now[0]) for c in ("east", "west")}
    for at in (0.0, 60.0, 120.0):
        now[0] = at
        for e in exporters.values():
            scrape(e, at, series)
    joined = {}
    for cluster in ("east", "west"):
        entries = []
        for raw in world.stores[cluster].iter_objects("resourceslices"):
            record = normalize("ResourceSlice", raw, cluster=cluster)
            for device in record.devices:
                key = DeviceKey(cluster, record.driver, record.pool.name, device.name)
                entries.append(
                    DeviceEntry(key=key, device=device, slice=None, node=record.node_name)
                )
        found = readings({m: [(dict(k), v) for k, v in series.get(m, {}).items()] for m in METRICS})
        joined.update(join(weighed(entries, found), found))
    return world, joined


def claim_devices(world, cluster: str, prefix: str) -> list[DeviceKey]:
    out = []
    for claim in world.stores[cluster].iter_objects("resourceclaims"):
        allocation = (claim.get("status") or {}).get("allocation")
        if claim["metadata"]["name"].startswith(prefix) and allocation:
            for r in allocation["devices"]["results"]:
                out.append(DeviceKey(cluster, r["driver"], r["pool"], r["device"]))
    return out


def test_a_whole_gpu_reads_its_engine_activity(demo):
    world, joined = demo
    [trainer, *_] = claim_devices(world, "east", "trainer-")
    u = joined[trainer]
    assert u.busy == pytest.approx(92.0)
    assert u.source == "gr-engine-active"
    assert u.memory_used_mib and u.memory_used_mib > 0


def test_an_idle_notebook_reads_zero_not_unknown(demo):
    world, joined = demo
    [notebook] = claim_devices(world, "east", "notebook-hr")  # the workload's, not the manual
    assert joined[notebook].busy == 0.0


def test_a_shared_gpu_is_one_device_busy_for_every_share(demo):
    world, joined = demo
    [shared] = claim_devices(world, "east", "shared-h200")
    assert joined[shared].busy == pytest.approx(90.0)


def test_mig_devices_by_their_uuid_and_the_parent_weighted_by_its_instances(demo):
    world, joined = demo
    migs = claim_devices(world, "east", "mig-worker-")
    assert len(migs) == 3
    assert {round(joined[k].busy or 0, 6) for k in migs} == {85.0}
    assert {joined[k].source for k in migs} == {"gpu-instance"}
    parent = DeviceKey("east", "gpu.nvidia.com", migs[0].pool, migs[0].device.split("-mig-")[0])
    whole = joined[parent]
    assert whole.source == "gpu-instances"
    # 1g.18gb + 1g.18gb + 3g.71gb: 1 + 1 + 4 of the H200's 8 memory slices, each 85 % busy
    weights = 6 / 8
    assert whole.busy == pytest.approx(85.0 * weights)
    # the MIG devices share the GPU's energy by weight
    parts = sum(joined[k].energy_kwh or 0 for k in migs)
    assert parts == pytest.approx((whole.energy_kwh or 0) * weights)


def test_a_node_without_an_exporter_is_unknown_not_zero(demo):
    _world, joined = demo
    west = [k for k in joined if k.cluster == "west" and k.pool == "west-h200-0"]
    assert west and all(joined[k].busy is None and not joined[k].known for k in west)
    assert all(joined[k].energy_kwh is None for k in west)


def test_energy_is_the_counters_increase(demo):
    world, joined = demo
    [trainer, *_] = claim_devices(world, "east", "trainer-")
    watts = 80.84 + (700 - 80.84) * 0.92
    assert joined[trainer].energy_kwh == pytest.approx(watts * 120 * 1000 / MJ_PER_KWH, rel=1e-3)


def test_a_counter_reset_counts_from_zero():
    assert increase([(0, 10.0), (1, 15.0), (2, 3.0), (3, 4.0)]) == 5 + 3 + 1


def test_since_when_below_a_threshold():
    points = [(0, 50.0), (60, 2.0), (120, 1.0), (180, 0.0)]
    assert busy_below_since(points, 5.0) == 60
    assert busy_below_since([*points, (240, 9.0)], 5.0) is None
    assert busy_below_since([], 5.0) is None
