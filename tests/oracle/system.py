"""The mirror under test, behind one small adapter: the ONLY module of the oracle tests that
touches dra_mirror's internals (how records are made, how the index and the stores are fed).

    system = await System.start("c1", redis_url=…, history=…, at=…)
    await system.apply([("ADDED", raw), …], at=…)      # watch events, raw dicts
    await system.relist("ResourceClaim", [raw, …], at=…) # a complete LIST (after a 410)
    await system.handover({kind: [raw, …]}, order=[…], at=…)  # a second watcher takes over
    answers = await system.answers(devices=[…])        # GraphQL answers, per store

It plays what a watching process does: raw objects are decoded by the model's decoder (as the
watcher does with API bytes; malformed ones are counted and skipped), folded by the reactor's
`ClusterIndex`, and each `Changes` goes to every sink in order: the in-memory store (with live
events), the Redis store, the history outbox. Answers are read back only through the GraphQL
schema, executed in-process, over each store. When the way stores are fed changes, this module
changes and nothing else does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from dra_mirror.schema import build_schema
from dra_mirror.schema.context import make_context
from dra_mirror.service.model.decode import decode_object
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from dra_mirror.service.model.metadata import MalformedObject
from dra_mirror.service.settings import GraphQLSettings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.oracle import documents as q

Raw = dict[str, Any]
SETTINGS = GraphQLSettings(max_page_size=1000, default_page_size=1000)
WATCHED = frozenset(KINDS)  # kinds the mirror watches; others never reach it


@dataclass
class Answer:
    """One document's result: `data` (may be partial) and the error messages."""

    data: dict[str, Any] | None
    errors: list[str] = field(default_factory=list)


@dataclass
class StoreAnswers:
    """Every document's answer from one store."""

    by_document: dict[str, Answer] = field(default_factory=dict)
    holds: dict[str, Answer] = field(default_factory=dict)  # whoHolds by "driver/pool/device"
    published: dict[str, Answer] = field(default_factory=dict)  # unpublished held devices


def instant(at: str) -> datetime:
    return datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(UTC)


class _Watcher:
    """One watching process per store, as deployed: an embedded one (the in-memory store IS
    its reactor's index) and, with a Redis URL, one writing Redis from its own reactor's index
    (whose Changes carry the reverse-map deltas a store outside the process needs). Both are
    fed the same events; history is written from the embedded one."""

    def __init__(self, cluster: str, redis_url: str | None, prefix: str) -> None:
        self.memory = MemoryStore()
        self.index: ClusterIndex = self.memory.open_index(cluster)  # the store serves it
        self.redis: Any = None
        self.redis_index: ClusterIndex | None = None
        if redis_url:
            from dra_mirror.service.stores.redis import RedisStore

            self.redis = RedisStore.from_url(redis_url, prefix=prefix)
            self.redis_index = self.redis.open_index(cluster)

    def pairs(self) -> list[tuple[ClusterIndex, Any]]:
        """(index, store) per watching process."""
        found: list[tuple[ClusterIndex, Any]] = [(self.index, self.memory)]
        if self.redis_index is not None:
            found.append((self.redis_index, self.redis))
        return found

    def stores(self) -> list[Any]:
        return [s for s in (self.memory, self.redis) if s is not None]


