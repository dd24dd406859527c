"""Benchmark: one two-clause device selector over 40,000 devices (evaluations per second).

    .venv/bin/python bench/cel_select.py [--devices 40000]

Prints, for the NVIDIA class selector
`device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'`
and a capacity selector (`memory.compareTo(quantity('80Gi')) >= 0 && productName == …`):

* first  — a fresh selector's first pass (`Selector.matches`): these selectors read the device
  only through literal references, so each distinct tuple of the values read is evaluated once
  and the rest is a lookup;
* again  — the same question again;
* eval   — CEL evaluation of every device (`Selector.evaluate`), inputs already built — what a
  selector the projection cannot cover costs on its first pass;
* inputs — building each device's CEL input (once per Device object);
* floor  — the same test written as a Python expression over the same dicts, in the same run,
  so the ratio survives a noisy machine.

Then findDevices' case (issue 6: ≤ 1 s): the same two-clause selector over `--clusters` (10)
clusters x 40,000 devices through `Selector.select`, first and again.

A benchmark, not a test: it asserts only that the engines agree.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dra_mirror.service.diagnostics.cel import compile_selector, device_data
from dra_mirror.service.model.records import (
    Attribute,
    Capacity,
    Device,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
)

NVIDIA = "gpu.nvidia.com"
CLASS_SELECTOR = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)
CAPACITY_SELECTOR = (
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    " && device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
)


def make_devices(n: int, cluster: str = "bench") -> list[DeviceEntry]:
    """n devices: 8 per node; every 4th is a MIG partition, every 5th node an A100 node."""
    out = []
    for i in range(n):
        node, index = divmod(i, 8)
        mig = i % 4 == 3
        product = "NVIDIA A100 80GB PCIe" if node % 5 == 0 else "NVIDIA H200"
        attributes = {
            f"{NVIDIA}/type": Attribute("string", "mig" if mig else "gpu"),
            f"{NVIDIA}/uuid": Attribute("string", f"GPU-{i:08x}"),
            f"{NVIDIA}/productName": Attribute("string", product),
            f"{NVIDIA}/architecture": Attribute("string", "Hopper"),
            f"{NVIDIA}/driverVersion": Attribute("version", "580.159.4"),
            f"{NVIDIA}/cudaComputeCapability": Attribute("version", "9.0.0"),
        }
        memory = "16Gi" if mig else ("81920Mi" if node % 5 == 0 else "143771Mi")
        device = Device(
            name=f"gpu-{index}",
            attributes=attributes,
            capacity={f"{NVIDIA}/memory": Capacity(memory)},
        )
        out.append(
            DeviceEntry(
                key=DeviceKey(cluster, NVIDIA, f"node-{node}", device.name),
                device=device,
                slice=ObjectKey(cluster, "ResourceSlice", "", f"node-{node}-{NVIDIA}"),
                node=f"node-{node}",
            )
        )
    return out


def _floor_class(d: dict) -> bool:
    return d["driver"] == NVIDIA and d["attributes"][NVIDIA]["type"] == "gpu"


def _floor_capacity(d: dict) -> bool:
    from fractions import Fraction

    return (
        Fraction(d["capacity"][NVIDIA]["memory"]["k8s.quantity"]) >= 80 * 1024**3
        and d["attributes"][NVIDIA]["productName"] == "NVIDIA H200"
    )


def run(n: int) -> None:
    devices = make_devices(n)
    for expression, floor in ((CLASS_SELECTOR, _floor_class), (CAPACITY_SELECTOR, _floor_capacity)):
        selector = compile_selector(expression)
        timings = {}
        start = time.perf_counter()
        matched = sum(selector.matches(e.device, e.key.driver) for e in devices)
        timings["first"] = time.perf_counter() - start
        start = time.perf_counter()
        again = sum(selector.matches(e.device, e.key.driver) for e in devices)
        timings["again"] = time.perf_counter() - start
        start = time.perf_counter()
        inputs = [device_data(e.device, e.key.driver) for e in devices]
        timings["inputs"] = time.perf_counter() - start
        start = time.perf_counter()
        evaluated = sum(selector.evaluate(e.device, e.key.driver) is True for e in devices)
        timings["eval"] = time.perf_counter() - start
        start = time.perf_counter()
        floor_matched = sum(floor(d) for d in inputs)
        timings["floor"] = time.perf_counter() - start
        assert matched == again == evaluated == floor_matched
        print(f"selector: {expression}")
        print(f"  devices {n:,}, matched {matched:,}")
        for label in ("first", "again", "eval", "inputs", "floor"):
            print(
                f"  {label:6s} {timings[label] * 1000:8.1f} ms  {n / timings[label]:12,.0f} devices/s"
            )
        print(f"  eval / floor: {timings['eval'] / timings['floor']:.1f}x")


def find(n: int, clusters: int) -> None:
    fleet = [make_devices(n, f"cluster-{c}") for c in range(clusters)]
    total = n * clusters
    expression = CAPACITY_SELECTOR.replace("'NVIDIA H200'", "'NVIDIA A100 80GB PCIe'")
    selector = compile_selector(expression)
    for label in ("first", "again"):
        start = time.perf_counter()
        found = sum(len(selector.select(devices)[0]) for devices in fleet)
        elapsed = time.perf_counter() - start
        print(
            f"findDevices {label}: {clusters} clusters x {n:,} devices, {found:,} found in "
            f"{elapsed * 1000:.0f} ms ({total / elapsed:,.0f} devices/s)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=40_000)
    parser.add_argument("--clusters", type=int, default=10)
    args = parser.parse_args()
    run(args.devices)
    find(args.devices, args.clusters)
