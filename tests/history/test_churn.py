"""End to end: the simulator's `churn` scenario over HTTP → the reactor (the real model) →
HistorySink → outbox → writer → SQL, checked against a truth recorded independently from the
simulator's own store.

The reactor gets the HistorySink itself, so its `cluster_started` hook runs too (a fresh
database: no gap). Time is virtual: the churn is advanced on a 0.5 s grid, and both the reactor's clock and the
truth recorder read the same grid time, so history's instants can be compared exactly. Between
grid steps the test waits until the reactor has consumed every watch event of the step.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from dra_mirror.service.history.times import US_PER_HOUR, US_PER_SECOND, to_us
from dra_mirror.service.reactor.reactor import ReactorSettings, run_reactors
from dra_mirror.service.sim.scenario import build_world, load_scenario
from tests.clusters.conftest import FAST, eventually
from tests.clusters.world import serving
from tests.history.conftest import Pipeline

T0 = datetime(2026, 6, 1, tzinfo=UTC)
GRID = 1.0
SECONDS = 120.0  # the GPUs fill up after about 90 s: later arrivals wait
MIRRORED = {"deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates",
            "pods", "nodes"}  # fmt: skip
SETTINGS = ReactorSettings(watch=FAST, status_interval=0.05, batch_max_delay=0.01)


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> datetime:
        return T0 + timedelta(seconds=self.now)


class StoreTruth:
    """Allocation, wait and consumer intervals as the simulator's store shows them, in grid
    seconds: [(claim uid, claim name, driver, pool, device, start, end|None)], waits [(claim
    uid, start, end)], consumers [(claim uid, pod name, start, end)]."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.events = 0
        self.allocations: list[list] = []
        self.waits: list[list] = []
        self.served: set[tuple[str, float]] = set()  # (claim uid, wait start) ended allocated
        self.consumers: list[list] = []
        self._held: dict[str, dict[tuple, list]] = {}
        self._waiting: dict[str, list] = {}
        self._reserved: dict[str, dict[str, list]] = {}
        # idle: allocated, and no pod in reservedFor Running
        self.idle: list[list] = []
        self._claims: dict[str, tuple[bool, frozenset[str]]] = {}
        self._phases: dict[str, str] = {}
        self._idle: dict[str, list] = {}
        self._versions: dict[str, int] = {}

    def _idle_check(self, uid: str, now: float) -> None:
        allocated, reserved = self._claims.get(uid, (False, frozenset()))
        idle = allocated and not any(self._phases.get(p) == "Running" for p in reserved)
        if idle and uid not in self._idle:
            self._idle[uid] = [uid, now, None]
            self.idle.append(self._idle[uid])
        elif not idle and uid in self._idle:
            self._idle.pop(uid)[2] = now

    def record(self, kind: str, plural: str, obj: dict) -> None:
        if plural in MIRRORED:
            self.events += 1
        now = self.clock.now
        meta = obj["metadata"]
        # The store calls listeners after nested writes (the controller reacting inside a
        # create): an object's events can arrive out of order; its resourceVersion cannot.
        version = int(meta.get("resourceVersion") or 0)
        if version <= self._versions.get(meta.get("uid"), -1):
            return
        self._versions[meta.get("uid")] = version
        if plural == "pods":
            phase = "Gone" if kind == "DELETED" else (obj.get("status") or {}).get("phase", "")
            self._phases[meta["uid"]] = phase
            for uid, (_allocated, reserved) in list(self._claims.items()):
                if meta["uid"] in reserved:
                    self._idle_check(uid, now)
        if plural != "resourceclaims":
            return
        uid, name = meta["uid"], meta["name"]
        status = {} if kind == "DELETED" else obj.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        held = {(r["request"], r["driver"], r["pool"], r["device"], r.get("shareID"))
                for r in results}  # fmt: skip
        open_held = self._held.setdefault(uid, {})
        for key in [k for k in open_held if k not in held]:
            open_held.pop(key)[6] = now
        for key in held - open_held.keys():
            row = [uid, name, key[1], key[2], key[3], now, None]
            open_held[key] = row
            self.allocations.append(row)
        pending = kind != "DELETED" and not results
        if pending and uid not in self._waiting:
            self._waiting[uid] = [uid, now, None]
            self.waits.append(self._waiting[uid])
        elif not pending and uid in self._waiting:
            wait = self._waiting.pop(uid)
            wait[2] = now
            if kind != "DELETED":
                self.served.add((uid, wait[1]))  # allocated: served (else abandoned)
        pods = {c["uid"]: c["name"] for c in status.get("reservedFor") or []}
        open_pods = self._reserved.setdefault(uid, {})
        for pod_uid in [p for p in open_pods if p not in pods]:
            open_pods.pop(pod_uid)[3] = now
        for pod_uid in pods.keys() - open_pods.keys():
            open_pods[pod_uid] = [uid, pods[pod_uid], now, None]
            self.consumers.append(open_pods[pod_uid])
        self._claims[uid] = (bool(results), frozenset(pods))
        self._idle_check(uid, now)


def _seconds(us: int | None) -> float | None:
    return None if us is None else (us - to_us(T0)) / US_PER_SECOND


