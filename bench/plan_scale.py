"""Benchmark: plan a 3-replica Deployment over ten 5,000-node clusters (target ≤ 1 s).

    prlimit --as=8000000000 .venv/bin/python bench/plan_scale.py [--clusters 10] [--repeat 5]

Builds `--clusters` copies of the simulator's `scale-5000` scenario (5,000 nodes x 8 H100,
40,000 template claims and pods, 95% Running), each under its own cluster name, normalizes
every object with the model and folds it into one MemoryStore as the reactor would (one
cluster at a time, the simulator's world dropped after each), freezes the heap as the app
does after the initial sync, answers every class selector (`diagnosis.prepare`, as the app
does once every cluster synced; the allocation ledger itself reads each cluster's index), then
asks `plan_manifests` for a Deployment of 3 replicas,
each with a template claim for one GPU and CPU/memory requests:

* first — the first plan (selectors meet the devices of each cluster for the first time);
* again — the median of `--repeat` further plans;
* graph — the same question through the schema in-process (`plan(manifests:)`, every field
  the command line selects);

next to a floor measured in the same run: one pass over every device of every cluster doing
one dictionary lookup each (what any answer that looks at every device costs at least).

A benchmark, not a test: it checks only that every replica is placed in every cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dra_mirror import schema
from dra_mirror.schema.context import make_context
from dra_mirror.schema.reader import Scope, ScopedReader
from dra_mirror.service.model.index import Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from dra_mirror.service.questions import diagnosis
from dra_mirror.service.questions.plan import plan_manifests
from dra_mirror.service.questions.remote import PLAN as PLAN_DOCUMENT
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus

PLURALS = {
    "deviceclasses": DEVICE_CLASS,
    "resourceslices": RESOURCE_SLICE,
    "resourceclaimtemplates": RESOURCE_CLAIM_TEMPLATE,
    "resourceclaims": RESOURCE_CLAIM,
    "pods": POD,
    "nodes": NODE,
}

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: team-00}
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: train
          image: nvcr.io/nvidia/pytorch:25.08-py3
          resources:
            requests: {cpu: "8", memory: 64Gi}
            claims: [{name: gpu}]
      resourceClaims: [{name: gpu, resourceClaimTemplateName: plan-gpu}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: plan-gpu, namespace: team-00}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
"""


def clock(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


async def aclock(coro):
    start = time.perf_counter()
    value = await coro
    return value, time.perf_counter() - start


async def build(clusters: int) -> MemoryStore:
    store = MemoryStore()
    scenario = load_scenario("scale-5000")
    for n in range(clusters):
        name = f"scale-{n:02d}"
        spec = dataclasses.replace(scenario, clusters=[
            dataclasses.replace(scenario.clusters[0], name=name)
        ])  # fmt: skip
        start = time.perf_counter()
        world = build_world(spec)
        [source] = world.stores.values()
        index = store.open_index(name)
        gc.disable()
        for plural, kind in PLURALS.items():
            records = [normalize(kind, obj, cluster=name) for obj in source.list(plural)]
            changes = index.apply([Event("ADDED", r) for r in records], at="2026-11-30T00:00:00Z")
            await store.apply(changes)
        gc.enable()
        await store.set_status(ClusterStatus(name=name, connected=True, synced=True))
        del world, source
        gc.collect()
        print(f"  {name}: built and indexed in {time.perf_counter() - start:.1f} s", flush=True)
    gc.freeze()
    return store


async def main(clusters: int, repeat: int) -> None:
    store = await build(clusters)
    _, prepared = await aclock(diagnosis.prepare(store))
    reader = ScopedReader(store, Scope.everything())
    devices = [e for c in await store.clusters() for e in store.index(c.name).devices()]
    lookup = {e.key: e for e in devices}
    _, floor = clock(lambda: [lookup.get(e.key) for e in devices])
    print(
        f"{clusters} clusters, {len(devices):,} devices; prepared in {prepared:.1f} s; "
        f"floor (one lookup per device) {floor * 1000:.0f} ms"
    )
    answer, first = await aclock(plan_manifests(reader, DEPLOYMENT))
    placed = [sum(i.placeable for i in c.plan.items) for c in answer.clusters]
    assert placed == [3] * clusters, placed
    times = [(await aclock(plan_manifests(reader, DEPLOYMENT)))[1] for _ in range(repeat)]
    again = statistics.median(times)
    graph = schema.build_schema()

    async def through_graph():
        result = await graph.execute(
            PLAN_DOCUMENT,
            variable_values={"manifests": DEPLOYMENT},
            context_value=make_context(store),
        )
        assert result.errors is None, result.errors

    await through_graph()
    via_graph = statistics.median([(await aclock(through_graph()))[1] for _ in range(repeat)])
    node = answer.clusters[0].plan.items[0].node
    print(
        f"plan of a 3-replica Deployment over {clusters} clusters: first {first * 1000:.0f} ms, "
        f"again {again * 1000:.0f} ms ({again / floor:.1f}x floor), through the graph "
        f"{via_graph * 1000:.0f} ms; replica 0 lands on {node}; peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.clusters, args.repeat))
