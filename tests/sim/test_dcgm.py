"""The simulated dcgm-exporter: the exporter's names, labels and text format, driven by the
demo's workloads, and served per node with Prometheus' HTTP service discovery."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dra_mirror.service.sim.dcgm import Exporters
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.scenario import build_world, load_scenario

# render_metrics.go's GPU template, in its order; MIG instances add GPU_I_PROFILE, GPU_I_ID
GPU_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname"]
DRA_LABELS = {
    "pod",
    "namespace",
    "container",
    "dra_claim_name",
    "dra_claim_namespace",
    "dra_driver_name",
    "dra_pool_name",
    "dra_device_name",
}


@pytest.fixture(scope="module")
def east() -> Exporters:
    return Exporters(build_world(load_scenario("demo")).stores["east"])


def samples(text: str, name: str) -> list:
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # the parser names a counter's family without its _total suffix; DCGM's have none
    return list(families[name].samples)


def test_every_counter_has_help_type_and_the_gpu_labels(east):
    text = east.metrics("east-h200-0") or ""
    names = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert names == {
        "DCGM_FI_DEV_GPU_UTIL": "gauge",
        "DCGM_FI_DEV_FB_USED": "gauge",
        "DCGM_FI_DEV_POWER_USAGE": "gauge",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gauge",
    }
    first = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    keys = [part.split("=")[0] for part in first[first.index("{") + 1 :].split(",")][:6]
    assert keys == GPU_LABELS
    assert 'pci_bus_id="00000000:00:06.0"' in first and 'device="nvidia0"' in first


def test_a_busy_trainer_and_an_idle_notebook(east):
    util = samples(east.metrics("east-h200-1") or "", "DCGM_FI_DEV_GPU_UTIL")
    trainers = [s for s in util if s.labels.get("namespace") == "training"]
    assert trainers and {s.value for s in trainers} == {92}
    assert DRA_LABELS <= trainers[0].labels.keys()
    notebook = [
        s
        for s in samples(east.metrics("east-a100-0") or "", "DCGM_FI_DEV_GPU_UTIL")
        if s.labels.get("pod", "").startswith("notebook-")
    ]
    assert [s.value for s in notebook] == [0]
    assert notebook[0].labels["dra_claim_namespace"] == "research"


def test_a_shared_gpu_is_one_series_per_pod_with_the_devices_value(east):
    shared = []
    for node in east.nodes():
        util = samples(east.metrics(node) or "", "DCGM_FI_DEV_GPU_UTIL")
        shared += [s for s in util if s.labels.get("dra_claim_name") == "shared-h200"]
    assert len(shared) == 3  # three replicas, one device
    assert len({s.labels["UUID"] for s in shared}) == 1
    assert {s.value for s in shared} == {90}  # 3 x 30 %


def test_a_mig_slice_is_busy_while_its_parent_reads_zero(east):
    text = east.metrics("east-h200-1") or ""
    active = samples(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    instances = [s for s in active if "GPU_I_ID" in s.labels]
    assert instances and {s.value for s in instances} == {0.85}
    for s in instances:
        assert s.labels["dra_mig_device_uuid"].startswith("MIG-")
        assert s.labels["dra_mig_profile"] == s.labels["GPU_I_PROFILE"]
    parent = instances[0].labels["UUID"]
    whole = [
        s
        for s in samples(text, "DCGM_FI_DEV_GPU_UTIL")
        if s.labels["UUID"] == parent and "GPU_I_ID" not in s.labels
    ]
    assert [s.value for s in whole] == [0]
    assert not [s for s in active if s.labels["UUID"] == parent and "GPU_I_ID" not in s.labels]


def test_a_node_labelled_off_has_no_exporter():
    west = Exporters(build_world(load_scenario("demo")).stores["west"])
    assert "west-h200-0" not in west.nodes()
    assert west.metrics("west-h200-0") is None


def test_energy_integrates_power_over_the_clock():
    now = [100.0]
    exporters = Exporters(build_world(load_scenario("demo")).stores["east"], clock=lambda: now[0])

    def energy_and_power(node: str, uuid: str) -> tuple[float, float]:
        text = exporters.metrics(node) or ""
        mj = next(
            s.value
            for s in samples(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
            if s.labels["UUID"] == uuid
        )
        watts = next(
            s.value for s in samples(text, "DCGM_FI_DEV_POWER_USAGE") if s.labels["UUID"] == uuid
        )
        return mj, watts

    uuid = next(
        s.labels["UUID"]
        for s in samples(exporters.metrics("east-h200-1") or "", "DCGM_FI_DEV_GPU_UTIL")
        if s.labels.get("namespace") == "training"
    )
    start, watts = energy_and_power("east-h200-1", uuid)
    assert start == 0
    assert watts == pytest.approx(80.84 + (700 - 80.84) * 0.92, abs=0.01)
    now[0] += 10.0
    after, _ = energy_and_power("east-h200-1", uuid)
    assert after == pytest.approx(watts * 10 * 1000, abs=1)


async def test_served_per_node_with_http_service_discovery(tmp_path: Path):
    world = build_world(load_scenario("demo"))
    async with Simulator(world.specs, kubeconfig_path=tmp_path / "kubeconfig") as sim:
        base = sim.url("east")
        async with httpx.AsyncClient(base_url=base) as http:
            groups = (await http.get("/sim/dcgm/targets")).json()
            assert [g["labels"]["node"] for g in groups] == [
                "east-a100-0",
                "east-h200-0",
                "east-h200-1",
            ]
            assert {g["targets"][0] for g in groups} == {base.removeprefix("http://")}
            path = groups[0]["labels"]["__metrics_path__"]
            answer = await http.get(path)
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
            assert "DCGM_FI_DEV_GPU_UTIL{" in answer.text
            missing = await http.get("/sim/dcgm/nodes/east-legacy-0/metrics")
            assert missing.status_code == 404
