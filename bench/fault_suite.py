"""Fault suite: a real deployment under API-server, PostgreSQL and watcher faults, checked
after each one against the simulator's own objects and a reference history.

    .venv/bin/python bench/fault_suite.py [--only NAME ...] [--churn-seconds 20] [--single-redis]
                                          [--keep]

Two simulated clusters (the `churn` scenario's hardware, pods arriving at `--rate` per second
each) served by the simulator in this process; a private Redis Cluster (three masters, one
replica each; `--single-redis`: one redis-server, with its own two stages instead of the
Redis Cluster ones) and PostgreSQL;
`dra-mirror watch` and `dra-mirror serve --no-watch` as child processes
(`bench.mirror_stack`). Every write the simulator makes is also folded through the model
into a reference history (`bench.mirror_checks.Reference`). Then, one after the other, with
the world moving (churn) during each fault:

    drops      every watch stream of alpha ends after 3 events
    gone       the next 4 watches of each cluster answer 410 Gone (relists)
    errors     alpha: the next 20 requests 503; beta: 10 claim requests 500
    stalls     alpha's next 3 watch streams go silent for 15 s
               (each of these first ends the watch streams already open — faults apply to
               the streams that start after them — and what a stage left unconsumed is
               cleared before the next one)
    restart    alpha's API server restarts, resourceVersions reset (etcd restore)
    postgres   PostgreSQL stopped for 60 s (--postgres-seconds)
    redis      the Redis master of alpha's slot SIGKILLed under churn (its replica promoted,
               the watcher retries the batch; the node rejoins as a replica afterwards)
    outbox     the same for the master of the history outbox stream's slot
    redis-crash  (--single-redis) the redis-server SIGKILLed under churn with its append-only
               file on, started again 5 s later from it: nothing may be lost, no gap
    redis-empty  (--single-redis) the same, its files deleted before it starts again: it comes
               back EMPTY; what its stream held must lie in a recorded gap
    watcher    the watcher SIGKILLed (mid-batch, under churn), restarted 5 s later

After each: the world is paused; `state s` is the time until the mirror equals the API
servers object by object (GraphQL vs. the simulator's store: claims with state, devices and
consumers, pods with phase and node, slices, classes, nodes, templates); `history s` the
time until the Redis outbox is empty; then the history in PostgreSQL is compared interval by
interval with the reference (LOST, DUPLICATE, PHANTOM, UNCLOSED, CLOSED, LATE; intervals
that lay entirely inside a recorded gap count as unobservable). Not part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from redis.crc import key_slot

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.mirror_checks import Reference, compare
from bench.mirror_stack import ROOT, MirrorStack
from bench.watchdog import run_watched
from tests.infra.servers import RedisServer

KINDS = ("LOST", "DUPLICATE", "PHANTOM", "UNCLOSED", "CLOSED", "LATE")


def scenario(rate: float, lifetime: float) -> dict:
    """Two clusters like the shipped `churn` scenario, with their own churn each."""
    base = yaml.safe_load((ROOT / "service/sim/scenarios/churn.yaml").read_text())
    template = base["clusters"][0]
    clusters = []
    for index, name in enumerate(("alpha", "beta")):
        cluster = copy.deepcopy(template)
        cluster["name"] = name
        for group in cluster["nodes"]:
            group["name"] = group["name"].replace("churn", name)
        cluster["nodes"][0]["count"] = 4
        cluster["churn"].update(rate=rate, lifetime=lifetime, seed=7 + index)
        clusters.append(cluster)
    return {"name": "faults", "seed": 7, "clusters": clusters}


async def churn(stack: MirrorStack, seconds: float) -> None:
    stack.resume()
    await asyncio.sleep(seconds)


async def drops(stack, s):
    stack.faults("alpha", {"dropWatchAfterEvents": 3})
    await stack.drop_watches("alpha")  # the running streams too
    await churn(stack, s)


async def gone(stack, s):
    # streams that end after 5 events come back for more, and meet the 410s
    for cluster in stack.clusters:
        stack.faults(cluster, {"expireWatches": 4, "dropWatchAfterEvents": 5})
        await stack.drop_watches(cluster)
    await churn(stack, s)


async def errors(stack, s):
    stack.faults("alpha", {"errors": {"code": 503, "count": 20, "retryAfter": 1},
                           "dropWatchAfterEvents": 5})  # fmt: skip
    stack.faults("beta", {"errors": {"code": 500, "count": 10, "path": "resourceclaims"},
                          "dropWatchAfterEvents": 5})  # fmt: skip
    for cluster in stack.clusters:
        await stack.drop_watches(cluster)
    await churn(stack, s)


async def stalls(stack, s):
    stack.faults("alpha", {"stallWatch": {"seconds": 15, "afterEvents": 1, "count": 3}})
    await stack.drop_watches("alpha")
    await churn(stack, max(s, 30))


async def restart(stack, s):
    await churn(stack, s / 2)
    stack.faults("alpha", {"restart": True})
    await churn(stack, s / 2)


async def postgres(stack, s, seconds: float = 60.0):
    await asyncio.to_thread(stack.postgres().stop)
    try:
        await churn(stack, seconds)
    finally:
        await asyncio.to_thread(stack.postgres().start)


async def redis_master(stack, s, slot_of: str = "alpha"):
    """The Redis master serving `slot_of`'s slot SIGKILLed under churn: its replica is promoted,
    the writers retry; the killed node is started again afterwards and rejoins as a replica,
    so that the next stages write with a replica again."""
    cluster = stack.redis_cluster()
    await churn(stack, s / 2)
    slot = key_slot(f"{{{slot_of}}}".encode())
    victim, promoted = await asyncio.to_thread(cluster.kill_master, slot=slot)
    print(f"    redis: master :{victim.port} of slot {slot} ({{{slot_of}}}) killed, its replica "
          f"promoted {promoted:.1f}s later", flush=True)  # fmt: skip
    await churn(stack, s / 2)
    await asyncio.to_thread(cluster.restart, victim)


async def redis_outbox(stack, s):
    """The same for the master of the history outbox's slot (the stream and its drain lease)."""
    await redis_master(stack, s, slot_of="history")


