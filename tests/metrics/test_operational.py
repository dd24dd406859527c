"""The operational series of a whole mirror (`mirror_app`: watchers, SQLite history) over a
simulated cluster: store apply latency per sink, history backlog and rows, watch events as the
cluster changes, GraphQL latency by operation, the DRA cache, and every name and label exactly
as docs/operations.md lists them."""

from __future__ import annotations

import contextlib
import zlib
from datetime import UTC, datetime
from pathlib import Path

from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.runtime import History
from dra_mirror.service.http.metrics import MAX_OPERATIONS
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.reactor.reactor import ReactorSettings, run_reactors
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import ClusterSettings, HistorySettings, Settings
from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.redis import RedisStore
from tests.clusters.conftest import FAST, eventually
from tests.clusters.world import claim, device_class, device_slice, serving, small_world
from tests.feeding import feed
from tests.metrics.scrape import Scrape, client, scrape

CLASS = normalize("DeviceClass", device_class(), cluster="east")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def whole_mirror(tmp_path: Path):
    world = small_world("east")
    kubeconfig = tmp_path / "kubeconfig"
    settings = Settings(
        clusters=ClusterSettings(kubeconfig=str(kubeconfig)),
        history=HistorySettings(database_url=str(tmp_path / "history.db")),
    )
    async with Simulator([world], kubeconfig_path=kubeconfig):
        app = mirror_app(settings, store=MemoryStore())
        async with client(app) as http:
            state = app.state.mirror
            await state.reactors.wait_synced()
            yield world, state, http


def history_counts(metrics: Scrape) -> tuple[float, float]:
    state = metrics.value("dra_mirror_store_apply_seconds_count", store="state")
    history = metrics.value("dra_mirror_store_apply_seconds_count", store="history")
    return state, history


async def test_stores_watch_and_cache_follow_the_cluster(tmp_path: Path) -> None:
    async with whole_mirror(tmp_path) as (world, state, http):
        reactor = state.reactors.reactors.by_name["east"]
        await state.history.writer.drained()
        metrics = await scrape(http)
        state_batches, history_batches = history_counts(metrics)
        # Every batch goes to the state store, then to the history outbox: once each.
        assert state_batches == history_batches > 0
        assert metrics.value("dra_mirror_history_outbox_backlog") == 0
        rows = metrics.value("dra_mirror_history_rows_written_total")
        assert rows == state.history.writer.stats.rows > 0
        # A first watch of a cluster leaves no gap behind it.
        assert metrics.value("dra_mirror_history_gaps_total") == 0
        assert (
            metrics.value("dra_mirror_watch_events_total", cluster="east") == reactor.status.events
        )
        claims_before = len(metrics.series("kube_resourceclaim_info", cluster="east"))
        assert claims_before == len(world.list("resourceclaims"))

        # The DRA series are cached: a new claim shows once the cache is older than its TTL.
        clock = FakeClock()
        state.metrics.clock = clock
        state.metrics._dra_at = float("-inf")
        await scrape(http)
        world.create("resourceclaims", claim("late"))
        await eventually(lambda: reactor.status.events > 0 and reactor.index.get(
            ("east", "ResourceClaim", "default", "late")) is not None)  # fmt: skip
        await eventually(
            lambda: len(state.store.index("east").records("ResourceClaim")) == claims_before + 1
        )
        cached = await scrape(http)
        assert len(cached.series("kube_resourceclaim_info", cluster="east")) == claims_before
        clock.now += state.metrics.dra_ttl
        fresh = await scrape(http)
        assert len(fresh.series("kube_resourceclaim_info", cluster="east")) == claims_before + 1
        assert (
            fresh.value("dra_mirror_watch_events_total", cluster="east")
            == reactor.status.events
            >= 1
        )
        pending = sum(1 for c in world.list("resourceclaims") if not c.get("status"))
        assert fresh.value("dra_mirror_claims", cluster="east", state="pending") == pending
        assert history_counts(fresh)[0] > state_batches


async def test_graphql_latency_by_operation_and_errors() -> None:
    app = compose_app(Settings(), store=MemoryStore())
    async with client(app) as http:
        for _ in range(3):
            await http.post("/graphql", json={"query": "query Clusters { clusters { name } }"})
        await http.post(
            "/graphql",
            json={
                "query": "query A { clusters { name } } query B { nodes { name } }",
                "operationName": "B",
            },
        )
        await http.post("/graphql", json={"query": "{ clusters { name } }"})
        await http.post("/graphql", json={"query": "query Broken { clusters { nope } }"})
        metrics = await scrape(http)
    counts = metrics.series("dra_mirror_graphql_request_seconds_count")
    assert {dict(k)["operation"]: v for k, v in counts.items()} == {
        "Clusters": 3,
        "B": 1,
        "anonymous": 1,
        "Broken": 1,
    }
    errors = metrics.series("dra_mirror_graphql_errors_total")
    assert {dict(k)["operation"]: v for k, v in errors.items()} == {"Broken": 1}


def test_operation_names_are_capped() -> None:
    metrics = compose_app(Settings(), store=MemoryStore()).state.mirror.metrics
    labels = [metrics.operation_label(f"Op{i}", None) for i in range(MAX_OPERATIONS + 50)]
    assert labels[:MAX_OPERATIONS] == [f"Op{i}" for i in range(MAX_OPERATIONS)]
    assert set(labels[MAX_OPERATIONS:]) == {"other"}
    assert metrics.operation_label("Op0", None) == "Op0"  # known names keep their series
    assert metrics.operation_label(None, "mutation Save($x: Int) { a }") == "other"
    assert metrics.operation_label("not a name!", None) == "anonymous"


