"""Shared by the history benchmarks: a scratch PostgreSQL database and a churn generator.

The database URL comes from `--url`, else `DRA_MIRROR_BENCH_POSTGRES_URL`, else the test
suite's `DRA_MIRROR_TEST_POSTGRES_URL` (what `python -m tests.infra.stack up DIR` prints); a
fresh database is created on that server for the run and dropped afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dra_mirror.service.model.changes import Changes, Transition
from dra_mirror.service.model.records import (
    Allocation,
    AllocationResult,
    ClaimRecord,
    Consumer,
    Meta,
    PodClaim,
    PodRecord,
    Request,
)


def server_url(flag: str | None) -> str:
    url = flag or os.environ.get("DRA_MIRROR_BENCH_POSTGRES_URL")
    url = url or os.environ.get("DRA_MIRROR_TEST_POSTGRES_URL")
    if not url:
        raise SystemExit(
            "give --url postgresql+asyncpg://USER@127.0.0.1:PORT/DB (or start one with "
            "`python -m tests.infra.stack up /tmp/run` and eval its exports)"
        )
    return url


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextlib.asynccontextmanager
async def scratch_database(url: str, prefix: str) -> AsyncIterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = asyncpg_dsn(make_url(url).set(database="postgres").render_as_string(False))
    conn = await asyncpg.connect(admin)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        conn = await asyncpg.connect(admin)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


def rfc3339(seconds: float) -> str:
    from dra_mirror.service.history.times import to_rfc3339

    return to_rfc3339(int(seconds * 1_000_000))


def _claim(cluster, ns, name, uid, created, requests, rv, state, *, alloc=None, reserved=()):
    meta = Meta(cluster=cluster, name=name, namespace=ns, uid=uid, resource_version=str(rv),
                created_at=created)  # fmt: skip
    return ClaimRecord(meta=meta, requests=requests, allocation=alloc, reserved_for=reserved,
                       state=state)  # fmt: skip


def _pod(cluster, ns, name, uid, created, node, claim_name, rv, phase):
    meta = Meta(cluster=cluster, name=name, namespace=ns, uid=uid, resource_version=str(rv),
                created_at=created)  # fmt: skip
    return PodRecord(meta=meta, phase=phase, node_name=node,
                     claims=(PodClaim(name="gpu", claim_name=claim_name),))  # fmt: skip


def churn(claims: int, *, seed: int = 7, start: float = 1_780_000_000.0) -> list[Changes]:
    """One Changes per watch event for `claims` claim lifecycles on one cluster, in time order:
    created (pending) → allocated → pod running (reserved) → pod done → claim and pod deleted.
    Per claim: 8 object versions and 5 intervals (a wait, an allocation, a consumer, two idle
    spells)."""
    rng = random.Random(seed)
    cluster = "bench"
    events: list[tuple[float, int, Changes]] = []
    for i in range(claims):
        t = start + i * 2.0
        ns = f"team-{i % 20}"
        name = f"job-{i}-gpu"
        uid = f"claim-{i:08d}"
        pod_uid = f"pod-{i:08d}"
        node = f"node-{rng.randrange(500)}"
        device = f"gpu-{rng.randrange(8)}"
        gpu_uuid = f"GPU-{node}-{device}"
        base = {"cluster": cluster, "namespace": ns, "claim": name, "claim_uid": uid,
                "class_names": ("gpu.nvidia.com",)}  # fmt: skip
        held = {**base, "driver": "gpu.nvidia.com", "pool": node, "device": device,
                "uuid": gpu_uuid, "node": node, "request": "gpu"}  # fmt: skip
        requests = (Request(name="gpu", device_class_name="gpu.nvidia.com"),)
        allocation = Allocation(
            results=(AllocationResult("gpu", "gpu.nvidia.com", node, device),), node_name=node
        )
        consumer = (Consumer("pods", f"job-{i}", pod_uid),)

        claim = functools.partial(_claim, cluster, ns, name, uid, rfc3339(t), requests)
        pod = functools.partial(_pod, cluster, ns, f"job-{i}", pod_uid, rfc3339(t), node, name)

        rv = i * 10
        run = 600.0 + rng.random() * 600
        steps = [
            (t, [claim(rv + 1, "pending")], [],
             [Transition("claim_created", at=rfc3339(t), **base),
              Transition("wait_started", at=rfc3339(t), **base)]),
            (t + 3, [claim(rv + 2, "allocated", alloc=allocation)], [],
             [Transition("wait_ended", at=rfc3339(t + 3), reason="allocated", **base),
              Transition("allocated", at=rfc3339(t + 3), **held),
              Transition("idle_started", at=rfc3339(t + 3), **base)]),
            (t + 5, [claim(rv + 3, "reserved", alloc=allocation, reserved=consumer),
                     pod(rv + 4, "Running")], [],
             [Transition("consumer_added", at=rfc3339(t + 5), pod=f"job-{i}", pod_uid=pod_uid,
                         **base),
              Transition("idle_ended", at=rfc3339(t + 5), **base)]),
            (t + run, [pod(rv + 5, "Succeeded"), claim(rv + 6, "allocated", alloc=allocation)], [],
             [Transition("consumer_removed", at=rfc3339(t + run), pod=f"job-{i}",
                         pod_uid=pod_uid, **base),
              Transition("idle_started", at=rfc3339(t + run), **base)]),
            (t + run + 10, [], [claim(rv + 7, "allocated", alloc=allocation), pod(rv + 8, "Succeeded")],
             [Transition("released", at=rfc3339(t + run + 10), **held),
              Transition("idle_ended", at=rfc3339(t + run + 10), **base),
              Transition("claim_deleted", at=rfc3339(t + run + 10), **base)]),
        ]  # fmt: skip
        for step, (when, upserts, deletes, transitions) in enumerate(steps):
            changes = Changes(cluster, rfc3339(when), upserts=upserts, deletes=deletes,
                              transitions=transitions)  # fmt: skip
            events.append((when, i * 10 + step, changes))
    events.sort(key=lambda e: (e[0], e[1]))
    return [changes for _, _, changes in events]