async def _durable(stack) -> RedisServer:
    """The stack's redis-server with its append-only file on (switched on live: CONFIG SET,
    then the rewrite that writes what it holds), as production runs it."""
    await stack.redis.config_set("appendonly", "yes")
    while True:
        info = await stack.redis.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            break
        await asyncio.sleep(0.1)
    return dataclasses.replace(stack.redis_server(), appendonly=True)


async def redis_crash(stack, s, *, empty: bool = False):
    """SIGKILL under churn, 5 s down (the lease's TTL is 10 s), started again from its
    append-only file — or, `empty`, with its files deleted first."""
    server = await _durable(stack)
    await churn(stack, s / 2)
    await asyncio.to_thread(server.kill)
    killed = time.monotonic()
    await churn(stack, 5)
    if empty:
        for path in server.workdir.iterdir():
            if path.name.startswith(("appendonly", "dump")):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    await asyncio.to_thread(server.start)
    print(f"    redis: SIGKILLed, started again{' EMPTY' if empty else ''} "
          f"{time.monotonic() - killed:.1f}s later", flush=True)  # fmt: skip
    await churn(stack, s / 2)


async def redis_empty(stack, s):
    await redis_crash(stack, s, empty=True)


async def watcher(stack, s):
    await churn(stack, s / 2)
    stack.kill_watcher()
    await churn(stack, 5)
    await stack.start_watcher()
    await churn(stack, s / 2)


FAULTS = {"drops": drops, "gone": gone, "errors": errors, "stalls": stalls, "restart": restart,
          "postgres": postgres, "redis": redis_master, "outbox": redis_outbox,
          "redis-crash": redis_crash, "redis-empty": redis_empty,
          "watcher": watcher}  # fmt: skip
ON_REDIS_CLUSTER = {"redis", "outbox"}
ON_ONE_REDIS = {"redis-crash", "redis-empty"}


