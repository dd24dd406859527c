"""Benchmark: how fast the simulated scheduler places and releases pods.

    .venv/bin/python bench/sim_schedule.py [--nodes 100] [--gpus 8] [--mig]

Builds an empty cluster of `--nodes` x `--gpus` GPUs (H100, or H200 with its MIG partitions
with `--mig`), then creates one pod per GPU through the store's client path (the pod asks for
a whole GPU, or a 1g.18gb MIG slice with `--mig`): the controller makes the template claim,
allocates it with the shared allocator, reserves it and starts the pod. Then deletes every
pod (unreserve, delete the claim, deallocate). Prints pods/s for both, against a floor
measured in the same run: the same creates and deletes on a store with no controller.
Figures only (the DRA scheduler benchmark upstream does tens to hundreds of claims/s).
"""

from __future__ import annotations

import argparse
import time

from dra_mirror.service.sim.scenario import build_world, parse_scenario
from dra_mirror.service.sim.shapes import pod_object


def scenario(nodes: int, gpus: int, mig: bool) -> dict:
    profile = "nvidia-h200" if mig else "nvidia-h100-80gb-hbm3"
    klass, selector = (
        ("mig.nvidia.com", "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'")
        if mig
        else ("gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].type == 'gpu'")
    )
    return {
        "seed": 1,
        "clusters": [
            {
                "name": "bench",
                "namespaces": ["jobs"],
                "deviceClasses": ["gpu.nvidia.com", "mig.nvidia.com"],
                "nodes": [
                    {
                        "name": "node-{i}",
                        "count": nodes,
                        "allocatable": {"pods": "500"},
                        "devices": [{"profile": profile, "count": gpus, "mig": mig}],
                    }
                ],
                "objects": [
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaimTemplate",
                        "metadata": {"name": "one", "namespace": "jobs"},
                        "spec": {
                            "spec": {
                                "devices": {
                                    "requests": [
                                        {
                                            "name": "dev",
                                            "exactly": {
                                                "deviceClassName": klass,
                                                "selectors": [{"cel": {"expression": selector}}],
                                            },
                                        }
                                    ]
                                }
                            }
                        },
                    }
                ],
            }
        ],
    }


def run(nodes: int, gpus: int, mig: bool, *, controller: bool) -> tuple[float, float, int]:
    world = build_world(parse_scenario(scenario(nodes, gpus, mig)))
    store = world.stores["bench"]
    if not controller:
        store._listeners.clear()  # the floor: the store alone
    count = nodes * gpus * (7 if mig else 1)
    claims = [{"name": "dev", "resourceClaimTemplateName": "one"}]
    started = time.perf_counter()
    for i in range(count):
        store.create("pods", pod_object(f"p-{i:05d}", "jobs", claims=claims))
    placed = time.perf_counter() - started
    running = sum(1 for p in store.iter_objects("pods") if p["status"].get("phase") == "Running")
    started = time.perf_counter()
    for i in range(count):
        store.delete("pods", "jobs", f"p-{i:05d}")
    released = time.perf_counter() - started
    if controller:
        assert running == count, f"only {running} of {count} pods run"
        assert store.count("resourceclaims") == 0
    return count / placed, count / released, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--mig", action="store_true")
    args = parser.parse_args()
    floor_in, floor_out, count = run(args.nodes, args.gpus, args.mig, controller=False)
    place, release, _ = run(args.nodes, args.gpus, args.mig, controller=True)
    what = "1g.18gb MIG slices" if args.mig else "whole GPUs"
    print(f"{count:,} pods on {args.nodes} nodes x {args.gpus} GPUs, one of {what} each")
    print(f"  floor (store only): create {floor_in:8,.0f} pods/s   delete {floor_out:8,.0f} pods/s")
    print(
        f"  scheduled:          create {place:8,.0f} pods/s   delete {release:8,.0f} pods/s "
        f"({floor_in / place:.0f}x / {floor_out / release:.0f}x the floor)"
    )


if __name__ == "__main__":
    main()