class System:
    def __init__(self, cluster: str, *, redis_url: str | None, history: Any, prefix: str) -> None:
        self.cluster = cluster
        self.redis_url, self.prefix, self.history = redis_url, prefix, history
        self.schema = quiet_schema()
        self.malformed: list[str] = []
        self.watcher = _Watcher(cluster, redis_url, prefix)
        self.live: list[dict[str, Any]] = []  # live events received, in order
        self._subscriptions: list[asyncio.Task[None]] = []
        self.now = datetime(2026, 5, 1, tzinfo=UTC)

    @classmethod
    async def start(
        cls, cluster: str, *, redis_url: str | None = None, history: Any = None,
        prefix: str | None = None, at: str,
    ) -> System:  # fmt: skip
        """`prefix`: the Redis key prefix (default: one of the cluster's own, so that clusters
        of earlier runs on the same redis-server stay out of its answers)."""
        system = cls(
            cluster, redis_url=redis_url, history=history, prefix=prefix or f"oracle-{cluster}"
        )
        await system._started(at)
        return system

    async def _started(self, at: str) -> None:
        # A fresh index starts watching: history closes what an earlier process left open.
        if self.history is not None:
            await self.history.sink.cluster_started(self.cluster, at)
        await self._subscribe()

    # --- feeding ----------------------------------------------------------------------------

    def _record(self, kind: str, raw: Raw) -> Any:
        try:
            return decode(kind, raw, cluster=self.cluster)
        except MalformedObject as error:
            self.malformed.append(str(error))
            return None

    async def _deliver(self, fold: Any) -> None:
        """`fold(index)`: the Changes of one batch in one watching process's index."""
        for number, (index, store) in enumerate(self.watcher.pairs()):
            changes = fold(index)
            if not changes:
                continue
            await store.apply(changes)
            if number == 0 and self.history is not None:
                await self.history.sink(changes)
        await self._settle()

    async def apply(self, events: Iterable[tuple[str, Raw]], *, at: str) -> None:
        """Watch events (ADDED / MODIFIED / DELETED with the raw object), as one batch."""
        folded = []
        for type_, raw in events:
            if raw.get("kind") not in WATCHED:
                continue
            record = self._record(raw["kind"], raw)
            if record is not None:
                folded.append(Event(type_, record))
        self.now = instant(at)
        await self._deliver(lambda index: index.apply(folded, at=at))

    async def relist(self, kind: str, objects: Iterable[Raw], *, at: str) -> None:
        """A complete LIST of `kind` (the first one, or after 410 Gone): it replaces the state."""
        if kind not in WATCHED:
            return
        records = [r for r in (self._record(kind, raw) for raw in objects) if r is not None]
        self.now = instant(at)
        await self._deliver(lambda index: index.resync(kind, records, at=at))

    async def synced(self, at: str) -> None:
        """Every kind was listed: the watcher says so (the Redis store then sweeps what an
        earlier writer left and this one never reported)."""
        status = ClusterStatus(
            name=self.cluster, connected=True, synced=True, api_version="v1",
            last_event_at=at, last_sync_at=at,
        )  # fmt: skip
        for store in self.watcher.stores():
            await store.set_status(status)

    async def reconnected(self, since: str, at: str) -> None:
        """The watch came back after a disconnection: history marks the gap."""
        if self.history is not None:
            await self.history.sink.record_gap(self.cluster, since, at)

    async def handover(
        self, lists: dict[str, list[Raw]], *, order: list[str], at: str, connected: bool = True
    ) -> None:
        """The watcher stops; another process (empty index, new stores over the same Redis
        keys, the same history) lists every kind in `order` and carries on. A watcher that
        stops `connected` says, as a reactor's clean stop does, that it watched until `at`."""
        if connected and self.history is not None:
            await self.history.sink.cluster_watched(self.cluster, at)
        await self._close_watcher()
        self.watcher = _Watcher(self.cluster, self.redis_url, self.prefix)
        await self._started(at)
        if self.watcher.redis_index is not None:  # the new holder starts from what Redis holds
            seed = await self.watcher.redis.held(self.cluster)
            if seed.records:
                self.watcher.redis_index.seed(seed, at=at)
        for kind in order:
            await self.relist(kind, lists.get(kind, []), at=at)
        await self.synced(at)

    # --- answers ----------------------------------------------------------------------------

    async def run(self, store: Any, document: str, **variables: Any) -> Answer:
        return await ask(
            self.schema, store, self.cluster, document, history=self.history,
            now=lambda: self.now, **variables,
        )  # fmt: skip

    async def answers(
        self, devices: Iterable[str], unpublished: Iterable[str] = ()
    ) -> dict[str, StoreAnswers]:
        """Every document over every store; `devices` ("driver/pool/device") are asked
        through whoHolds one by one, and `unpublished` (held, no slice) through their holding
        for `published`."""
        named = {"memory": self.watcher.memory, "redis": self.watcher.redis}
        return {
            name: await store_answers(
                self.schema, store, self.cluster, devices, unpublished, now=lambda: self.now
            )
            for name, store in named.items()
            if store is not None
        }

    async def device_history(
        self, devices: Iterable[str], *, start: str, end: str
    ) -> dict[str, Answer]:
        """deviceHistory over [start, end) per device ("driver/pool/device" or a uuid), once
        the history writer has drained what was handed to it."""
        await asyncio.wait_for(self.history.writer.drained(), 30)
        window = {"from": start, "to": end}
        return {
            d: await self.run(self.watcher.memory, q.DEVICE_HISTORY, device=d, **window)
            for d in devices
        }

    async def claim_history(
        self, claims: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], Answer]:
        """claimHistory of each (namespace, name)."""
        await asyncio.wait_for(self.history.writer.drained(), 30)
        return {
            (ns, name): await self.run(
                self.watcher.memory, q.CLAIM_HISTORY, namespace=ns, name=name
            )
            for ns, name in claims
        }

    async def who_held(
        self, devices: Iterable[str], instants: Iterable[str]
    ) -> dict[tuple[str, str], Answer]:
        """whoHeld of each device at each instant."""
        await asyncio.wait_for(self.history.writer.drained(), 30)
        moments = list(instants)
        return {
            (d, t): await self.run(self.watcher.memory, q.WHO_HELD, device=d, at=t)
            for d in devices
            for t in moments
        }

    # --- live events ------------------------------------------------------------------------

    async def _subscribe(self) -> None:
        self._subscriptions = [
            asyncio.create_task(self._listen(doc)) for doc in (q.CLAIM_EVENTS, q.DEVICE_EVENTS)
        ]
        await self._settle()

    async def _listen(self, document: str) -> None:
        context = make_context(self.watcher.memory, settings=SETTINGS, now=lambda: self.now)
        stream: Any = await self.schema.subscribe(
            document, variable_values={"cluster": self.cluster}, context_value=context
        )
        async with contextlib.aclosing(stream) as results:
            async for result in _results(results):
                self.live.append(
                    {"data": result.data, "errors": [e.message for e in result.errors or ()]}
                )

    async def _settle(self) -> None:
        """Let the subscribers take what the last batch published (the in-process bus hands
        events over without I/O, so a few turns of the loop are enough)."""
        for _ in range(8):
            await asyncio.sleep(0)

    # --- closing ----------------------------------------------------------------------------

    async def _close_watcher(self) -> None:
        for task in self._subscriptions:
            task.cancel()
        for task in self._subscriptions:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._subscriptions = []
        self.live.append({"resubscribed": True})
        for store in self.watcher.stores():
            await store.close()

    async def close(self) -> None:
        await self._close_watcher()


