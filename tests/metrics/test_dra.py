"""The DRA series over the shipped two-cluster demo, mirrored through the simulator: every value
checked against the simulator's raw objects, device classes against the graph's own answer."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dra_mirror.service.http.metrics_dra import PENDING_BUCKETS, DraSnapshot, IndexReader
from dra_mirror.service.http.metrics_dra_text import render
from dra_mirror.service.reactor.reactor import Reactors, ReactorSettings, run_reactors
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from tests.clusters.conftest import FAST
from tests.clusters.world import serving
from tests.metrics import scrape as truth
from tests.metrics.scrape import Scrape, client, scrape


@dataclass
class Demo:
    world: Any
    store: MemoryStore
    reactors: Reactors
    now: datetime
    http: Any = None
    metrics: Any = None


@pytest.fixture(scope="module")
async def demo(tmp_path_factory: pytest.TempPathFactory):
    world = build_world(load_scenario("demo"))
    store = MemoryStore()
    settings = ReactorSettings(watch=FAST, status_interval=0.05)
    async with serving(tmp_path_factory.mktemp("demo"), *world.specs) as (_sim, connections):
        reactors = await run_reactors(
            connections,
            sinks=[store],
            status_sink=store,
            open_index=store.open_index,
            settings=settings,
            tune_gc=False,
        )
        await reactors.wait_synced()
        # A fixed clock a while after every object was created: ages are exact.
        demo = Demo(world, store, reactors, datetime.now(UTC) + timedelta(seconds=90))
        # The app's lifespan owns the reactors and the store: one app for the whole module.
        app = compose_app(Settings(), store=store, watchers=opened(reactors), now=lambda: demo.now)
        async with client(app) as http:
            demo.http = http
            demo.metrics = await scrape(http)
            yield demo


@pytest.fixture
def scraped(demo: Demo):
    return demo.metrics, demo.http


async def test_object_series_equal_the_raw_objects(demo: Demo, scraped) -> None:
    metrics, _http = scraped
    assert set(demo.world.stores) == {"east", "west"}
    for cluster, raw in demo.world.stores.items():
        classes = {
            (c["metadata"]["name"], c["spec"].get("extendedResourceName") or "")
            for c in raw.list("deviceclasses")
        }
        assert {
            (dict(k)["deviceclass"], dict(k)["extended_resource_name"])
            for k, v in metrics.series("kube_deviceclass_info", cluster=cluster).items()
            if v == 1
        } == classes
        slices = {
            (d["resourceslice"], d["driver"], d["pool"], d["node"]): value
            for labels, value in metrics.series(
                "kube_resourceslice_devices_total", cluster=cluster
            ).items()
            for d in [dict(labels)]
        }
        assert slices == truth.slice_devices(raw)
        assert sum(slices.values()) > 0

        claims = truth.claims(raw)
        info = metrics.series("kube_resourceclaim_info", cluster=cluster)
        assert {(dict(k)["namespace"], dict(k)["resourceclaim"], dict(k)["uid"]) for k in info} == {
            (c["metadata"]["namespace"], c["metadata"]["name"], c["metadata"]["uid"])
            for c in claims
        }
        allocated = metrics.series("kube_resourceclaim_status_allocated", cluster=cluster)
        reserved = metrics.series("kube_resourceclaim_status_reserved", cluster=cluster)
        for c in claims:
            key = (
                ("cluster", cluster),
                ("namespace", c["metadata"]["namespace"]),
                ("resourceclaim", c["metadata"]["name"]),
            )
            status = c.get("status") or {}
            assert allocated[key] == (1 if status.get("allocation") else 0)
            assert reserved[key] == (1 if status.get("reservedFor") else 0)
        assert sum(allocated.values()) == sum(
            1 for c in claims if (c.get("status") or {}).get("allocation")
        )

        states = truth.state_counts(raw)
        assert states["pending"] >= 1 and states["reserved"] >= 1  # the demo has both
        for state in ("pending", "allocated", "reserved", "deleting"):
            assert metrics.value("dra_mirror_claims", cluster=cluster, state=state) == states[state]

        # kube-state-metrics' own labels, exactly (and our cluster)
        pod_labels = ("namespace", "pod", "uid", "claim_name", "resourceclaim_name",
                      "resourceclaim_template_name")  # fmt: skip
        series = metrics.series("kube_pod_resourceclaim_info", cluster=cluster)
        assert {tuple(sorted(dict(k))) for k in series} == {tuple(sorted(("cluster", *pod_labels)))}
        pod_claims = {tuple(dict(k)[n] for n in pod_labels) for k in series}
        assert pod_claims == truth.pod_claims(raw)
        assert any(row[5] for row in pod_claims)  # template-generated claims, resolved

        # the names of the open kube-state-metrics proposal for claims, slices and classes
        def rows(
            name: str, labels: tuple[str, ...], cluster: str = cluster
        ) -> set[tuple[str, ...]]:
            found = metrics.series(name, cluster=cluster)
            assert all(v == 1 for v in found.values())
            return {tuple(dict(k)[n] for n in labels) for k in found}

        slice_labels = ("resourceslice", "driver", "pool_name", "node_name", "all_nodes")
        assert rows("kube_resourceslice_info", slice_labels) == truth.slice_info(raw)
        reserved_labels = ("namespace", "resourceclaim", "consumer_api_group",
                           "consumer_resource", "consumer_name", "consumer_uid")  # fmt: skip
        found = rows("kube_resourceclaim_status_reserved_for", reserved_labels)
        assert found == truth.reserved_for(raw) and found
        device_labels = ("namespace", "resourceclaim", "request", "driver", "pool", "device")
        found = rows("kube_resourceclaim_allocation_device_info", device_labels)
        assert found == truth.allocated_devices(raw) and found


async def test_pending_histogram_and_idle_devices(demo: Demo, scraped) -> None:
    metrics, _http = scraped
    assert metrics.types["dra_mirror_claim_pending_seconds"] == "histogram"
    for cluster, raw in demo.world.stores.items():
        ages = truth.pending_ages(raw, demo.now)
        assert ages
        name = "dra_mirror_claim_pending_seconds"
        for bound in PENDING_BUCKETS:
            le = str(float(bound))
            count = metrics.value(f"{name}_bucket", cluster=cluster, le=le)
            assert count == sum(1 for age in ages if age <= bound), (cluster, le)
        assert metrics.value(f"{name}_bucket", cluster=cluster, le="+Inf") == len(ages)
        assert metrics.value(f"{name}_count", cluster=cluster) == len(ages)
        assert metrics.value(f"{name}_sum", cluster=cluster) == pytest.approx(sum(ages))
        idle = truth.idle_held_devices(raw)
        assert metrics.value("dra_mirror_idle_held_devices", cluster=cluster) == len(idle)
    assert truth.idle_held_devices(demo.world.stores["east"])  # the demo's idle notebook GPU


DEVICES_QUERY = """
query Devices($cluster: String!) {
  devices(cluster: $cluster, first: 1000) {
    totalCount
    edges { node { driver pool name status classes { name } } }
  }
}
"""


async def test_devices_by_class_and_status(demo: Demo, scraped) -> None:
    metrics, http = scraped
    for cluster, raw in demo.world.stores.items():
        answer = await http.post(
            "/graphql", json={"query": DEVICES_QUERY, "variables": {"cluster": cluster}}
        )
        connection = answer.json()["data"]["devices"]
        nodes = [edge["node"] for edge in connection["edges"]]
        assert len(nodes) == connection["totalCount"] > 0
        expected: Counter[tuple[str, str]] = Counter()
        for node in nodes:
            for name in [c["name"] for c in node["classes"]] or [""]:
                expected[(name, node["status"].lower())] += 1
        got = {
            (dict(k)["class"], dict(k)["status"]): v
            for k, v in metrics.series("dra_mirror_devices", cluster=cluster).items()
            if v
        }
        assert got == dict(expected)
        # Held or shared is what some raw claim's allocation names (no selector involved).
        held = {
            (n["driver"], n["pool"], n["name"]) for n in nodes if n["status"] in ("HELD", "SHARED")
        }
        assert held == truth.held_devices(raw)
        # Every declared class has its four statuses, zeros included (Grafana draws them).
        for c in raw.list("deviceclasses"):
            for status in ("free", "held", "shared", "blocked"):
                assert metrics.series(
                    "dra_mirror_devices",
                    cluster=cluster,
                    **{"class": c["metadata"]["name"]},
                    status=status,
                )


async def test_watch_series_equal_the_reactor_status(demo: Demo, scraped) -> None:
    metrics, _http = scraped
    for name, reactor in demo.reactors.by_name.items():
        status = reactor.status
        assert metrics.value("dra_mirror_watch_events_total", cluster=name) == status.events
        assert metrics.value("dra_mirror_watch_relists_total", cluster=name) == status.relists
        assert metrics.value("dra_mirror_cluster_connected", cluster=name) == 1
        assert metrics.value("dra_mirror_cluster_synced", cluster=name) == 1
        synced_at = datetime.fromisoformat(status.last_sync_at)
        assert metrics.value(
            "dra_mirror_cluster_last_sync_timestamp_seconds", cluster=name
        ) == pytest.approx(synced_at.timestamp())
        newest = max(
            datetime.fromisoformat(t) for t in (status.last_sync_at, status.last_event_at) if t
        )
        assert metrics.value("dra_mirror_cluster_lag_seconds", cluster=name) == pytest.approx(
            (demo.now - newest).total_seconds()
        )


async def test_the_state_store_and_the_watchers_indexes_give_the_same_series(demo: Demo) -> None:
    # A watcher reads its reactors' indexes; an app without watchers reads the state store.
    indexes = IndexReader({name: r.index for name, r in demo.reactors.by_name.items()})
    clusters = sorted(demo.world.stores)
    from_indexes = await DraSnapshot.read(indexes, clusters, now=demo.now)
    from_store = await DraSnapshot.read(demo.store, clusters, now=demo.now)
    assert (
        Scrape(render(from_store).decode()).samples == Scrape(render(from_indexes).decode()).samples
    )
    assert from_store.clusters["east"].claims
