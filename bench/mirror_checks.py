"""The truth the fault suite compares history with, and the comparison. Not a benchmark.

`Reference(stores, url)` reads the in-process simulator's own event log (`ClusterStore.
events_after`: every write, in resourceVersion order) and folds each event through the same
pure model the mirror uses (`ClusterIndex`, from a snapshot of the stores taken when it
starts), time-stamped with the moment of the write (a store listener notes it per
resourceVersion: listeners run inside the controller's cascades, so they see writes out of
order; the log does not); `await reference.write()` records those Changes with the real
history writer into a SQLite database of its own. That database is the reference log: the history
a mirror that saw every single event of the API servers, at the instant it happened, writes.

`compare(reference_url, mirror_url, gaps_ok=…)` puts the mirror's intervals (PostgreSQL)
beside the reference's, identity by identity, and classifies every difference:

* LOST — the reference has an interval the mirror does not, and it did not lie entirely
  inside a gap the mirror recorded (`unobservable` when it did: an object created and
  deleted while nobody watched cannot be seen by any watcher);
* PHANTOM — the mirror has an identity the reference never had;
* DUPLICATE — more intervals for one identity than the reference has, after joining the
  pieces a watcher restart splits (an interval ended `unwatched` and the next one);
* UNCLOSED / CLOSED — open on one side and closed on the other;
* LATE — a start or end more than `tolerance` seconds after the reference's.

Spells shorter than `transient` seconds (default 1) are set aside on both sides and only
counted: the reference folds every write on its own, while a watcher gets each kind on its
own stream and applies what arrives together as one batch, so states that last a few
milliseconds (a claim allocated, then reserved by the next write) need not show there.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import select

from bench.redis_common import LIST_ORDER, PLURALS
from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.models import (
    AllocationInterval,
    ConsumerInterval,
    DeviceInterval,
    Gap,
    IdleInterval,
    WaitInterval,
)
from dra_mirror.service.history.outbox import MemoryOutbox
from dra_mirror.service.history.times import US_PER_SECOND, to_rfc3339
from dra_mirror.service.history.writer import HistorySink, HistoryWriter, WriterOptions
from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.decode import decode_object
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.metadata import MalformedObject
from dra_mirror.service.sim.errors import ApiError

KIND_OF_PLURAL = {plural: kind for kind, plural in PLURALS.items()}
IDENTITIES = {
    AllocationInterval: ("cluster", "claim_uid", "request", "driver", "pool", "device", "share_id"),
    ConsumerInterval: ("cluster", "claim_uid", "pod_uid"),
    WaitInterval: ("cluster", "claim_uid"),
    IdleInterval: ("cluster", "claim_uid"),
    DeviceInterval: ("cluster", "driver", "pool", "device"),
}


def _now() -> str:
    return to_rfc3339(int(time.time() * US_PER_SECOND))


class Reference:
    def __init__(self, stores: dict[str, Any], url: str) -> None:
        self.url = url
        self.stores = stores
        self.indexes = {name: ClusterIndex(name) for name in stores}
        self.pending: list[Changes] = []
        self.events = 0
        self.malformed = 0
        self.restarts = 0
        self.times: dict[tuple[str, int], str] = {}
        self.read: dict[str, int] = {}
        self.epochs: dict[str, int] = {}
        for name, store in stores.items():
            at = _now()
            self.read[name] = store.resource_version
            self.epochs[name] = store.epoch
            for kind in LIST_ORDER:
                records = [
                    r for obj in store.list(PLURALS[kind]) if (r := self._record(kind, obj, name))
                ]
                self._keep(self.indexes[name].resync(kind, records, at=at))
            store.add_listener(lambda _type, _plural, obj, name=name: self._stamp(name, obj))
        self.engine = None
        self.writer: HistoryWriter | None = None

    def _stamp(self, cluster: str, obj: dict) -> None:
        self.times[(cluster, int(obj["metadata"]["resourceVersion"]))] = _now()

    def _record(self, kind: str, obj: dict, cluster: str):
        try:
            return decode_object(kind, orjson.dumps(obj), cluster=cluster)
        except MalformedObject:
            self.malformed += 1
            return None

    def _keep(self, changes: Changes) -> None:
        if changes:
            self.pending.append(changes)

    def poll(self) -> None:
        """Fold every event the simulators logged since the last poll, in order."""
        for cluster, store in self.stores.items():
            if store.epoch != self.epochs[cluster]:
                # the API server restarted (an etcd restore): every object got a new
                # resourceVersion, counting from a new base (lower than before, usually), and
                # the log starts after them: no transition, read on from there
                self.restarts += 1
                self.epochs[cluster] = store.epoch
                self.read[cluster] = store.floor
                self.times = {k: v for k, v in self.times.items() if k[0] != cluster}
            try:
                events = store.events_after(self.read[cluster])
            except ApiError as error:  # 410: the window moved past what was read
                raise RuntimeError(
                    f"reference of {cluster} fell behind the log: {error}"
                ) from error
            # a listener stamps a write after the cascade it caused (the controller's writes
            # run inside the first listener): a write happened no later than any after it
            stamps: list[str] = []
            earliest = _now()
            for event in reversed(events):
                earliest = min(earliest, self.times.pop((cluster, event.rv), earliest))
                stamps.append(earliest)
            for event, at in zip(events, reversed(stamps), strict=True):
                self.read[cluster] = event.rv
                kind = KIND_OF_PLURAL.get(event.plural)
                record = self._record(kind, event.obj, cluster) if kind is not None else None
                if record is None:
                    continue
                self.events += 1
                self._keep(self.indexes[cluster].apply([Event(event.type, record)], at=at))

    async def follow(self) -> None:
        import asyncio

        while True:
            self.poll()
            await asyncio.sleep(0.05)

    async def start(self) -> None:
        import asyncio

        await migrate(self.url)
        self.engine = open_engine(self.url)
        self.outbox = MemoryOutbox()
        self.sink = HistorySink(self.outbox)
        self.writer = HistoryWriter(self.engine, self.outbox, options=WriterOptions(linger=0.01))
        self._task = asyncio.create_task(self.writer.run())
        self._follow = asyncio.create_task(self.follow())

    async def write(self) -> None:
        """Every Changes so far into the reference database."""
        import asyncio

        self.poll()
        pending, self.pending = self.pending, []
        for changes in pending:
            await self.sink(changes)
        assert self.writer is not None
        await asyncio.wait_for(self.writer.drained(), 300)

    async def close(self) -> None:
        import asyncio

        for task in (self._task, self._follow):
            task.cancel()
        await asyncio.gather(self._task, self._follow, return_exceptions=True)
        if self.engine is not None:
            await self.engine.dispose()


@dataclass
class Comparison:
    intervals: dict[str, int] = field(default_factory=dict)  # reference intervals per table
    findings: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    unobservable: int = 0
    transient: dict[str, int] = field(default_factory=lambda: {"reference": 0, "mirror": 0})
    lateness: list[float] = field(default_factory=list)  # seconds, mirror start - reference start

    def count(self, kind: str) -> int:
        return len(self.findings.get(kind, []))


async def _intervals(url: str, table) -> dict[tuple, list[tuple[int, int | None, str | None]]]:
    engine = open_engine(url)
    try:
        async with engine.connect() as conn:
            columns = [getattr(table, name) for name in IDENTITIES[table]]
            rows = await conn.execute(
                select(*columns, table.start_us, table.end_us, table.end_reason)
            )
            found: dict[tuple, list] = defaultdict(list)
            for row in rows:
                found[tuple(row[: len(columns)])].append(tuple(row[len(columns) :]))
            return {key: sorted(spans) for key, spans in found.items()}
    finally:
        await engine.dispose()


async def _gaps(url: str) -> dict[str, list[tuple[int, int]]]:
    engine = open_engine(url)
    try:
        async with engine.connect() as conn:
            found: dict[str, list] = defaultdict(list)
            for cluster, start, end in await conn.execute(
                select(Gap.cluster, Gap.start_us, Gap.end_us)
            ):
                found[cluster].append((start, end))
            return found
    finally:
        await engine.dispose()


def _joined(spans: list[tuple]) -> list[tuple]:
    """The pieces a restart splits, joined: an interval ended `unwatched` and the next."""
    out: list[list] = []
    for start, end, reason in spans:
        if out and out[-1][2] == "unwatched":
            out[-1][1:] = [end, reason]
        else:
            out.append([start, end, reason])
    return [tuple(span) for span in out]


def _lasting(spans: dict[tuple, list], shortest: int, counts: dict, side: str) -> dict:
    kept: dict[tuple, list] = {}
    for key, found in spans.items():
        long = [s for s in found if s[1] is None or s[1] - s[0] >= shortest]
        counts[side] += len(found) - len(long)
        if long:
            kept[key] = long
    return kept


async def compare(reference_url: str, mirror_url: str, *, tolerance: float = 60.0,
                  transient: float = 1.0, gap_slack: float = 2.0) -> Comparison:  # fmt: skip
    """The mirror's history beside the reference's, identity by identity (module docstring).
    An identity counts as seen when the mirror has intervals of any length for it; only the
    reference's lasting intervals (`transient` seconds or more) must each be there."""
    result = Comparison()
    gaps = await _gaps(mirror_url)
    slack = int(tolerance * US_PER_SECOND)
    shortest = int(transient * US_PER_SECOND)
    in_gap = int(gap_slack * US_PER_SECOND)
    for table in IDENTITIES:
        name = table.__tablename__
        truth = await _intervals(reference_url, table)
        mirror = {
            key: _joined(spans) for key, spans in (await _intervals(mirror_url, table)).items()
        }
        lasting = _lasting(truth, shortest, result.transient, "reference")
        mirror_lasting = _lasting(mirror, shortest, result.transient, "mirror")
        result.intervals[name] = sum(len(v) for v in lasting.values())
        for key in mirror.keys() - truth.keys():
            result.findings["PHANTOM"].append(f"{name} {key}: {mirror[key]}")
        for key, spans in lasting.items():
            seen = mirror.get(key, [])
            inside = [s for s in spans if _in_gap(s, gaps.get(key[0], []), in_gap)]
            expected = [s for s in spans if s not in inside]
            result.unobservable += len(inside)
            if len(seen) < len(expected):
                result.findings["LOST"].append(
                    f"{name} {key}: reference {truth[key]}, mirror {seen}"
                )
                continue
            if len(mirror_lasting.get(key, [])) > len(truth[key]):
                result.findings["DUPLICATE"].append(
                    f"{name} {key}: reference {truth[key]}, mirror {seen}"
                )
                continue
            for s0, e0, _ in expected:
                s1, e1, _ = min(seen, key=lambda span: abs(span[0] - s0))
                result.lateness.append((s1 - s0) / US_PER_SECOND)
                if s1 - s0 > slack:
                    result.findings["LATE"].append(f"{name} {key}: start {s1 - s0} us late")
                if e0 is None and e1 is not None:
                    result.findings["CLOSED"].append(f"{name} {key}: reference open, mirror {e1}")
                elif e0 is not None and e1 is None:
                    result.findings["UNCLOSED"].append(f"{name} {key}: reference ended {e0}")
                elif e0 is not None and e1 is not None and e1 - e0 > slack:
                    result.findings["LATE"].append(f"{name} {key}: end {e1 - e0} us late")
    return result


def _in_gap(span: tuple, gaps: list[tuple[int, int]], slack: int) -> bool:
    """Lived entirely while the mirror recorded that nobody watched (give or take `slack`)."""
    start, end, _ = span
    return end is not None and any(g0 - slack <= start and end <= g1 + slack for g0, g1 in gaps)