async def test_churn_history_matches_the_simulator(engine, queries, tmp_path):
    world = build_world(load_scenario("churn"))
    store = world.stores["churn"]
    churn = world.churns["churn"]
    clock = VirtualClock()
    truth = StoreTruth(clock)
    store.add_listener(truth.record)
    pipeline = Pipeline(engine).start()

    class NoStatus:
        async def set_status(self, _status) -> None:
            return None

    try:
        async with serving(tmp_path, *world.specs) as (_sim, connections):
            async with await run_reactors(connections, sinks=[pipeline.sink], status_sink=NoStatus(),
                                          settings=SETTINGS, clock=clock) as reactors:  # fmt: skip
                await reactors.wait_synced()
                reactor = reactors.by_name["churn"]
                baseline = reactor.status.events - truth.events
                steps = 0
                while clock.now < SECONDS:
                    clock.now += GRID
                    steps += len(churn.advance(clock.now))
                    await eventually(lambda: reactor.status.events >= baseline + truth.events)
                assert steps > 200  # arrivals, successes and departures happened
        await pipeline.drained()
    finally:
        await pipeline.stop()

    # the reactor said the cluster started; history had never seen it: no gap
    assert await queries.gaps(to_us(T0), to_us(T0 + timedelta(hours=1))) == []

    # every allocation interval, exactly
    got = await _allocations(engine)
    expected = sorted((uid, pool, device, start, end) for uid, _n, _d, pool, device, start, end
                      in truth.allocations)  # fmt: skip
    assert got == expected
    assert len(expected) > 20 and any(end is None for *_, end in expected)

    # every wait that lasted, exactly (a claim created and allocated in one step never waited)
    waits = await _waits(engine)
    assert waits == sorted(
        (uid, start, end) for uid, start, end in truth.waits if end is None or end > start
    )
    assert waits, "the GPUs were full at times: some claims must have waited"

    # every idle spell that lasted (allocated, no consumer pod Running), exactly: in churn
    # the controller deallocates a claim once no pod reserves it, so none lasts; history
    # must not invent one either
    idle = await _idle(engine)
    assert idle == sorted(
        (uid, start, end) for uid, start, end in truth.idle if end is None or end > start
    )

    # the audit over the whole run, against the truth's own arithmetic
    end_us = to_us(T0 + timedelta(seconds=SECONDS + GRID))
    (row,) = await queries.contention(to_us(T0), end_us, group_by="CLUSTER")
    held = sum(((SECONDS + GRID) if end is None else end) - start
               for *_, start, end in truth.allocations)  # fmt: skip
    assert row.device_hours_allocated == round(held * US_PER_SECOND) / US_PER_HOUR
    # the wait figures are over served waits (allocated), none of them before observation
    served = [(uid, start, end) for uid, start, end in truth.waits
              if (uid, start) in truth.served and end > start]  # fmt: skip
    durations = sorted(round((end - start) * US_PER_SECOND) for _uid, start, end in served)
    assert row.claims_waited == len({uid for uid, _s, _e in served})
    assert row.claims_abandoned == sum(
        1
        for uid, start, end in truth.waits
        if end is not None and end > start and (uid, start) not in truth.served
    )
    assert row.wait_max == durations[-1] / US_PER_SECOND
    assert row.wait_p50 == durations[math.ceil(0.5 * len(durations)) - 1] / US_PER_SECOND

    # whoHeld at chosen instants: the claim and the pods the store showed then
    checked = 0
    for at in (10.0, 45.0, 100.0, SECONDS):
        for uid, name, driver, pool, device, start, end in truth.allocations:
            if not (start <= at and (end is None or at < end)):
                continue
            held_now = await queries.who_held(f"{driver}/{pool}/{device}",
                                              to_us(T0 + timedelta(seconds=at)))  # fmt: skip
            claims = {h.claim: sorted(p.name for p in h.pods) for h in held_now}
            assert name in claims
            pods = sorted(pod for c_uid, pod, s, e in truth.consumers
                          if c_uid == uid and s <= at and (e is None or at < e))  # fmt: skip
            assert claims[name] == pods
            checked += 1
    assert checked > 20


async def _allocations(engine):
    from sqlalchemy import select

    from dra_mirror.service.history.models import AllocationInterval as A

    async with engine.connect() as conn:
        rows = await conn.execute(select(A.claim_uid, A.pool, A.device, A.start_us, A.end_us))
        return sorted((u, p, d, _seconds(s), _seconds(e)) for u, p, d, s, e in rows)


async def _waits(engine):
    from sqlalchemy import select

    from dra_mirror.service.history.models import WaitInterval as W

    async with engine.connect() as conn:
        rows = await conn.execute(select(W.claim_uid, W.start_us, W.end_us))
        return sorted((u, _seconds(s), _seconds(e)) for u, s, e in rows if e is None or e > s)


async def _idle(engine):
    from sqlalchemy import select

    from dra_mirror.service.history.models import IdleInterval as I

    async with engine.connect() as conn:
        rows = await conn.execute(select(I.claim_uid, I.start_us, I.end_us))
        return sorted((u, _seconds(s), _seconds(e)) for u, s, e in rows if e is None or e > s)
