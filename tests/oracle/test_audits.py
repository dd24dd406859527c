"""The audit oracle: every contention figure, by every groupBy, against a naive recount.

Hypothesis draws a world (tests.oracle.audit_world: MIG layouts, partitionable GPUs with
counters, shared GPUs and NICs consuming capacity, claims no pod uses, pods slow to start,
objects older than the mirror); its raw objects go through the whole pipeline — normalized
into records, folded by the model's index (the first minute as its first LIST, then watch
events and a tick per minute), written by the history writer into SQL — and the audit's
rows must equal `tests.oracle.audit_truth`'s naive recount of the same raw objects, figure
for figure, in one bucket of the whole hour (peaks from the hourly cache) and in 15- and
25-minute buckets (live). Each example is a cluster of its own in one database (SQLite;
PostgreSQL too, with its mark). Bounded in the suite (the same examples each run); a long run
explores new ones:

    DRA_MIRROR_AUDIT_EXAMPLES=500 scripts/test tests/oracle/test_audits.py
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from dra_mirror.service.diagnostics.cel import rule_selector_matches
from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.times import to_us
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.normalize import normalize
from tests.history.conftest import BACKENDS, Pipeline, fresh_database
from tests.oracle.audit_truth import expected
from tests.oracle.audit_world import END, World, at, snapshots, worlds

EXAMPLES = int(os.environ.get("DRA_MIRROR_AUDIT_EXAMPLES", "40"))
LONG = "DRA_MIRROR_AUDIT_EXAMPLES" in os.environ
GROUPS = ("CLASS", "NAMESPACE", "NODE", "CLUSTER")
BUCKETS = (END, 15, 25)  # minutes: one bucket, quarters, and buckets the hour does not divide
EMPTY: dict[str, Any] = {
    "deviceHoursAllocated": 0.0, "deviceHoursIdle": 0.0, "gpuHoursAllocated": 0.0,
    "gpuHoursIdle": 0.0, "claimsWaited": 0, "waitP50Seconds": None, "waitP95Seconds": None,
    "waitMaxSeconds": None, "claimsAbandoned": 0, "peakPending": 0, "utilization": None,
    "gpuUtilization": None,
}  # fmt: skip


def _feed(world: World, cluster: str) -> tuple[list, list]:
    """The Changes the model makes of the world's raw objects, and the snapshots."""
    seen = snapshots(world)
    index = ClusterIndex(cluster, selector_matcher=rule_selector_matches, class_members=True)
    out = []
    for kind in KINDS:  # the first LIST of every kind, at minute 0
        raws = [r for (k, _, _), r in seen[0].items() if k == kind]
        out.append(index.resync(kind, [normalize(kind, r, cluster=cluster) for r in raws],
                                at=at(0)))  # fmt: skip
    out.append(index.tick(at=at(0)))
    for t in range(1, END):
        before, now = seen[t - 1], seen[t]
        events = []
        for key in sorted(now.keys() | before.keys()):
            old, new = before.get(key), now.get(key)
            if new is None:
                events.append(Event("DELETED", normalize(key[0], old, cluster=cluster)))
            elif old != new:
                raw = {**new, "metadata": {**new["metadata"], "resourceVersion": str(t)}}
                events.append(Event("ADDED" if old is None else "MODIFIED",
                                    normalize(key[0], raw, cluster=cluster)))  # fmt: skip
        if events:
            out.append(index.apply(events, at=at(t)))
        out.append(index.tick(at=at(t)))
    return out, seen


def _answered(rows, start_us: int, bucket: int, inventory: bool) -> dict:
    out = {}
    for r in rows:
        out[(r.group, (r.bucket_start_us - start_us) // (bucket * 60_000_000))] = {
            "deviceHoursAvailable": r.device_hours_available,
            "deviceHoursAllocated": r.device_hours_allocated,
            "deviceHoursIdle": r.device_hours_idle, "utilization": r.utilization,
            "gpuHoursAvailable": r.gpu_hours_available,
            "gpuHoursAllocated": r.gpu_hours_allocated, "gpuHoursIdle": r.gpu_hours_idle,
            "gpuUtilization": r.gpu_utilization, "claimsWaited": r.claims_waited,
            "waitP50Seconds": r.wait_p50, "waitP95Seconds": r.wait_p95,
            "waitMaxSeconds": r.wait_max, "claimsAbandoned": r.claims_abandoned,
            "peakPending": r.peak_pending,
        }  # fmt: skip
    return out


def _differences(got: dict, want: dict, inventory: bool) -> list[str]:
    empty = {**EMPTY, "deviceHoursAvailable": 0.0 if inventory else None,
             "gpuHoursAvailable": 0.0 if inventory else None}  # fmt: skip
    found = []
    for key in sorted(got.keys() | want.keys()):
        a, b = got.get(key, empty), want.get(key, empty)
        for figure in sorted(empty):
            x, y = a[figure], b[figure]
            same = x == y if x is None or y is None else x == pytest.approx(y, rel=1e-9, abs=1e-9)
            if not same:
                found.append(f"{key} {figure}: audit {x!r}, naive {y!r}")
    return found


async def _check(queries: HistoryQueries, pipeline: Pipeline, world: World, cluster: str) -> None:
    changes, seen = _feed(world, cluster)
    for c in changes:
        await pipeline.sink(c)
    await pipeline.drained()
    start, end = to_us(at(0)), to_us(at(END))
    problems = []
    for group_by, bucket in itertools.product(GROUPS, BUCKETS):
        rows = await queries.contention(start, end, group_by=group_by, cluster=cluster,
                                        bucket_us=None if bucket == END else bucket * 60_000_000)  # fmt: skip
        inventory = group_by != "NAMESPACE"
        got = _answered(rows, start, bucket, inventory)
        want = expected(seen, cluster, group_by, bucket)
        problems += [f"{group_by}/{bucket}m {p}" for p in _differences(got, want, inventory)]
    assert not problems, "\n".join([repr(world), *problems[:40]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_audit_figure_is_the_naive_recount(backend, request, tmp_path: Path) -> None:
    clusters = (f"audit-{n}" for n in itertools.count())
    with asyncio.Runner() as runner, contextlib.ExitStack() as stack:
        url = runner.run(stack.enter_context(_database(runner, backend, request, tmp_path)))
        runner.run(migrate(url))
        engine = open_engine(url)
        stack.callback(lambda: runner.run(engine.dispose()))
        pipeline = runner.run(_started(engine))
        stack.callback(lambda: runner.run(pipeline.stop()))
        queries = HistoryQueries(engine)

        @settings(max_examples=EXAMPLES if backend == "sqlite" else EXAMPLES // 2, deadline=None,
                  database=None, derandomize=not LONG,
                  suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
        @given(worlds())
        def check(world: World) -> None:
            runner.run(_check(queries, pipeline, world, next(clusters)))

        check()


async def _started(engine) -> Pipeline:
    return Pipeline(engine).start()


@contextlib.contextmanager
def _database(runner: asyncio.Runner, backend: str, request, tmp_path: Path):
    """The URL (as an awaitable) of a fresh database, dropped at the end."""
    manager = fresh_database(backend, request, tmp_path)

    async def url() -> str:
        return await manager.__aenter__()

    try:
        yield url()
    finally:
        runner.run(manager.__aexit__(None, None, None))
