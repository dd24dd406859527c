"""Benchmark: findDevices through the graph, over ten clusters x 40,000 devices (target ≤ 1 s).

    .venv/bin/python bench/find_devices.py [--clusters 10] [--nodes 5000] [--repeat 5]
    .venv/bin/python bench/find_devices.py --skip-find --explain scale-5000

Builds `--clusters` clusters of `--nodes` nodes with 8 GPUs each (every 5th node A100 80GB,
the rest H200 with 143771Mi), half of the nodes' GPUs held by one claim per node, normalizes the
raw objects with the model and applies them to a MemoryStore as the reactor would, freezes the
heap as the app does after the initial sync, then asks the schema in-process:

    findDevices(selector: TWO_CLAUSE, status: FREE, first: 100) { totalCount edges { … } }

* first — the first question (each device's CEL projection is read once, then remembered);
* again — the median of `--repeat` further questions;
* parts — the same work split: the store's device list, `Selector.select`, the statuses
  (from the index as findDevices reads them, and through the store's batched call);
* floor — one pass over every device doing the two clauses as a Python expression on the
  record (a dict lookup and a string comparison each), in the same run.

With `--explain SCENARIO` (e.g. `scale-5000`: 5,000 nodes, 40,000 devices, claims and pods)
it then times `explainClaim` through the graph on that simulator scenario, built and indexed by
the model (target ≤ 200 ms): one question with nothing prepared (it meets the class selectors
first); `diagnosis.prepare` (what the app runs once every cluster has synced: the class
selectors answered ahead of the questions); then, for Pending claims and allocated ones, the
first question and repeated ones (the allocation ledger reads the cluster's index in place),
against a floor of one dictionary lookup per device and claim.

A benchmark, not a test: it checks only that the answer counts the devices it should.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dra_mirror import schema
from dra_mirror.schema.context import make_context
from dra_mirror.service.diagnostics.cel import compile_selector
from dra_mirror.service.model.index import MODIFIED, Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimRecord,
)
from dra_mirror.service.questions import diagnosis
from dra_mirror.service.questions.diagnosis import local_statuses
from dra_mirror.service.stores.memory import MemoryStore

TWO_CLAUSE = (
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200' && "
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
)
QUERY = """query($s: String!) { findDevices(selector: $s, status: FREE, first: 100) {
  totalCount edges { node { cluster pool name status } } evaluationErrorCount } }"""


def world(cluster: str, nodes: int) -> list[dict]:
    out: list[dict] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com", "uid": "class"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
        }
    ]
    for n in range(nodes):
        name = f"{cluster}-node-{n:05d}"
        a100 = n % 5 == 0
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": f"uid-{name}"},
                "status": {"allocatable": {"cpu": "192", "memory": "2Ti"}},
            }
        )
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-gpu", "uid": f"uid-{name}-gpu"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {
                            "name": f"gpu-{i}",
                            "attributes": {
                                "type": {"string": "gpu"},
                                "productName": {
                                    "string": "NVIDIA A100 80GB PCIe" if a100 else "NVIDIA H200"
                                },
                            },
                            "capacity": {"memory": {"value": "80Gi" if a100 else "143771Mi"}},
                        }
                        for i in range(8)
                    ],
                },
            }
        )
        if n % 2:  # every other node's GPUs are held by one claim
            out.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": f"job-{n}", "namespace": "ml", "uid": f"uid-job-{n}"},
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8},
                                }
                            ]
                        }
                    },
                    "status": {
                        "allocation": {
                            "devices": {
                                "results": [
                                    {
                                        "request": "gpu",
                                        "driver": "gpu.nvidia.com",
                                        "pool": name,
                                        "device": f"gpu-{i}",
                                    }
                                    for i in range(8)
                                ]
                            }
                        }
                    },
                }
            )
    return out


KIND = {"DeviceClass": DEVICE_CLASS, "Node": NODE, "ResourceSlice": RESOURCE_SLICE}
KIND["ResourceClaim"] = RESOURCE_CLAIM


def clock(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


async def aclock(coro):
    start = time.perf_counter()
    value = await coro
    return value, time.perf_counter() - start


async def main(clusters: int, nodes: int, repeat: int) -> None:
    store = MemoryStore()
    start = time.perf_counter()
    for c in range(clusters):
        name = f"c{c:02d}"
        records = [normalize(KIND[o["kind"]], o, cluster=name) for o in world(name, nodes)]
        index = store.open_index(name)  # the index the store serves, as a reactor folds it
        await store.apply(
            index.apply([Event(MODIFIED, r) for r in records], at="2026-11-30T00:00:00Z")
        )
    gc.collect()
    gc.freeze()  # as the app does once the initial sync is done
    devices = await store.list_devices()
    print(
        f"{clusters} clusters x {nodes:,} nodes x 8 GPUs = {len(devices):,} devices, "
        f"built in {time.perf_counter() - start:.1f} s"
    )
    h200_free = sum(1 for c in range(clusters) for n in range(nodes) if n % 5 and not n % 2) * 8
    graph = schema.build_schema()

    async def ask() -> dict:
        result = await graph.execute(
            QUERY, variable_values={"s": TWO_CLAUSE}, context_value=make_context(store)
        )
        assert result.errors is None, result.errors
        return result.data["findDevices"]  # type: ignore[index]

    found, first = await aclock(ask())
    assert found["totalCount"] == h200_free, (found["totalCount"], h200_free)
    again = statistics.median([(await aclock(ask()))[1] for _ in range(repeat)])

    listed, list_s = await aclock(store.list_devices())
    selector = compile_selector(TWO_CLAUSE)
    (passing, _), select_s = clock(lambda: selector.select(listed))
    _, status_s = await aclock(store.device_status([e.key for e in passing]))
    _, local_s = clock(lambda: local_statuses(store, passing))

    def floor() -> int:
        count = 0
        for e in listed:
            attribute = e.device.attributes.get("gpu.nvidia.com/productName") or (
                e.device.attributes.get("productName")
            )
            if attribute is not None and attribute.value == "NVIDIA H200":
                count += 1
        return count

    _, floor_s = clock(floor)
    print(f"  findDevices (FREE, two clauses): {found['totalCount']:,} of {len(devices):,}")
    print(
        f"  first {first * 1000:7.1f} ms   again {again * 1000:7.1f} ms   "
        f"({again / floor_s:.1f}x floor)   target 1000 ms"
    )
    print(
        f"  parts: store list {list_s * 1000:.1f} ms, select {select_s * 1000:.1f} ms, "
        f"statuses of {len(passing):,}: {local_s * 1000:.1f} ms from the index "
        f"({status_s * 1000:.1f} ms through the store); floor {floor_s * 1000:.1f} ms"
    )


EXPLAIN = """query($c: String!, $n: String!, $m: String!) {
  explainClaim(cluster: $c, namespace: $n, name: $m) {
    verdict message requests { classDevices freeOrShareable selectors { passing } }
    holders { claim { name } idle } checks { name ok } } }"""


async def explain_bench(scenario: str, repeat: int) -> None:
    from dra_mirror.service.sim.scenario import build_world, load_scenario

    plurals = {"deviceclasses": DEVICE_CLASS, "resourceslices": RESOURCE_SLICE, "nodes": NODE}
    plurals |= {"resourceclaims": RESOURCE_CLAIM, "pods": POD}
    start = time.perf_counter()
    world = build_world(load_scenario(scenario))
    store = MemoryStore()
    for cluster in world.stores.values():
        records = [
            normalize(kind, raw, cluster=cluster.name)
            for plural, kind in plurals.items()
            for raw in cluster.list(plural)
        ]
        index = store.open_index(cluster.name)
        await store.apply(
            index.apply([Event(MODIFIED, r) for r in records], at="2026-11-30T00:00:00Z")
        )
    gc.collect()
    gc.freeze()
    name = next(iter(world.stores))
    index = store.index(name)
    assert index is not None
    devices = list(index.devices())
    claims = [c for c in index.records(RESOURCE_CLAIM) if isinstance(c, ClaimRecord)]
    print(
        f"{scenario}: {len(devices):,} devices, {len(claims):,} claims, built in "
        f"{time.perf_counter() - start:.1f} s"
    )
    lookup = {e.key: e for e in devices}
    by_name = {(c.meta.namespace, c.meta.name): c for c in claims}

    def floor() -> None:
        for e in devices:
            lookup.get(e.key)
        for c in claims:
            by_name.get((c.meta.namespace, c.meta.name))

    _, floor_s = clock(floor)
    graph = schema.build_schema()
    pending = [c for c in claims if c.allocation is None][:2]
    allocated = [c for c in claims if c.allocation is not None][:2]

    async def cold() -> None:
        claim = pending[0]
        variables = {"c": name, "n": claim.meta.namespace, "m": claim.meta.name}
        result = await graph.execute(
            EXPLAIN, variable_values=variables, context_value=make_context(store)
        )
        assert result.errors is None, result.errors

    _, cold_s = await aclock(cold())
    built, prepare_s = await aclock(diagnosis.prepare(store))
    print(
        f"  first question with nothing prepared (meets the class selectors first): "
        f"{cold_s * 1000:.1f} ms; diagnosis.prepare after the sync (as the app does): "
        f"{built} cluster(s) in {prepare_s * 1000:.1f} ms"
    )
    for claim in pending + allocated:
        variables = {"c": name, "n": claim.meta.namespace, "m": claim.meta.name}

        async def ask(variables: dict = variables) -> dict:
            result = await graph.execute(
                EXPLAIN, variable_values=variables, context_value=make_context(store)
            )
            assert result.errors is None, result.errors
            return result.data["explainClaim"]  # type: ignore[index]

        found, first = await aclock(ask())
        again = statistics.median([(await aclock(ask()))[1] for _ in range(repeat)])
        print(
            f"  {claim.meta.namespace}/{claim.meta.name}: {found['verdict']}: first "
            f"{first * 1000:7.1f} ms, again {again * 1000:7.1f} ms "
            f"({again / floor_s:.1f}x floor {floor_s * 1000:.1f} ms)   target 200 ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--explain", metavar="SCENARIO", default=None)
    parser.add_argument("--skip-find", action="store_true", help="Only the --explain part.")
    args = parser.parse_args()
    if not args.skip_find:
        asyncio.run(main(args.clusters, args.nodes, args.repeat))
    if args.explain:
        asyncio.run(explain_bench(args.explain, args.repeat))
