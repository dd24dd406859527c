"""No surface tells a subject about namespaces outside its scope. For random scopes over the
demo scenario (its two clusters' objects in the store, and their history: every claim
released, then made again), a static token carrying the scope (and a Slack user mapped to
it) asks every surface through the real access gate:

* GraphQL: the corpus of our own documents, the history fields and the audits, and every
  document the Devices screens send, with variables naming every claim of the world — the
  hidden ones included;
* the CSV exports, `/metrics`, the Slack commands, the command line (`dra-mirror free|waiting|
  idle|who-holds` run in-process against the served app).

No answer names a namespace the scope hides (`cluster`/`namespace` fields, `namespace`
labels, CSV columns, `namespace/name` in text), and counts agree with what the scope can page
through: connections' `totalCount`, a cluster's `counts.claims`, the contention audit's
totals by class (shown only for clusters seen whole) equal to its totals by namespace, and
`explain` of a hidden claim answered in the very words of a claim that does not exist.
Subscriptions: test_scope_events. Examples are costly (every surface, ~15 s): no shrinking.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import re
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from dra_mirror.service.access.config import AccessConfig, SlackScopes
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.access.static import StaticTokens
from dra_mirror.service.cli.main import main as cli_main
from dra_mirror.service.history.db import open_engine
from dra_mirror.service.history.migrate import migrate
from dra_mirror.service.history.options import WriterStats
from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.http.metrics_scope import NAMESPACE_WIDE
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from dra_mirror.service.web.documents import screen_documents
from tests.clusters.world import truth
from tests.feeding import feed
from tests.history.conftest import Pipeline
from tests.slack.conftest import Slack, served, slack_settings
from tests.utilization.conftest import SimulatedSource

from .test_metrics_scope import family, samples
from .test_scope_property import CORPUS, connections, namespaces_in

KINDS = ("Node", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim", "Pod")
TOKEN = "no-leak-token-0123456789abcdef0123456789abcdef"
WINDOW = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T06:00:00Z"}
HISTORY = [
    ('query($f: DateTime!, $t: DateTime!, $g: ContentionGroup!) { contention(from: $f, to: $t,'
     " groupBy: $g) { cluster group claimsWaited deviceHoursAllocated } }", ("CLASS", "NAMESPACE")),
    ("query($f: DateTime!, $t: DateTime!) { idleHolders(from: $f, to: $t, first: 500) {"
     " cluster namespace claim } historyGaps(from: $f, to: $t) { cluster } }", ()),
    ('query($f: DateTime!, $t: DateTime!, $g: ChargebackGroup!) { chargeback(from: $f, to: $t,'
     " groupBy: $g) { cluster group team gpuHoursHeld } }", ("NAMESPACE", "TEAM")),
]  # fmt: skip
CLAIM_HISTORY = "query($c: String!, $n: String!, $m: String!) { claimHistory(cluster: $c, namespace: $n, name: $m) { uid cluster namespace name } }"
DEVICE_HISTORY = "query($d: String!, $f: DateTime!, $t: DateTime!) { deviceHistory(device: $d, from: $f, to: $t) { inventory { cluster } allocations { cluster namespace claim } } whoHeld(device: $d, at: $t) { cluster namespace claim } }"


class Demo:
    """The demo world: its records per cluster, its claims and pods, and a history of them."""

    def __init__(self) -> None:
        world = self.world = build_world(load_scenario("demo"))
        self.records = {
            name: [r for kind in KINDS for r in truth(cluster, kind).values()]
            for name, cluster in world.stores.items()
        }
        self.refs = {(r.meta.cluster, r.meta.namespace, r.meta.name, type(r).__name__): r
                     for rs in self.records.values() for r in rs if r.meta.namespace}  # fmt: skip
        self.samples = {}  # a claim and a pod of each namespace: the screens ask for them
        for key, record in sorted(self.refs.items()):
            self.samples.setdefault((key[0], key[1], key[3]), (key, record))
        self.samples = dict(self.samples.values())
        self.engine: Any = None

    def namespaces(self) -> list[str]:
        return sorted({n for _c, n, _m, _k in self.refs})

    def hidden_refs(self, scope: AccessScope) -> set[str]:
        shown = {f"{n}/{m}" for c, n, m, _k in self.refs if scope.allows(c, n)}
        return {f"{n}/{m}" for c, n, m, _k in self.refs if not scope.allows(c, n)} - shown

    async def load(self, store: MemoryStore, *, at: str = "2026-01-01T05:00:00Z") -> list:
        changes = []
        for cluster, records in self.records.items():
            changes.append(await feed(store, cluster, upserts=records, at=at))
            await store.set_status(ClusterStatus(name=cluster, connected=True, synced=True))
        return changes


class KeptHistory(HistoryQueries):
    outbox = None  # read only: no writer behind it
    writer = SimpleNamespace(stats=WriterStats())  # what /metrics reads of a writer: nothing

    async def close(self) -> None:  # the module's engine outlives each app
        pass


@pytest.fixture(scope="module")
async def demo(tmp_path_factory) -> AsyncIterator[Demo]:
    demo = Demo()
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('no-leak') / 'history.db'}"
    await migrate(url)
    demo.engine = open_engine(url)
    pipeline = Pipeline(demo.engine).start()
    try:
        store = MemoryStore()
        for batch in await demo.load(store, at="2026-01-01T01:00:00Z"):
            await pipeline.sink(batch)
        for minute, (cluster, records) in enumerate(demo.records.items()):
            claims = [r for r in records if type(r).__name__ == "ResourceClaim"]
            await pipeline.sink(await feed(store, cluster, deletes=claims,
                                           at=f"2026-01-01T02:0{minute}:00Z"))  # fmt: skip
            await pipeline.sink(await feed(store, cluster, upserts=claims,
                                           at=f"2026-01-01T03:0{minute}:00Z"))  # fmt: skip
        await pipeline.drained()
    finally:
        await pipeline.stop()
    yield demo
    await demo.engine.dispose()


GRANTS = st.lists(st.tuples(st.sampled_from(("east", "west", "*")),
                            st.sampled_from(("inference", "training", "research", "legacy",
                                             "batch", "*"))), max_size=3)  # fmt: skip
scope_documents = st.builds(
    lambda grants, clusters, history: {"namespaces": [f"{c}/{n}" for c, n in grants],
                                       "clusters": clusters, "history": history},
    GRANTS, st.lists(st.sampled_from(("east", "west")), max_size=2), st.booleans(),
)  # fmt: skip


def control_for(document: dict) -> AccessControl:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    tokens = StaticTokens.from_document(
        {"tokens": [{"name": "asker", "sha256": digest, "scope": document}]}, where="test"
    )
    scope = AccessScope.from_config(document, where="test")
    slack = SlackScopes(users={"U2147483697": scope})
    return AccessControl(AccessConfig(static_tokens="t", slack=slack, rate_limit=0),
                         authenticators=[tokens])  # fmt: skip


def variables_for(document: str, demo: Demo) -> list[dict[str, Any]]:
    """Variables for a screen's document: one set per claim and pod of the world (hidden or
    not), the optional ones left out; none needed: one empty set."""
    wanted = set(re.findall(r"\$(\w+)\s*:\s*[\w\[\]]+!", document.split("{", 1)[0]))
    if not wanted:
        return [{}]
    out = []
    for (cluster, namespace, name, _kind), record in demo.samples.items():
        allocation = getattr(record, "allocation", None)
        result = allocation.results[0] if allocation and allocation.results else None
        node = (allocation.node_name if allocation else None) or getattr(record, "node", None)
        values = {"cluster": cluster, "namespace": namespace, "name": name,
                  "node": node or "east-h200-0", "driver": result.driver if result else "gpu.nvidia.com",
                  "spec": result.device if result else "gpu-0", "className": "gpu.nvidia.com",
                  "pool": result.pool if result else "east-h200-0",
                  "device": result.device if result else "gpu-0",
                  "status": "HELD", "groupBy": "NAMESPACE", **WINDOW}  # fmt: skip
        out.append({k: v for k, v in values.items() if k in wanted})
    unique = {orjson.dumps(v, option=orjson.OPT_SORT_KEYS): v for v in out}
    return list(unique.values())


def screen_queries(demo: Demo) -> list[tuple[str, dict[str, Any]]]:
    return [(text, variables) for _label, text in screen_documents()
            if not text.lstrip().startswith("subscription")
            for variables in variables_for(text, demo)]  # fmt: skip


def check_data(data: Any, scope: AccessScope, where: str) -> None:
    for cluster, namespace in namespaces_in(data):
        clusters = [cluster] if cluster else ["east", "west"]
        assert any(scope.allows(c, namespace) for c in clusters), (where, cluster, namespace)
    for page in connections(data):
        info = page.get("pageInfo")
        if info is not None and not info.get("hasNextPage") and not info.get("hasPreviousPage"):
            assert page["totalCount"] == len(page["nodes"]), where
        assert page["totalCount"] >= len(page["nodes"]), where


def check_text(text: str, hidden: set[str], where: str) -> None:
    for ref in hidden:
        assert ref not in text, (where, ref)


async def graphql(http: httpx.AsyncClient, query: str, variables: dict) -> dict:
    response = await http.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200, (query, response.text)
    return response.json()


async def ask_graphql(http, demo: Demo, scope: AccessScope, hidden: set[str]) -> None:
    asked = [*CORPUS, *screen_queries(demo)]
    for query, group in HISTORY:
        for value in group or (None,):
            asked.append((query, {"f": WINDOW["from"], "t": WINDOW["to"], "g": value}))
    for cluster, namespace, name, kind in demo.refs:
        if kind == "ResourceClaim":
            asked.append((CLAIM_HISTORY, {"c": cluster, "n": namespace, "m": name}))
    for device in ("gpu-0", "gpu-1", "nic-0"):
        asked.append((DEVICE_HISTORY, {"d": device, "f": WINDOW["from"], "t": WINDOW["to"]}))
    for query, variables in asked:
        body = await graphql(http, query, variables)
        for error in body.get("errors") or ():
            check_text(error["message"], hidden, query)
            history_field = re.search(r"\b(contention|chargeback|idleHolders|claimHistory|deviceHistory|deviceUtilizationHistory|utilizationAudit|whoHeld|historyGaps|timeline|history)\b", query)  # fmt: skip
            assert history_field and not scope.history, (query, variables, error)
        check_data(body.get("data"), scope, query)
        check_text(orjson.dumps(body).decode(), hidden, query)
    counts = (await graphql(http, "{ clusters { name counts { claims } } }", {}))["data"]
    for cluster in counts["clusters"]:
        page = await graphql(http, "query($c: String) { resourceClaims(cluster: $c, first: 1000)"
                             " { totalCount } }", {"c": cluster["name"]})  # fmt: skip
        assert cluster["counts"]["claims"] == page["data"]["resourceClaims"]["totalCount"]
    if scope.history:  # by class: only clusters seen whole, and then as much as by namespace
        window = {"f": WINDOW["from"], "t": WINDOW["to"]}
        rows = {g: (await graphql(http, HISTORY[0][0], {**window, "g": g}))["data"]["contention"]
                for g in ("CLASS", "NAMESPACE")}  # fmt: skip
        assert all(scope.all_namespaces(r["cluster"]) for r in rows["CLASS"]), rows["CLASS"]
        for cluster in ("east", "west"):
            if scope.all_namespaces(cluster):
                totals = [(sum(r["claimsWaited"] for r in rs if r["cluster"] == cluster),
                           round(sum(r["deviceHoursAllocated"] for r in rs
                                     if r["cluster"] == cluster), 6))
                          for rs in rows.values()]  # fmt: skip
                assert totals[0] == totals[1], (cluster, totals)


async def ask_exports_and_metrics(http, scope: AccessScope, hidden: set[str]) -> None:
    window = f"from={WINDOW['from']}&to={WINDOW['to']}"
    for path, column in ((f"/export/contention.csv?{window}&groupBy=NAMESPACE", "group"),
                         (f"/export/chargeback.csv?{window}", "group"),
                         (f"/export/idle-holders.csv?{window}", "namespace")):  # fmt: skip
        response = await http.get(path)
        if not scope.history:
            assert response.status_code == 403, path
            continue
        assert response.status_code == 200, (path, response.text)
        for row in csv.DictReader(io.StringIO(response.text)):
            assert scope.allows(row["cluster"], row[column]), (path, row)
        check_text(response.text, hidden, path)
    response = await http.get("/metrics")
    assert response.status_code == 200
    if not scope.may_hide():  # it sees everything: the whole text, the mirror's own series too
        assert not hidden and "dra_mirror_history_rows_written" in response.text
        return
    wide = {n.decode() for n in NAMESPACE_WIDE}
    for name, labels in samples(response.text):
        cluster = labels.get("cluster")
        assert cluster is not None and scope.allows(cluster), (name, labels)
        if "namespace" in labels:
            assert scope.allows(cluster, labels["namespace"]), (name, labels)
        elif family(name) in wide:
            assert scope.all_namespaces(cluster), (name, labels)
    check_text(response.text, hidden, "/metrics")


async def ask_slack(http, hidden: set[str]) -> None:
    slack = Slack(http)
    for text in ("free", "waiting", "idle", "who-holds gpu-0", "who-holds gpu-1 east"):
        reply = await slack.command(text)
        check_text(orjson.dumps(reply).decode(), hidden, f"slack {text}")
    for ref, cluster in (("research/notebook-gpu", "east"), ("batch/h100-pair", "west")):
        reply = orjson.dumps(await slack.command(f"explain {ref} {cluster}")).decode()
        if ref in hidden:  # the same words as for a claim that does not exist
            made_up = f"{ref.split('/')[0]}/no-such-claim"
            absent = orjson.dumps(await slack.command(f"explain {made_up} {cluster}")).decode()
            assert reply.replace(ref, "?") == absent.replace(made_up, "?"), (reply, absent)
        check_text(reply.replace(ref, "?"), hidden, f"slack explain {ref}")


def run_cli(url: str, hidden: set[str], scope: AccessScope) -> None:
    runner = CliRunner()
    for args in (["free"], ["waiting"], ["idle"], ["who-holds", "gpu-0"]):
        for extra in ([], ["--json"]):
            result = runner.invoke(cli_main, [*args, "--server", url, "--token", TOKEN, *extra])
            where = f"dra-mirror {' '.join(args + extra)}"
            assert result.exit_code in (0, 1), (where, result.output)
            check_text(result.output, hidden, where)
            if extra and result.exit_code == 0:
                check_data(orjson.loads(result.output), scope, where)


@pytest.mark.slow
@settings(max_examples=5, deadline=None, phases=(Phase.explicit, Phase.generate), suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])  # fmt: skip
@given(document=scope_documents)
@example(document={"namespaces": ["west/batch", "*/*"], "clusters": [], "history": False})
async def test_no_surface_names_or_counts_what_the_scope_hides(demo: Demo, document) -> None:
    scope = AccessScope.from_config(document, where="test")
    hidden = demo.hidden_refs(scope)
    store = MemoryStore()
    await demo.load(store)
    app = compose_app(Settings(), store=store, history=opened(KeptHistory(demo.engine)),  # type: ignore[arg-type]
                     slack=slack_settings(), access=opened(control_for(document)),
                     utilization=SimulatedSource(demo.world))  # fmt: skip
    async with served(app) as url:
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
            viewer = await graphql(http, "{ viewer { name } }", {})
            assert viewer["data"]["viewer"]["name"] == "asker"
            await ask_graphql(http, demo, scope, hidden)
            await ask_exports_and_metrics(http, scope, hidden)
            await ask_slack(http, hidden)
        await asyncio.to_thread(run_cli, url, hidden, scope)