async def check(stack: MirrorStack, reference: Reference, name: str, began: float) -> dict:
    stack.pause()
    assert stack.sim is not None
    # what a fault left unconsumed (counts are consumed by requests) is dropped: each stage
    # starts clean
    leftover = {c: dict(stack.sim.served[c].faults.settings) for c in stack.clusters}
    for cluster in stack.clusters:
        stack.faults(cluster, dict.fromkeys(stack.sim.served[cluster].faults.settings))
    state_s, diffs = await stack.converged()
    history_s = await stack.drained()
    await reference.write()
    result = await compare(reference.url, stack.database_url)
    row = {"fault": name, "state_s": state_s, "history_s": history_s, "diffs": diffs,
           "result": result, "watcher_alive": stack.watcher.poll() is None,
           "api_alive": stack.api.poll() is None, "total_s": time.monotonic() - began}  # fmt: skip
    late = sorted(result.lateness) or [0.0]
    print(f"{name:<9} state {state_s:6.1f}s  history {history_s:6.1f}s  "
          f"diffs {len(diffs):3d}  " + "  ".join(f"{k} {result.count(k)}" for k in KINDS)
          + f"  unobservable {result.unobservable}  sub-second: reference "
          f"{result.transient['reference']}, mirror {result.transient['mirror']}  start lag p50 {statistics.median(late):.2f}s "
          f"max {late[-1]:.2f}s  (intervals {sum(result.intervals.values())})", flush=True)  # fmt: skip
    for cluster, settings in leftover.items():
        if settings:
            print(f"    {cluster}: faults left unconsumed at the end: {settings}")
    for line in diffs[:5]:
        print(f"    state: {line}")
    for kind in KINDS:
        for line in result.findings.get(kind, [])[:3]:
            print(f"    {kind}: {line}")
    if not row["watcher_alive"] or not row["api_alive"]:
        print(
            f"    a mirror process exited: watcher {stack.watcher.poll()}, api {stack.api.poll()}"
        )
    return row


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(FAULTS), default=None)
    parser.add_argument("--churn-seconds", type=float, default=20.0)
    parser.add_argument("--postgres-seconds", type=float, default=60.0)
    parser.add_argument(
        "--rate", type=float, default=2.0, help="pods arriving per second, each cluster"
    )
    parser.add_argument("--lifetime", type=float, default=15.0)
    parser.add_argument("--single-redis", action="store_true",
                        help="one redis-server instead of a Redis Cluster (no redis stages)")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
    args = parser.parse_args()
    stages = [name for name in args.only or list(FAULTS)
              if not (args.single_redis and name in ON_REDIS_CLUSTER)
              and not (not args.single_redis and name in ON_ONE_REDIS)]  # fmt: skip
    run_dir = Path(tempfile.mkdtemp(prefix="dra-mirror-faults-", dir="/tmp"))
    print(f"run directory {run_dir}")
    try:
        async with MirrorStack(scenario(args.rate, args.lifetime), run_dir,
                               redis_cluster=not args.single_redis) as stack:  # fmt: skip
            assert stack.sim is not None
            await stack.start_mirror()  # the world waits until the mirror has synced it
            synced, diffs = await stack.converged()
            print(f"first sync: {synced:.1f}s")
            if diffs:
                raise SystemExit(f"the mirror never matched the simulator: {diffs[:5]}")
            # the reference starts from the same state, and sees every write from now on
            reference = Reference(stack.sim.clusters, f"sqlite+aiosqlite:///{run_dir}/reference.db")
            await reference.start()
            stack.before_faults = reference.poll
            began = time.monotonic()
            await churn(stack, args.churn_seconds)
            rows = [await check(stack, reference, "baseline", began)]
            for name in stages:
                began = time.monotonic()
                fault = FAULTS[name]
                if name == "postgres":
                    await postgres(stack, args.churn_seconds, args.postgres_seconds)
                else:
                    await fault(stack, args.churn_seconds)
                rows.append(await check(stack, reference, name, began))
            await reference.close()
            print(f"reference: {reference.events} simulator writes folded, "
                  f"{reference.malformed} malformed")  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    run_watched(main, "fault suite")
