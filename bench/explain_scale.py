"""Benchmark: explainClaim on the simulator's scale scenario (target ≤ 200 ms on scale-5000).

    .venv/bin/python bench/explain_scale.py [--scenario scale-5000] [--repeat 5]
        [--resync [--churn 100]] [--redis URL]

Builds the scenario's world (5,000 nodes x 8 GPUs, 40,000 claims and pods), normalizes and
indexes it with the model as the reactor would, then times, per Pending claim:

* ledger — `Holdings.build` over every device and allocated claim (what a question on a store
  kept outside the process derives from its read);
* first  — the first `explain_claim` (selectors meet the 40,000 devices for the first time);
* again  — the median of `--repeat` further calls (answers remembered per selector);
* a claim waiting behind holders (its pod pinned to a full node, last in the queue): the
  earlier waiters, the node constraints and the devices free elsewhere weighed too;

next to a floor measured in the same run: one pass over the same devices and claims doing
nothing but a dictionary lookup each, so the ratio survives a noisy machine.

Then (`--resync` for this part alone) what keeping the allocation ledger current costs a
question, on an in-memory store whose index the model keeps as the app runs it: the first
question, one with nothing changed since, one after a batch that changed 1 or `--churn` claims;
the same ledger for a store kept outside the process (records decoded afresh each read);
explainClaim through the store glue. With `--redis URL`, the cluster is also fed into a
RedisStore there (under a prefix of its own, removed at the end) and each question's read of
the cluster and its ledger are timed.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dra_mirror.service.diagnostics.explain import explain_claim
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimRecord,
    Meta,
    PodClaim,
    PodRecord,
    Request,
    key_of,
)
from dra_mirror.service.sim.scenario import build_world, load_scenario

PLURALS = {
    "deviceclasses": DEVICE_CLASS,
    "resourceslices": RESOURCE_SLICE,
    "resourceclaims": RESOURCE_CLAIM,
    "pods": POD,
    "nodes": NODE,
}


def clock(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def main(scenario: str, repeat: int) -> None:
    world, built = clock(lambda: build_world(load_scenario(scenario)))
    store = next(iter(world.stores.values()))
    index = ClusterIndex(store.name)

    def load() -> None:
        for plural, kind in PLURALS.items():
            records = [normalize(kind, obj, cluster=store.name) for obj in store.list(plural)]
            index.apply([Event("ADDED", r) for r in records], at="2026-11-30T00:00:00Z")

    _, indexed = clock(load)
    devices = list(index.devices())
    claims = {key_of(c): c for c in index.records(RESOURCE_CLAIM)}
    pods = list(index.records(POD))
    nodes = list(index.records(NODE))
    classes = {c.meta.name: c for c in index.records(DEVICE_CLASS)}
    slices = list(index.records(RESOURCE_SLICE))
    print(
        f"{scenario}: built in {built:.1f} s, indexed in {indexed:.1f} s — {len(nodes):,} nodes, "
        f"{len(devices):,} devices, {len(claims):,} claims, {len(pods):,} pods"
    )
    ledger, ledger_s = clock(
        lambda: Ledger(Holdings.build(devices, claims.values(), slices=slices))
    )
    lookup = {e.key: e for e in devices}
    _, floor_s = clock(
        lambda: [lookup.get(e.key) for e in devices] and [claims.get(k) for k in claims]
    )
    pending = [c for c in claims.values() if c.allocation is None]
    print(
        f"  ledger build {ledger_s * 1000:7.1f} ms   floor (one lookup per device and claim) "
        f"{floor_s * 1000:6.1f} ms   pending claims {len(pending):,}"
    )
    # Two questions the scenario does not ask: a new claim for any GPU (the allocator walks the
    # nodes until one has a free GPU), and one for eight GPUs on one node (none has eight free).
    any_gpu = ClaimRecord(
        meta=Meta(cluster=store.name, name="bench-any-gpu", namespace="team-00"),
        requests=(Request(name="gpu", device_class_name="gpu.nvidia.com"),),
    )
    eight = ClaimRecord(
        meta=Meta(cluster=store.name, name="bench-eight-gpus", namespace="team-00"),
        requests=(Request(name="gpu", device_class_name="gpu.nvidia.com", count=8),),
    )
    for claim in [*pending[:3], any_gpu, eight]:

        def ask(claim=claim):
            return explain_claim(
                claim,
                classes=classes,
                devices=devices,
                ledger=ledger,
                claims=claims,
                pods=pods,
                nodes=nodes,
            )

        diagnosis, first = clock(ask)
        again = statistics.median(clock(ask)[1] for _ in range(repeat))
        print(
            f"  {claim.meta.namespace}/{claim.meta.name}: {diagnosis.verdict}: first "
            f"{first * 1000:7.1f} ms, again {again * 1000:7.1f} ms "
            f"({again / floor_s:.1f}x floor)"
        )
        print(f"    {diagnosis.message[:150]}")
    # A claim waiting behind holders: its pod pinned (nodeSelector) to a node whose GPUs are all
    # held, enqueued after every pending pod — the earlier waiters, the node constraints and
    # what is free elsewhere are all weighed.
    full = next(
        n.meta.name
        for n in nodes
        if any(e.node == n.meta.name for e in devices)
        and all(ledger.taken(e.key) for e in devices if e.node == n.meta.name)
    )
    waiting = ClaimRecord(
        meta=Meta(cluster=store.name, name="bench-wait", namespace="team-00",
                  created_at="2099-01-01T00:00:00Z"),
        requests=(Request(name="gpu", device_class_name="gpu.nvidia.com"),),
    )  # fmt: skip
    pinned = PodRecord(
        meta=Meta(cluster=store.name, name="bench-wait-pod", namespace="team-00", uid="u-wait",
                  created_at="2099-01-01T00:00:00Z"),
        phase="Pending", claims=(PodClaim(name="gpu", claim_name="bench-wait"),),
        node_selector={"kubernetes.io/hostname": full},
    )  # fmt: skip
    everything = {**claims, key_of(waiting): waiting}

    def ask_waiting():
        return explain_claim(
            waiting, classes=classes, devices=devices, ledger=ledger, claims=everything,
            pods=[*pods, pinned], nodes=nodes, eligible_nodes=[full],
        )  # fmt: skip

    diagnosis, first = clock(ask_waiting)
    again = statistics.median(clock(ask_waiting)[1] for _ in range(repeat))
    print(
        f"  team-00/bench-wait (pinned to the full {full}): {diagnosis.verdict}: first "
        f"{first * 1000:7.1f} ms, again {again * 1000:7.1f} ms ({again / floor_s:.1f}x floor)"
    )


# --- the ledger a question reads, kept per store (the glue every front end goes through) -----


def resync_bench(scenario: str, repeat: int, churn: int) -> None:
    """What bringing the allocation ledger up to date costs a question, and explainClaim
    through the store glue, on a MemoryStore whose index the model keeps (as the app runs)."""
    import asyncio

    from dra_mirror.schema.reader import Scope, ScopedReader
    from dra_mirror.service.questions import diagnosis, ledgers
    from dra_mirror.service.questions.cluster_state import read_cluster
    from dra_mirror.service.stores.memory import MemoryStore

    world = build_world(load_scenario(scenario))
    cluster = next(iter(world.stores.values()))
    store = MemoryStore()
    index = store.open_index(cluster.name, transitions=False)
    records = [
        normalize(kind, obj, cluster=cluster.name)
        for plural, kind in PLURALS.items()
        for obj in cluster.list(plural)
    ]
    index.apply([Event("ADDED", r) for r in records], at="2026-11-30T00:00:00Z")
    del world, records
    gc.collect()
    gc.freeze()  # as the app does after the initial sync
    claims = [c for c in index.records(RESOURCE_CLAIM) if isinstance(c, ClaimRecord)]
    devices = list(index.devices())
    lookup = {e.key: e for e in devices}
    by_key = {key_of(c): c for c in claims}
    _, floor_s = clock(
        lambda: [lookup.get(e.key) for e in devices] and [by_key.get(key_of(c)) for c in claims]
    )
    cached = hasattr(ledgers, "LedgerCache")  # the ledger kept per store, synced by diffing
    version = (
        "per-store ledger, brought up to date by comparing claims"
        if cached
        else ("ledger over the cluster's index")
    )
    print(f"\nledger a question reads ({version}); floor {floor_s * 1000:.1f} ms")

    async def state_now():
        return await read_cluster(store, cluster.name)

    def ledger(state):
        if cached:
            return ledgers.ledgers_for(store).ledger(state)
        return ledgers.ledger_of(store, state)

    state = asyncio.run(state_now())
    _, first_s = clock(lambda: ledger(state))
    still = [clock(lambda: ledger(state))[1] for _ in range(repeat)]
    print(
        f"  first question {first_s * 1000:8.2f} ms; nothing changed since: "
        f"{statistics.median(still) * 1000:8.3f} ms (median of {repeat})"
    )
    allocated = [c for c in claims if c.allocation is not None]
    for size in sorted({1, churn}):
        costs = []
        for round_ in range(repeat):
            # A batch deallocates `size` claims, the next allocates them back: what the next
            # question's ledger must reflect.
            picked = allocated[:size]
            flipped = [
                msgspec.structs.replace(c, allocation=None if round_ % 2 == 0 else c.allocation)
                for c in picked
            ]
            index.apply([Event("MODIFIED", c) for c in flipped], at="2026-11-30T00:00:01Z")
            state = asyncio.run(state_now())
            gc.collect()
            costs.append(clock(lambda state=state: ledger(state))[1])
        print(
            f"  after a batch changing {size:>4} claim(s): {statistics.median(costs) * 1000:8.2f} ms "
            f"(median of {repeat}; {statistics.median(costs) / floor_s:.2f}x floor)"
        )
    elsewhere_bench(cluster.name, state, cached, repeat, churn, floor_s)
    reader = ScopedReader(store, Scope.everything())
    pending = [c for c in claims if c.allocation is None][:2]
    for claim in pending:

        async def ask(claim=claim):
            return await diagnosis.diagnose_claim(
                reader, cluster.name, claim.meta.namespace, claim.meta.name
            )

        found, first = clock(lambda ask=ask: asyncio.run(ask()))
        again = statistics.median(
            clock(lambda ask=ask: asyncio.run(ask()))[1] for _ in range(repeat)
        )
        print(
            f"  explainClaim {claim.meta.namespace}/{claim.meta.name} through the glue: "
            f"{found.verdict}: first {first * 1000:7.1f} ms, again {again * 1000:7.1f} ms"
        )


class _Elsewhere:
    """A store kept outside this process (Redis): no index to read in place."""

    def index(self, cluster: str) -> None:
        return None


def elsewhere_bench(name, state, cached, repeat, churn, floor_s) -> None:
    """The same question on a store kept outside this process: each read decodes new records,
    equal to the last ones but not the same objects."""
    from dra_mirror.service.questions import ledgers
    from dra_mirror.service.questions.cluster_state import ClaimsByKey, ClusterState

    store = _Elsewhere()

    def decoded(claims):
        return ClusterState(
            cluster=name,
            classes=state.classes,
            devices=[msgspec.structs.replace(e) for e in state.devices],
            claims=ClaimsByKey(
                [msgspec.structs.replace(c, allocation=copy.deepcopy(c.allocation)) for c in claims]
            ),
            pods=[],
            nodes=[],
            slices=[msgspec.structs.replace(s) for s in state.slices],
        )

    def ledger_elsewhere(read):
        if cached:
            return ledgers.ledgers_for(store).ledger(read)  # type: ignore[arg-type]
        return ledgers.ledger_of(store, read)  # type: ignore[arg-type]

    claims = list(state.claims.records)
    first = decoded(claims)
    gc.collect()  # each timing below starts with no garbage of the copies made before it
    first_s = clock(lambda: ledger_elsewhere(first))[1]
    costs = []
    for round_ in range(repeat):
        changed = [
            msgspec.structs.replace(c, allocation=None)
            if i < churn and c.allocation is not None and round_ % 2 == 0
            else c
            for i, c in enumerate(claims)
        ]
        read = decoded(changed)
        gc.collect()
        costs.append(clock(lambda read=read: ledger_elsewhere(read))[1])
    print(
        f"  store outside the process (records decoded afresh each read): first question "
        f"{first_s * 1000:8.2f} ms; each later one, up to {churn} claims changed: "
        f"{statistics.median(costs) * 1000:8.2f} ms (median of {repeat}; "
        f"{statistics.median(costs) / floor_s:.2f}x floor)"
    )


def redis_bench(scenario: str, url: str, repeat: int) -> None:
    """A question against Redis: the cluster read whole (every list decoded) and its ledger."""
    import asyncio
    import uuid

    from dra_mirror.service.questions import ledgers
    from dra_mirror.service.questions.cluster_state import read_cluster
    from dra_mirror.service.stores.protocols import ClusterStatus
    from dra_mirror.service.stores.redis import RedisStore

    async def run() -> None:
        world = build_world(load_scenario(scenario))
        cluster = next(iter(world.stores.values()))
        store = RedisStore.from_url(url, prefix=f"bench-explain-{uuid.uuid4().hex[:8]}")
        index = store.open_index(cluster.name)
        records = [
            normalize(kind, obj, cluster=cluster.name)
            for plural, kind in PLURALS.items()
            for obj in cluster.list(plural)
        ]
        await store.apply(
            index.apply([Event("ADDED", r) for r in records], at="2026-11-30T00:00:00Z")
        )
        await store.set_status(ClusterStatus(name=cluster.name, connected=True, synced=True))
        del world, records, index
        gc.collect()
        gc.freeze()
        print(f"\nthrough Redis ({url}), {repeat} questions:")
        try:
            for _ in range(repeat):
                start = time.perf_counter()
                state = await read_cluster(store, cluster.name)
                read_s = time.perf_counter() - start
                gc.collect()
                if hasattr(ledgers, "LedgerCache"):
                    _, ledger_s = clock(
                        lambda state=state: ledgers.ledgers_for(store).ledger(state)
                    )
                else:
                    _, ledger_s = clock(lambda state=state: ledgers.ledger_of(store, state))
                print(
                    f"  read the cluster {read_s * 1000:7.0f} ms, its ledger {ledger_s * 1000:6.0f} ms"
                )
                del state
        finally:
            keys = [k async for k in store.redis.scan_iter(match=f"{store.prefix}*")]
            for start in range(0, len(keys), 1000):
                await store.redis.delete(*keys[start : start + 1000])
            await store.close()

    asyncio.run(run())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--churn", type=int, default=100, help="claims one batch changes (--resync)"
    )
    parser.add_argument(
        "--resync",
        action="store_true",
        help="only what keeping the ledger current costs a question, through the store glue",
    )
    parser.add_argument(
        "--redis", metavar="URL", default=None, help="also ask through a RedisStore at URL"
    )
    args = parser.parse_args()
    if not args.resync:
        main(args.scenario, args.repeat)
    resync_bench(args.scenario, args.repeat, args.churn)
    if args.redis:
        redis_bench(args.scenario, args.redis, args.repeat)