def decode(kind: str, raw: Raw, *, cluster: str) -> Any:
    """The record the watcher makes of one raw object (MalformedObject when it cannot)."""
    return decode_object(kind, orjson.dumps(raw), cluster=cluster)


def quiet_schema() -> Any:
    schema = build_schema(SETTINGS)
    # Errors are answers here (compared, classified); strawberry need not log each one.
    schema.process_errors = lambda errors, execution_context=None: None  # type: ignore[method-assign]
    return schema


async def ask(
    schema: Any, store: Any, cluster: str, document: str, *, history: Any = None,
    now: Any = None, **variables: Any,
) -> Answer:  # fmt: skip
    """One document executed in-process over `store`, as the app would answer it."""
    context = make_context(store, settings=SETTINGS, history=history, now=now or _utc)
    result = await schema.execute(
        document, variable_values={"cluster": cluster, **variables}, context_value=context
    )
    return Answer(result.data, [e.message for e in result.errors or ()])


async def store_answers(
    schema: Any, store: Any, cluster: str, devices: Iterable[str], unpublished: Iterable[str],
    *, now: Any = None,
) -> StoreAnswers:  # fmt: skip
    """Every whole-cluster document, whoHolds of `devices` ("driver/pool/device") one by one,
    and `published` of the `unpublished` (held, no slice) through their holding."""
    found = StoreAnswers()
    for doc in q.WHOLE_CLUSTER:
        found.by_document[doc] = await ask(schema, store, cluster, doc, now=now)
    for device in sorted(set(devices)):
        found.holds[device] = await ask(schema, store, cluster, q.WHO_HOLDS, now=now, device=device)
    for device in sorted(set(unpublished)):
        found.published[device] = await ask(
            schema, store, cluster, q.HELD_PUBLISHED, now=now, device=device
        )
    return found