async def test_backlog_counts_what_waits_for_sql(tmp_path: Path) -> None:
    history = History(open_engine(str(tmp_path / "unused.db")))  # its writer never started
    app = compose_app(Settings(), store=MemoryStore(), history=opened(history))
    async with client(app) as http:
        assert (await scrape(http)).value("dra_mirror_history_outbox_backlog") == 0
        for i in range(7):
            await history.sink.cluster_started("east", f"2026-01-01T00:00:0{i}Z")
        assert (await scrape(http)).value("dra_mirror_history_outbox_backlog") == 7


async def test_api_replicas_leave_the_dra_series_to_watchers() -> None:
    store = MemoryStore()
    await feed(store, "east", upserts=[CLASS], at="2026-01-01T00:00:00Z")
    async with client(compose_app(Settings(), store=store)) as http:
        assert (await scrape(http)).series("kube_deviceclass_info", cluster="east")
    # `serve --no-watch`: the watchers report the DRA series, API replicas do not repeat them.
    async with client(mirror_app(Settings(), store=store, watch=False)) as http:
        metrics = await scrape(http)
    assert not [name for name in metrics.types if name.startswith(("kube_", "dra_mirror_devices"))]
    assert "dra_mirror_graphql_request_seconds" in metrics.types


async def test_unreachable_state_store_leaves_a_gap() -> None:
    store = RedisStore.from_url("redis://127.0.0.1:1/0")  # nothing listens on port 1
    app = compose_app(Settings(), store=store)
    async with client(app) as http:
        metrics = await scrape(http)
    assert metrics.value("dra_mirror_state_snapshot_errors_total") == 1
    assert not metrics.series("kube_resourceclaim_info")
    assert not metrics.series("dra_mirror_devices")


def documented() -> dict[str, set[str]]:
    """`name{labels}` of each row of the Metrics table in docs/operations.md."""
    text = DOCS.read_text()
    section = text[text.index("\n## Metrics") :]
    section = section[: section.index("\n## ", 1)]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            name, _, labels = line.split("`")[1].partition("{")
            rows[name] = {label for label in labels.rstrip("}").split(",") if label}
    return rows


async def test_names_and_labels_exactly_as_documented(tmp_path: Path) -> None:
    async with whole_mirror(tmp_path) as (world, state, http):
        reactor = state.reactors.reactors.by_name["east"]
        world.create("resourceclaims", claim("late"))
        await eventually(lambda: reactor.status.last_event_at is not None)
        await http.post("/graphql", json={"query": "query Named { nope }"})
        metrics = await scrape(http)
    rows = documented()
    assert len(rows) >= 25
    exported = {}
    for family, kind in metrics.types.items():
        if family.endswith("_created"):
            continue  # prometheus-client's creation times of its own counters and histograms
        exported[family + ("_total" if kind == "counter" else "")] = kind
    assert set(exported) == set(rows)
    for name, labels in rows.items():
        sample = f"{name}_bucket" if exported[name] == "histogram" else name
        extra = {"le"} if exported[name] == "histogram" else set()
        found = metrics.label_sets(sample)
        # nothing failed, no utilisation source: the families are declared nonetheless
        quiet = ("_watch_errors_total", "_malformed_objects_total", "_watch_stalls_total",
                 "_held_not_busy_devices")  # fmt: skip
        if name.endswith(quiet):
            assert not found
            continue
        assert found == {frozenset(labels | extra)}, name


async def test_gzip_answer_is_one_member_equal_to_the_plain_text(tmp_path: Path) -> None:
    async with whole_mirror(tmp_path) as (_world, state, http):
        state.now = lambda: datetime(2030, 1, 1, tzinfo=UTC)  # lag stays put between the two
        plain = await http.get("/metrics", headers={"accept-encoding": "identity"})
        assert "content-encoding" not in plain.headers
        async with http.stream("GET", "/metrics", headers={"accept-encoding": "gzip"}) as answer:
            assert answer.headers["content-encoding"] == "gzip"
            raw = b"".join([chunk async for chunk in answer.aiter_raw()])
    decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16)
    text = decompressor.decompress(raw) + decompressor.flush()
    assert decompressor.eof and not decompressor.unused_data  # one member: any client reads it all
    assert text == plain.content
    assert len(raw) < len(text) / 3
    assert b'kube_resourceclaim_info{cluster="east"' in text


async def test_failed_requests_and_malformed_objects_are_counted(tmp_path: Path) -> None:
    world = small_world("east")
    broken = device_slice("node-bad")
    broken["spec"]["devices"] = "not a list"
    world.bulk_load("resourceslices", [broken])
    # The next three requests for claims fail with 500: three failed attempts of that kind.
    faults = {"errors": {"code": 500, "count": 3, "path": "resourceclaims", "retryAfter": 0}}
    store = MemoryStore()
    settings = ReactorSettings(watch=FAST, status_interval=0.05)
    async with serving(tmp_path, ClusterSpec(world, faults=faults)) as (_sim, connections):
        reactors = await run_reactors(
            connections,
            sinks=[store],
            status_sink=store,
            open_index=store.open_index,
            settings=settings,
            tune_gc=False,
        )
        async with client(compose_app(Settings(), store=store, watchers=opened(reactors))) as http:
            await reactors.wait_synced()
            metrics = await scrape(http)
    errors = metrics.series("dra_mirror_watch_errors_total")
    assert {dict(k)["kind"]: v for k, v in errors.items()} == {"ResourceClaim": 3}
    malformed = metrics.series("dra_mirror_malformed_objects_total", cluster="east")
    assert {dict(k)["kind"]: v for k, v in malformed.items()} == {"ResourceSlice": 1}
