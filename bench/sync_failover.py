"""A Redis Cluster master killed while a large cluster's initial sync is being written into it.

    prlimit --as=8000000000 .venv/bin/python bench/sync_failover.py [--scenario scale-5000]
                                                [--runs 1] [--at 0.3] [--keep]

A private Redis Cluster (three masters, one replica each; tests.infra), PostgreSQL, the
simulator serving `--scenario` in this process, `dra-mirror watch` and `dra-mirror serve
--no-watch` (bench.mirror_stack). Each run starts the mirror twice on fresh servers: once
undisturbed (the floor), once with the master of the cluster's slot SIGKILLed as soon as
`--at` of the cluster's objects are in Redis (the HLENs of its `obj:<Kind>` hashes, polled
every 50 ms, against the simulator's own counts). Printed per run: the seconds from the
watcher's start until GraphQL reports the cluster synced and every object is in Redis; how far
the sync was at the kill; the replica's promotion time; whether the watcher stayed the same
process, and what it logged at WARNING and above; and then the full comparison — the mirror equal to the
simulator object by object through GraphQL (claims with state, devices and consumers, pods,
slices, classes, nodes, templates) — and how long after the kill it held. Not part of the test
run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from redis.crc import key_slot

from bench.mirror_stack import ROOT, MirrorStack
from bench.watchdog import run_watched
from dra_mirror.service.model.kinds import BY_PLURAL
from dra_mirror.service.stores.redis_keys import DEFAULT_PREFIX, Keys

SYNCED = "query Synced { clusters { name status { synced } } }"
MIRRORED = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates",
            "pods", "nodes")  # fmt: skip


async def in_redis(stack: MirrorStack, cluster: str) -> int:
    """Objects of `cluster` the state store holds now (0 while the slot has no master)."""
    keys = Keys(DEFAULT_PREFIX, cluster)
    try:
        return sum([int(await stack.redis.hlen(keys.objects(BY_PLURAL[p].kind))) for p in MIRRORED])
    except Exception:  # a failover under way: MOVED, connection refused, slot not covered
        return 0


async def synced(stack: MirrorStack, cluster: str, total: int) -> bool:
    if await in_redis(stack, cluster) < total:
        return False
    try:
        data = await stack.graphql(SYNCED, {})
    except httpx.HTTPError:  # the API not up yet
        return False
    except RuntimeError as error:  # GraphQL errors: Redis failing over, or a wrong query
        print(f"    not synced yet: {error}"[:300], flush=True)
        return False
    return any(c["name"] == cluster and c["status"]["synced"] for c in data["clusters"])


async def one(doc: dict, run_dir: Path, kill_at: float | None) -> dict:
    # cluster-node-timeout 5 s, as docker-compose.redis-cluster.yml: with the tests' 1 s a
    # master busy with one of the sync's large transactions on a loaded machine was taken for
    # dead, and failovers happened without any kill
    async with MirrorStack(doc, run_dir, redis_cluster=True, cluster_node_timeout_ms=5000) as stack:
        assert stack.sim is not None
        (cluster,) = stack.clusters
        store = stack.sim.clusters[cluster]
        total = sum(store.count(p) for p in MIRRORED)
        began = time.monotonic()
        api = asyncio.create_task(stack.start_watcher())  # 3 s to see it survive, meanwhile:
        row: dict = {"objects": total}
        if kill_at is not None:
            for _ in range(12_000):  # at most 10 minutes
                if (done := await in_redis(stack, cluster)) >= kill_at * total:
                    break
                await asyncio.sleep(0.05)
            redis = stack.redis_cluster()
            row["killed_at"] = done / total
            row["killed_after"] = time.monotonic() - began
            victim, row["promotion"] = await asyncio.to_thread(
                redis.kill_master, slot=key_slot(f"{{{cluster}}}".encode())
            )
            row["victim"] = victim.port
        await api
        watcher = stack.watcher
        await stack.start_api()
        for _ in range(3000):  # at most 10 minutes
            if await synced(stack, cluster, total):
                break
            await asyncio.sleep(0.2)
        row["synced"] = time.monotonic() - began
        row["equal_after"], row["diffs"] = await stack.converged(within=600)
        row["equal_after"] += row["synced"]
        row["same_watcher"] = (
            stack.watcher is watcher and watcher is not None and watcher.poll() is None
        )
        row["comparisons"] = stack.comparisons
        row["peak_rss"] = _peak_rss(watcher.pid) if watcher is not None else 0
        lines = (run_dir / "watcher.log").read_text(errors="replace").splitlines()
        row["warnings"] = [line for line in lines if " WARNING " in line or " ERROR " in line]
        return row


def _peak_rss(pid: int) -> int:
    """The process's peak resident set so far, bytes (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def show(label: str, row: dict) -> None:
    kill = (
        f"master :{row['victim']} killed {row['killed_after']:.1f}s in, at "
        f"{row['killed_at'] * 100:.0f} % of the objects written; replica promoted "
        f"{row['promotion']:.1f}s later; "
        if "victim" in row
        else ""
    )
    print(f"{label:<9} {row['objects']} objects: {kill}synced {row['synced']:.1f}s after the "
          f"watcher started; equal to the simulator, object by object, {row['equal_after']:.1f}s "
          f"after it ({len(row['diffs'])} differences, {row['comparisons']} comparisons of the whole "
          f"cluster); watcher peak RSS {row['peak_rss'] / 2**20:.0f} MiB; same watcher process throughout: "
          f"{row['same_watcher']}; watcher warnings and errors logged: {len(row['warnings'])}",
          flush=True)  # fmt: skip
    for line in row["diffs"][:5]:
        print(f"    {line}")
    for line in row["warnings"][:3]:
        print(f"    watcher: {line[:300]}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--at", type=float, default=0.3,
                        help="kill when this fraction of the objects is in Redis")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
    args = parser.parse_args()
    doc = yaml.safe_load((ROOT / f"service/sim/scenarios/{args.scenario}.yaml").read_text())
    run_dir = Path(tempfile.mkdtemp(prefix="dra-mirror-sync-failover-", dir="/tmp"))
    run_dir.chmod(0o755)  # noqa: ASYNC240 (PostgreSQL's account must reach the run dirs below)
    print(f"run directory {run_dir}")
    try:
        for run in range(args.runs):
            show("floor", await one(doc, run_dir / f"floor-{run}", None))
            show("failover", await one(doc, run_dir / f"failover-{run}", args.at))
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    run_watched(main, "sync failover")