def _utc() -> datetime:
    return datetime.now(UTC)


async def _results(stream: Any) -> AsyncIterator[Any]:
    async for result in stream:
        yield result


# --- served by the simulator, watched by the real watcher ---------------------------------


def simulated_cluster(name: str, objects: Iterable[Raw]) -> Any:
    """A simulated cluster holding `objects` as etcd would: each converted from the version it
    is written in to the v1 storage shape, stored as given (no validation, as a cluster's
    own history may hold what today's validation refuses). Kinds the simulator does not serve
    are left out; returns the store."""
    from dra_mirror.service.model.kinds import BY_PLURAL as RESOURCES
    from dra_mirror.service.sim import convert
    from dra_mirror.service.sim.store import ClusterStore

    plurals = {r.kind: r.plural for r in RESOURCES.values()}
    grouped: dict[str, list[Raw]] = {}
    for raw in objects:
        plural = plurals.get(raw.get("kind") or "")
        if plural is None:
            continue
        group, _, version = str(raw.get("apiVersion") or "v1").rpartition("/")
        if group == convert.DRA_GROUP:  # v1alpha3 wraps devices in `basic` as v1beta1 does
            raw = convert.to_storage(plural, raw, "v1beta1" if version == "v1alpha3" else version)
        grouped.setdefault(plural, []).append(raw)
    namespaces = {
        o["metadata"].get("namespace") or "default"
        for plural, objs in grouped.items()
        for o in objs
        if RESOURCES[plural].namespaced
    }
    store = ClusterStore(name, seed=1)
    store.bulk_load("namespaces", [{"metadata": {"name": n}} for n in sorted(namespaces)])
    for plural in sorted(grouped):
        store.bulk_load(plural, grouped[plural])
    return store


@contextlib.asynccontextmanager
async def watched(
    stores: Iterable[Any], *, versions: tuple[str, ...], directory: Any
) -> AsyncIterator[Any]:
    """The simulator serving `stores` (resource.k8s.io `versions`), the real watchers of
    every cluster syncing them into a memory store; yields that store once every cluster is
    synced (its `statuses` say what each watcher saw)."""
    from dra_mirror.service.clusters.config import close_all, connect
    from dra_mirror.service.clusters.watching import WatchSettings
    from dra_mirror.service.reactor.reactor import ReactorSettings, run_reactors
    from dra_mirror.service.sim.run import ClusterSpec, Simulator

    fast = WatchSettings(watch_timeout=2, watch_timeout_jitter=0.0, stream_grace=2.0,
                         list_time_limit=10.0, backoff_base=0.01, backoff_cap=0.05)  # fmt: skip
    memory = MemoryStore()
    specs = [ClusterSpec(store, versions=versions) for store in stores]
    kubeconfig = directory / "kubeconfig"
    async with Simulator(specs, kubeconfig_path=kubeconfig, bookmark_interval=0.2) as sim:
        connections = await connect(str(kubeconfig), None)
        try:
            reactors = await run_reactors(
                connections, sinks=[memory], status_sink=memory, open_index=memory.open_index,
                settings=ReactorSettings(watch=fast, status_interval=0.05), tune_gc=False,
            )  # fmt: skip
            async with reactors:
                await asyncio.wait_for(reactors.wait_synced(), 30)
                memory.simulator = sim  # type: ignore[attr-defined]
                yield memory
        finally:
            await close_all(connections)
