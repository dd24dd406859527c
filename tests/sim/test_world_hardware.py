"""The device profiles against the real hardware capture in ../shared/hardware/h200 and the
API server's validation; MIG placements checked through the shared allocator's counters."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.placement import allocate
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import Allocation, ClaimRecord, ObjectKey
from dra_mirror.service.sim import hardware
from dra_mirror.service.sim.scheduler import device_entries
from dra_mirror.service.sim.store import ClusterStore

H200_GROUP = [hardware.DeviceGroup("nvidia-h200", 1)]


@pytest.fixture(scope="module")
def h200_files(shared_dir: Path) -> Path:
    return shared_dir / "hardware" / "h200"


def parse_lgip(text: str) -> dict[str, dict[str, float]]:
    """`nvidia-smi mig -lgip`: two table lines per profile."""
    rows = re.findall(
        r"\|\s+\d+\s+MIG (\S+)\s+(\d+)\s+\d+/(\d+)\s+([\d.]+)\s+\w+\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\n"
        r"\|\s+(\d+)\s+(\d+)\s+(\d+)\s+\|",
        text,
    )
    out = {}
    for name, gi, total, gib, sm, dec, enc, ce, jpeg, ofa in rows:
        out[name] = {
            "id": int(gi),
            "instances": int(total),
            "memory_mib": float(gib) * 1024,
            "sm": int(sm),
            "dec": int(dec),
            "enc": int(enc),
            "ce": int(ce),
            "jpeg": int(jpeg),
            "ofa": int(ofa),
        }
    return out


def parse_lgipp(text: str) -> dict[int, tuple[tuple[int, ...], int]]:
    out = {}
    for gi, starts, size in re.findall(
        r"Profile ID\s+(\d+) Placements?\s*: \{([\d,]+)\}:(\d+)", text
    ):
        out[int(gi)] = (tuple(int(s) for s in starts.split(",")), int(size))
    return out


def test_h200_attributes_match_nvidia_smi(h200_files: Path):
    lines = (h200_files / "nvidia-smi-query.csv").read_text().splitlines()
    row = next(csv.DictReader(lines, skipinitialspace=True))
    query = (h200_files / "nvidia-smi-q.txt").read_text()
    model = hardware.H200
    assert model.product_name == row["name"] == re.search(r"Product Name\s+: (.+)", query)[1]
    assert model.memory == row["memory.total [MiB]"].replace(" MiB", "Mi") == "143771Mi"
    assert model.architecture == re.search(r"Product Architecture\s+: (\S+)", query)[1]
    assert model.compute_capability == row["compute_cap"] + ".0"
    # The driver publishes versions through semver parsing: 580.159.04 -> 580.159.4.
    assert model.driver_version.split(".") == [
        str(int(p)) for p in row["driver_version"].split(".")
    ]
    assert model.cuda_driver_version == re.search(r"CUDA Version\s+: (\S+)", query)[1] + ".0"
    assert model.addressing_mode == re.search(r"Addressing Mode\s+: (\S+)", query)[1]
    assert model.real_uuid == row["uuid"]
    devices, _ = hardware.gpu_devices(model, 0, model.real_uuid)
    whole = devices[0]
    assert whole["name"] == "gpu-0"
    assert whole["attributes"]["uuid"] == {"string": "GPU-21f6a090-a7a1-f57a-27f8-e0da547eb43a"}
    assert whole["attributes"]["productName"] == {"string": "NVIDIA H200"}
    assert whole["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert whole["capacity"]["memory"] == {"value": "143771Mi"}
    bus = row["pci.bus_id"]  # 00000000:00:06.0 -> the 4-digit-domain form Kubernetes uses
    assert whole["attributes"][hardware.PCI_BUS_ID] == {"string": bus[4:].lower()}
    # topo.txt: "GPU0 ... NUMA Affinity 0"; published as the standard attribute (KEP-6072)
    numa = re.search(r"^GPU0\s+X\s+\S+\s+(\d+)", (h200_files / "topo.txt").read_text(), re.M)
    assert numa is not None
    assert whole["attributes"][hardware.NUMA_NODE] == {"int": int(numa[1])}
    assert all(d["attributes"][hardware.NUMA_NODE] == {"int": 0} for d in devices)  # MIG too


def test_mig_profiles_match_lgip_and_placements(h200_files: Path):
    lgip = parse_lgip((h200_files / "mig-lgip.txt").read_text())
    lgipp = parse_lgipp((h200_files / "mig-lgipp.txt").read_text())
    assert len(lgip) == 7 and len(lgipp) == 7
    ours = {p.name: p for p in hardware.H200.mig_profiles}
    assert set(ours) == set(lgip)
    for name, real in lgip.items():
        profile = ours[name]
        assert profile.gi_id == real["id"]
        assert (profile.starts, profile.size) == lgipp[real["id"]]
        assert profile.memory_mib == real["memory_mib"]
        assert profile.capacities() == {
            "multiprocessors": real["sm"],
            "copyEngines": real["ce"],
            "decoders": real["dec"],
            "encoders": real["enc"],
            "jpegEngines": real["jpeg"],
            "ofaEngines": real["ofa"],
        }
    counts = {p.name: len(p.starts) for p in hardware.H200.mig_profiles}
    assert counts == {
        "1g.18gb": 7, "1g.18gb+me": 7, "1g.35gb": 4, "2g.35gb": 3,
        "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1,
    }  # fmt: skip


def test_placements_become_counters():
    devices, counter_set = hardware.gpu_devices(hardware.H200, 2, "GPU-x")
    assert counter_set is not None and counter_set["name"] == "gpu-2-counter-set"
    counters = counter_set["counters"]
    assert {f"memory-slice-{i}" for i in range(8)} <= counters.keys()
    assert counters["multiprocessors"] == {"value": "132"}
    assert counters["copy-engines"] == {"value": "8"}
    assert counters["memory"] == {"value": "143771Mi"}
    by_name = {d["name"]: d for d in devices}
    assert len(devices) == 1 + 7 + 7 + 4 + 3 + 2 + 1 + 1
    mig = by_name["gpu-2-mig-3g71gb-9-4"]
    used = mig["consumesCounters"][0]
    assert used["counterSet"] == "gpu-2-counter-set"
    assert sorted(k for k in used["counters"] if k.startswith("memory-slice")) == [
        f"memory-slice-{i}" for i in (4, 5, 6, 7)
    ]
    assert used["counters"]["memory"] == {"value": "71424Mi"}
    assert mig["attributes"]["parentUUID"] == {"string": "GPU-x"}
    assert mig["attributes"]["profile"] == {"string": "3g.71gb"}
    assert mig["capacity"]["memorySlice4"] == {"value": "1"}
    assert "gpu-2-mig-1g18gb-me-20-6" in by_name  # "+me" made RFC 1123 as the driver does
    assert by_name["gpu-2-mig-7g141gb-0-0"]["capacity"]["memory"] == {"value": "140Gi"}
    assert by_name["gpu-2"]["consumesCounters"][0]["counters"] == counters


def test_slices_pass_validation_and_respect_limits():
    store = ClusterStore("hw", seed=1)
    groups = [hardware.DeviceGroup("nvidia-h200", 8), hardware.DeviceGroup("cni-nic", 2)]
    slices = hardware.node_slices("n1", "uid-1", groups, seed="s")
    gpu = [s for s in slices if s["spec"]["driver"] == hardware.GPU_DRIVER]
    assert all(s["spec"]["pool"]["resourceSliceCount"] == len(gpu) for s in gpu)
    assert sum(1 for s in gpu if "sharedCounters" in s["spec"]) == 1
    for s in gpu:
        assert not ("sharedCounters" in s["spec"] and "devices" in s["spec"])
        assert len(s["spec"].get("devices", [])) <= hardware.MAX_DEVICES_WITH_COUNTERS
    assert sum(len(s["spec"].get("devices", [])) for s in gpu) == 8 * 26
    for s in slices:
        created = store.create("resourceslices", s)  # validates as the API server does
        assert created["metadata"]["name"].startswith("n1-")
        assert created["metadata"]["ownerReferences"][0]["kind"] == "Node"
    nic = next(s for s in slices if s["spec"]["driver"] == hardware.NIC_DRIVER)
    eth0 = nic["spec"]["devices"][0]
    assert eth0["allowMultipleAllocations"] is True
    assert eth0["capacity"][f"{hardware.NIC_DRIVER}/bandwidth"]["requestPolicy"]["default"] == "1G"


def test_uuids_deterministic_and_real_one_first():
    a = hardware.node_slices("n1", "u", H200_GROUP * 2, seed="s", real_uuid=True)
    b = hardware.node_slices("n1", "u", H200_GROUP * 2, seed="s", real_uuid=True)
    c = hardware.node_slices("n1", "u", H200_GROUP * 2, seed="other")
    assert a == b
    uuids = [
        d["attributes"]["uuid"]["string"]
        for s in a
        for d in s["spec"].get("devices", [])
        if d["attributes"]["type"]["string"] == "gpu"
    ]
    assert uuids[0] == hardware.H200.real_uuid and uuids[1] != uuids[0]
    assert re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", uuids[1])
    assert a != c


def _h200_world() -> tuple[list, Ledger]:
    slices = [
        normalize(
            "ResourceSlice", {**s, "metadata": {**s["metadata"], "name": f"s{i}"}}, cluster="c"
        )
        for i, s in enumerate(hardware.node_slices("n1", "u", H200_GROUP, seed="s"))
    ]
    entries = [e for group in device_entries(slices).values() for e in group]
    return entries, Ledger(Holdings.build(entries, [], slices=slices))


def _claim(name: str, profile: str, count: int) -> ClaimRecord:
    raw = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {
            "deviceClassName": "mig.nvidia.com", "count": count,
            "selectors": [{"cel": {"expression":
                f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"}}]}}]}},
    }  # fmt: skip
    return normalize("ResourceClaim", raw, cluster="c")


@pytest.mark.parametrize(
    ("profile", "instances"),
    [("1g.18gb", 7), ("1g.18gb+me", 1), ("1g.35gb", 4), ("2g.35gb", 3), ("3g.71gb", 2),
     ("4g.71gb", 1), ("7g.141gb", 1)],
)  # fmt: skip
def test_counters_allow_exactly_the_instances_nvidia_smi_lists(profile: str, instances: int):
    """The Instances Total column of `mig -lgip` falls out of the counters alone."""
    classes = {
        "mig.nvidia.com": normalize(
            "DeviceClass", hardware.device_class("mig.nvidia.com"), cluster="c"
        )
    }
    entries, ledger = _h200_world()
    fits = allocate(
        _claim("a", profile, instances), classes=classes, devices=entries, ledger=ledger
    )
    assert isinstance(fits, Allocation)
    too_many = allocate(
        _claim("b", profile, instances + 1), classes=classes, devices=entries, ledger=ledger
    )
    assert not isinstance(too_many, Allocation)


def test_a_partition_blocks_the_whole_gpu():
    classes = {
        name: normalize("DeviceClass", hardware.device_class(name), cluster="c")
        for name in ("gpu.nvidia.com", "mig.nvidia.com")
    }
    entries, ledger = _h200_world()
    small = allocate(_claim("small", "1g.18gb", 1), classes=classes, devices=entries, ledger=ledger)
    assert isinstance(small, Allocation)
    whole = normalize(
        "ResourceClaim",
        {"metadata": {"name": "whole", "namespace": "ns"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
        cluster="c",
    )  # fmt: skip
    assert isinstance(allocate(whole, classes=classes, devices=entries, ledger=ledger), Allocation)
    small_key = ObjectKey("c", "ResourceClaim", "ns", "small")
    ledger.commit(small_key, small)
    assert not isinstance(
        allocate(whole, classes=classes, devices=entries, ledger=ledger), Allocation
    )
    ledger.release(small_key)
    assert isinstance(allocate(whole, classes=classes, devices=entries, ledger=ledger), Allocation)
