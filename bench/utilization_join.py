"""Bench: the utilisation join of a 500-node fleet over an hour of dcgm readings.

500 nodes x 8 H200 (every fourth GPU partitioned into three MIG instances, the rest whole),
an hour of readings at 60 s (61 points a series) for dcgm-exporter's five metrics, as the
Prometheus range queries of `service.utilization.source` answer them (one series per GPU or
GPU instance). Printed, next to a floor measured in the same run on the same bytes:

* floor: `orjson.loads` of the five answers (what any client of Prometheus pays);
* parse: the answers into series (`prometheus._series`), then `dcgm.readings`;
* join: `utilization.weighed` (the model's weights of partitioned GPUs' devices) and
  `utilization.join` over every GPU device of the fleet.

Run: `.venv/bin/python bench/utilization_join.py [--nodes 500]`. Speed belongs here, not in
tests.
"""

from __future__ import annotations

import argparse
import time

import orjson

from dra_mirror.service.model.dcgm import (
    FB_USED,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    METRICS,
    POWER_USAGE,
    TOTAL_ENERGY,
    readings,
)
from dra_mirror.service.model.identity import DeviceKey
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import DeviceEntry
from dra_mirror.service.model.utilization import join, weighed
from dra_mirror.service.sim import hardware
from dra_mirror.service.utilization.prometheus import _series

CLUSTER = "bench"
MIG_PROFILES = ("1g.18gb", "1g.18gb", "3g.71gb")


def fleet(nodes: int) -> list[DeviceEntry]:
    entries = []
    for n in range(nodes):
        node = f"node-{n}"
        group = hardware.DeviceGroup(hardware.H200.key, 8)
        slices = hardware.node_slices(node, f"uid-{n}", [group], seed="bench")
        for s, raw in enumerate(slices):
            raw["metadata"]["name"] = f"{node}-gpu-{s}"  # the API server names them
            record = normalize("ResourceSlice", raw, cluster=CLUSTER)
            for device in record.devices:
                key = DeviceKey(CLUSTER, record.driver, record.pool.name, device.name)
                entries.append(DeviceEntry(key=key, device=device, slice=None, node=node))
    return entries


def answers(entries: list[DeviceEntry], start: float) -> dict[str, bytes]:
    times = [start + 60 * i for i in range(61)]
    series: dict[str, list[dict]] = {m: [] for m in METRICS}

    def add(metric: str, labels: dict, value: float) -> None:
        values = [[t, repr(value)] for t in times]
        series[metric].append({"metric": labels, "values": values})

    gpus = [e for e in entries if e.device.attributes[f"{hardware.GPU_DRIVER}/type"].value == "gpu"]
    for i, gpu in enumerate(gpus):
        uuid = gpu.device.uuid or ""
        labels = {"UUID": uuid}
        add(POWER_USAGE, labels, 300.0)
        series[TOTAL_ENERGY].append(
            {
                "metric": labels,
                "values": [[t, repr(1e9 + 18_000_000 * k)] for k, t in enumerate(times)],
            }
        )
        if i % 4 == 0:
            add(GPU_UTIL, labels, 0.0)
            for gi, profile in enumerate(MIG_PROFILES):
                instance = {**labels, "GPU_I_ID": str(gi), "GPU_I_PROFILE": profile}
                add(GR_ENGINE_ACTIVE, instance, 0.5)
                add(FB_USED, instance, 1000.0)
        else:
            add(GPU_UTIL, labels, 40.0)
            add(GR_ENGINE_ACTIVE, labels, 0.4)
            add(FB_USED, labels, 9000.0)
    return {
        m: orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": r}})
        for m, r in series.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    entries = fleet(args.nodes)
    bodies = answers(entries, 1_800_000_000.0)
    size = sum(len(b) for b in bodies.values())
    print(f"{args.nodes} nodes: {len(entries)} GPU devices, {size / 1e6:.1f} MB of answers")
    best = {"floor": float("inf"), "parse": float("inf"), "join": float("inf")}
    for _ in range(args.rounds):
        started = time.perf_counter()
        decoded = {m: orjson.loads(b) for m, b in bodies.items()}
        best["floor"] = min(best["floor"], time.perf_counter() - started)
        started = time.perf_counter()
        decoded = {m: orjson.loads(b) for m, b in bodies.items()}
        found = readings({m: _series(d["data"]["result"]) for m, d in decoded.items()})
        best["parse"] = min(best["parse"], time.perf_counter() - started)
        started = time.perf_counter()
        joined = join(weighed(entries, found), found)
        best["join"] = min(best["join"], time.perf_counter() - started)
    known = sum(u.known for u in joined.values())
    print(f"joined {len(joined)} devices ({known} with readings)")
    for name, seconds in best.items():
        ratio = "" if name == "floor" else f" ({seconds / best['floor']:.1f}x the floor)"
        print(f"{name}: {seconds:.3f} s{ratio}")
    total = best["parse"] + best["join"]
    print(f"answer from the bytes: {total:.3f} s ({total / best['floor']:.1f}x the floor)")


if __name__ == "__main__":
    main()
