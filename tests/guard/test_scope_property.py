"""For random scopes and a corpus of our own documents: no answer names a namespace outside
the scope, counts equal what the scope can page through, and device statuses do not change
with the scope (a device held elsewhere is still held, its holder withheld)."""

from __future__ import annotations

from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.cli.demo import EXAMPLE_QUERIES
from dra_mirror.service.questions import remote
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore

from ..schema.conftest import load_world

CLUSTERS = ("east", "west")
NAMESPACES = ("team-a", "team-b", "team-c", "default", "ml")

CORPUS: list[tuple[str, dict[str, Any]]] = [(query, {}) for _title, query in EXAMPLE_QUERIES] + [
    (remote.WHO_HOLDS, {"device": "gpu-0"}),
    (remote.WHO_HOLDS, {"device": "n1/gpu-1"}),
    (remote.FREE, {"first": 50}),
    (remote.WAITING, {"first": 500}),
    (remote.IDLE, {"first": 500}),
    (remote.CAPACITY, {}),
    (remote.POD_DEVICES, {"namespace": "team-a", "name": "web-0"}),
    (
        "{ pods(first: 1000) { totalCount nodes { namespace name claims { claim { namespace } } } } }",
        {},
    ),
    (
        "{ nodes { cluster name pods { namespace } devices { status withheldAllocations"
        " allocations { claim { namespace } } pods { namespace } } } }",
        {},
    ),
    ("{ resourceClaimTemplates { namespace claims { namespace } } }", {}),
    ("{ deviceClasses { cluster name claims { namespace } devices { name status } } }", {}),
    (
        "{ devices(first: 1000) { totalCount nodes { cluster driver pool name status"
        " withheldAllocations allocations { claim { namespace } } } } }",
        {},
    ),
    ("{ clusters { name counts { devices freeDevices claims pendingClaims } } }", {}),
]

scopes = st.builds(
    lambda grants, clusters: AccessScope.parse([f"{c}/{n}" for c, n in grants], clusters=clusters),
    st.lists(
        st.tuples(st.sampled_from((*CLUSTERS, "*")), st.sampled_from((*NAMESPACES, "*"))),
        max_size=4,
    ),
    st.lists(st.sampled_from(CLUSTERS), max_size=2),
)


def namespaces_in(value: Any, cluster: str | None = None) -> list[tuple[str | None, str]]:
    found: list[tuple[str | None, str]] = []
    if isinstance(value, dict):
        cluster = value.get("cluster", cluster)
        if isinstance(value.get("namespace"), str):
            found.append((cluster, value["namespace"]))
        if isinstance(value.get("claim"), str) and "/" in value["claim"]:  # "namespace/name"
            found.append((cluster, value["claim"].split("/", 1)[0]))
        for item in value.values():
            found += namespaces_in(item, cluster)
    elif isinstance(value, list):
        for item in value:
            found += namespaces_in(item, cluster)
    return found


def connections(value: Any) -> list[dict]:
    found = []
    if isinstance(value, dict):
        if "totalCount" in value and "nodes" in value:
            found.append(value)
        for item in value.values():
            found += connections(item)
    elif isinstance(value, list):
        for item in value:
            found += connections(item)
    return found


def statuses(value: Any) -> dict[tuple, str]:
    found: dict[tuple, str] = {}
    if isinstance(value, dict):
        if {"driver", "pool", "name", "status"} <= value.keys():
            found[(value.get("cluster"), value["driver"], value["pool"], value["name"])] = value[
                "status"
            ]
        for item in value.values():
            found.update(statuses(item))
    elif isinstance(value, list):
        for item in value:
            found.update(statuses(item))
    return found


async def answers(store: MemoryStore, scope: AccessScope) -> list[dict]:
    app = compose_app(Settings(), store=store, scope_for=lambda _r: scope)
    out = []
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as http:
            for query, variables in CORPUS:
                body = (
                    await http.post("/graphql", json={"query": query, "variables": variables})
                ).json()
                assert "errors" not in body, (query, body["errors"])
                out.append(body["data"])
    return out


_everything: list[dict] = []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scope=scopes)
async def test_no_answer_names_what_the_scope_hides(scope):
    store = MemoryStore()
    await load_world(store)
    if not _everything:
        _everything.extend(await answers(store, AccessScope.admin()))
    for data, full in zip(await answers(store, scope), _everything, strict=True):
        for cluster, namespace in namespaces_in(data):
            wheres = [cluster] if cluster is not None else list(CLUSTERS)
            assert any(scope.allows(c, namespace) for c in wheres), (cluster, namespace)
        for page in connections(data):
            assert page["totalCount"] == len(page["nodes"])
        visible = statuses(data)
        every = statuses(full)
        assert all(every[k] == s for k, s in visible.items()), "a status changed with the scope"
