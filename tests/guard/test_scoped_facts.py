"""For any scope, every fact about the cluster equals the admin's; only names differ.

Hiding who holds a device must never turn "held" into "free": device status, remaining
capacity, pool counts, free devices, explainClaim's verdicts and counts, a plan's placements,
lintManifests' free-device findings and `/metrics`' device series are derived from the whole
cluster. What a scope changes is which claims, pods and namespaces are *named*: holders outside
it are counted (`holdersHidden`, `withheldAllocations`, `freedHidden`), never shown.

The oracle is the admin's answer to the same documents over the same store: for random scopes
(Hypothesis) over two worlds — the schema tests' two clusters and the demo's — each fact the
scoped answer gives is compared with the admin's, and each name it gives must be one the scope
allows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore

from ..plan.conftest import demo_world
from ..schema.conftest import load_world

STATUSES = ("FREE", "HELD", "SHARED", "BLOCKED")

# A workload no one has yet, in a namespace of its own, whose template is in the manifests (so
# whether the asker may see other namespaces' templates does not matter): where would it land?
PLANNED = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: planned}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: planned}
spec:
  replicas: REPLICAS
  template:
    spec:
      containers:
        - name: main
          image: pytorch
          resources: {claims: [{name: gpu}]}
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
"""

REQUEST = """request deviceClassName classExists classDevices freeOrShareable nodes needed
  verdict selectors { expression passing rejected } heldBy { namespace name }"""
HOLDERS = "holders { claim { namespace name } idle running }"

FACTS = f"""query Facts($manifests: String!) {{
  clusters {{ name counts {{ devices freeDevices }} }}
  resourcePools {{ cluster driver poolName generation resourceSliceCount totalDevices
                  allocatedDevices availableDevices unavailableDevices validationError }}
  devices(first: 5000) {{ nodes {{ cluster driver pool name status withheldAllocations
    remainingCapacity {{ name value }} allocations {{ claim {{ namespace name }} }} }} }}
  {
    " ".join(
        f'{s.lower()}: findDevices(selector: "true", status: {s}, first: 5000) '
        "{ totalCount nodes { cluster driver pool name } }"
        for s in STATUSES
    )
}
  plan(manifests: $manifests) {{ clusters {{ cluster placeable items {{
    verdict placeable node blockingClaim message holdersHidden freedHidden
    freedBy {{ namespace name }} requests {{ {REQUEST} }} {HOLDERS} }} }} }}
}}"""


def explain_document(claims: list[tuple[str, str, str]]) -> str:
    fields = " ".join(
        f'c{i}: explainClaim(cluster: "{c}", namespace: "{ns}", name: "{n}") {{ cluster namespace'
        f" name state verdict message holdersTotal holdersHidden nodesWithoutDriver"
        f" checks {{ name ok }} requests {{ {REQUEST} }} {HOLDERS} }}"
        for i, (c, ns, n) in enumerate(claims)
    )
    return "{ " + fields + " }"


def lint_document(clusters: list[str]) -> str:
    fields = " ".join(
        f'{c}: lintManifests(cluster: "{c}", yaml: $manifests) {{ rule severity object message }}'
        for c in clusters
    )
    return "query Lint($manifests: String!) { " + fields + " }"


Ask = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class Mirror:
    """The app over one store, asked with one scope."""

    def __init__(self, store: MemoryStore, scope: AccessScope) -> None:
        self.app = compose_app(Settings(), store=store, scope_for=lambda _r: scope)

    async def __aenter__(self) -> Mirror:
        self.manager = LifespanManager(self.app)
        manager = await self.manager.__aenter__()
        transport = httpx.ASGITransport(app=manager.app)
        self.http = httpx.AsyncClient(transport=transport, base_url="http://mirror")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()
        await self.manager.__aexit__(*exc)

    async def ask(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.http.post(
            "/graphql", json={"query": query, "variables": variables or {}}
        )
        body = response.json()
        assert "errors" not in body, body["errors"]
        return body["data"]

    async def devices_metrics(self) -> list[str]:
        text = (await self.http.get("/metrics")).text
        return sorted(line for line in text.splitlines() if line.startswith("dra_mirror_devices{"))


class World:
    """A world's stores (a new one each time: an app's lifespan closes its store), its claims
    and namespaces, and the admin's answers (the oracle)."""

    def __init__(self, store: Callable[[], Awaitable[MemoryStore]], replicas: int) -> None:
        self.store = store
        self.manifests = PLANNED.replace("REPLICAS", str(replicas))
        self.admin: dict[str, Any] = {}

    async def answers(self, scope: AccessScope) -> dict[str, Any]:
        async with Mirror(await self.store(), scope) as mirror:
            facts = await mirror.ask(FACTS, {"manifests": self.manifests})
            if not self.admin:
                # every claim, as the admin names them (the scoped asker asks for them all)
                found = await mirror.ask(
                    "{ resourceClaims(first: 5000) { nodes { cluster namespace name } } }"
                )
                self.claims = [
                    (c["cluster"], c["namespace"], c["name"])
                    for c in found["resourceClaims"]["nodes"]
                ]
                self.clusters = sorted({c["name"] for c in facts["clusters"]})
                self.namespaces = sorted({ns for _, ns, _ in self.claims})
            explained = await mirror.ask(explain_document(self.claims))
            linted = await mirror.ask(lint_document(self.clusters), {"manifests": self.manifests})
            return {
                **facts,
                "explained": [explained[f"c{i}"] for i in range(len(self.claims))],
                "linted": linted,
                "metrics": await mirror.devices_metrics(),
            }

    async def oracle(self) -> dict[str, Any]:
        if not self.admin:
            self.admin = await self.answers(AccessScope.admin())
        return self.admin


# --- comparing ------------------------------------------------------------------------------


def names_allowed(value: Any, scope: AccessScope, cluster: str) -> None:
    """Every namespace named anywhere in `value` is one the scope allows."""
    if isinstance(value, dict):
        if isinstance(value.get("namespace"), str):
            assert scope.allows(cluster, value["namespace"]), (cluster, value)
        for item in value.values():
            names_allowed(item, scope, cluster)
    elif isinstance(value, list):
        for item in value:
            names_allowed(item, scope, cluster)


def visible_refs(refs: list[dict], scope: AccessScope, cluster: str) -> list[dict]:
    return [r for r in refs if scope.allows(cluster, r["namespace"])]


def request_facts(r: dict) -> dict:
    return {k: v for k, v in r.items() if k != "heldBy"}


def holder_key(h: dict) -> tuple:
    return (h["claim"]["namespace"], h["claim"]["name"], h["idle"], h["running"])


def compare_diagnosis(mine: dict, admin: dict, scope: AccessScope, cluster: str) -> None:
    """The facts equal the admin's; the names are the admin's the scope allows."""
    where = (cluster, admin["namespace"], admin["name"])
    for key in ("state", "verdict", "holdersTotal", "nodesWithoutDriver", "checks"):
        assert mine[key] == admin[key], (where, key, mine[key], admin[key])
    assert [request_facts(r) for r in mine["requests"]] == [
        request_facts(r) for r in admin["requests"]
    ], where
    for r, a in zip(mine["requests"], admin["requests"], strict=True):
        assert r["heldBy"] == visible_refs(a["heldBy"], scope, cluster), where
    shown = [h for h in admin["holders"] if scope.allows(cluster, h["claim"]["namespace"])]
    assert sorted(map(holder_key, mine["holders"])) == sorted(map(holder_key, shown)), where
    assert mine["holdersHidden"] == len(admin["holders"]) - len(shown), where
    names_allowed(mine, scope, cluster)


def seen_clusters(scope: AccessScope, world: World) -> list[str]:
    return [c for c in world.clusters if scope.allows(c, "")]


def counts_door(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    counts = {c["name"]: c["counts"] for c in admin["clusters"]}
    assert sorted(c["name"] for c in mine["clusters"]) == seen_clusters(scope, world)
    for c in mine["clusters"]:
        assert c["counts"]["devices"] == counts[c["name"]]["devices"], c["name"]
        assert c["counts"]["freeDevices"] == counts[c["name"]]["freeDevices"], c["name"]


def pools_door(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    seen = seen_clusters(scope, world)
    assert mine["resourcePools"] == [p for p in admin["resourcePools"] if p["cluster"] in seen]


def devices_door(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    """Status, remaining capacity, and holders counted (named only when visible)."""
    seen = seen_clusters(scope, world)
    by_key = {
        (d["cluster"], d["driver"], d["pool"], d["name"]): d for d in admin["devices"]["nodes"]
    }
    mine_devices = mine["devices"]["nodes"]
    assert len(mine_devices) == sum(1 for k in by_key if k[0] in seen)
    for d in mine_devices:
        a = by_key[(d["cluster"], d["driver"], d["pool"], d["name"])]
        assert d["status"] == a["status"], d
        assert d["remainingCapacity"] == a["remainingCapacity"], d
        assert d["withheldAllocations"] + len(d["allocations"]) == len(a["allocations"]), d
        names_allowed(d["allocations"], scope, d["cluster"])


def find_devices_door(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    seen = seen_clusters(scope, world)
    for status in STATUSES:
        theirs = [d for d in admin[status.lower()]["nodes"] if d["cluster"] in seen]
        assert mine[status.lower()]["nodes"] == theirs, status
        assert mine[status.lower()]["totalCount"] == len(theirs), status


def plan_door(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    """The same placements and verdicts, with hidden holders counted."""
    plans = {p["cluster"]: p for p in admin["plan"]["clusters"]}
    assert sorted(p["cluster"] for p in mine["plan"]["clusters"]) == seen_clusters(scope, world)
    for p in mine["plan"]["clusters"]:
        a = plans[p["cluster"]]
        assert p["placeable"] == a["placeable"]
        for item, theirs in zip(p["items"], a["items"], strict=True):
            for key in ("verdict", "placeable", "node", "blockingClaim"):
                assert item[key] == theirs[key], (p["cluster"], key, item, theirs)
            assert [request_facts(r) for r in item["requests"]] == [
                request_facts(r) for r in theirs["requests"]
            ]
            assert item["holdersHidden"] + len(item["holders"]) == len(theirs["holders"])
            assert item["freedHidden"] + len(item["freedBy"]) == len(theirs["freedBy"])
            names_allowed(item, scope, p["cluster"])


def explain_door(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    """Null for a claim the scope hides, else the admin's facts."""
    for (cluster, namespace, _), d, a in zip(
        world.claims, mine["explained"], admin["explained"], strict=True
    ):
        if not scope.allows(cluster, namespace):
            assert d is None
        else:
            compare_diagnosis(d, a, scope, cluster)


def lint_door(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    """lintManifests against a cluster: the same findings (free devices are the cluster's)."""
    for cluster in seen_clusters(scope, world):
        assert mine["linted"][cluster] == admin["linted"][cluster], cluster


def metrics_door(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    """The device series of the clusters the scope names, with the admin's values."""
    seen = seen_clusters(scope, world)
    assert mine["metrics"] == [
        line for line in admin["metrics"] if any(f'cluster="{c}"' in line for c in seen)
    ]


DOORS = {
    "counts": counts_door,
    "resourcePools": pools_door,
    "devices": devices_door,
    "findDevices": find_devices_door,
    "plan": plan_door,
    "explainClaim": explain_door,
    "lintManifests": lint_door,
    "metrics": metrics_door,
}


def compare(mine: dict, admin: dict, scope: AccessScope, world: World) -> None:
    for door in DOORS.values():
        door(mine, admin, scope, world)


# --- worlds and scopes ----------------------------------------------------------------------

_WORLDS: dict[str, World] = {}


async def schema_store() -> MemoryStore:
    store = MemoryStore()
    await load_world(store)
    return store


async def demo_store() -> MemoryStore:
    return (await demo_world()).store


async def world_of(name: str) -> World:
    if name not in _WORLDS:
        if name == "schema":
            _WORLDS[name] = World(schema_store, replicas=3)
        else:
            _WORLDS[name] = World(demo_store, replicas=8)
    world = _WORLDS[name]
    await world.oracle()
    return world


def scopes(clusters: tuple[str, ...], namespaces: tuple[str, ...]) -> st.SearchStrategy:
    return st.builds(
        lambda grants, only: AccessScope.parse([f"{c}/{n}" for c, n in grants], clusters=only),
        st.lists(
            st.tuples(st.sampled_from((*clusters, "*")), st.sampled_from((*namespaces, "*"))),
            min_size=1,
            max_size=3,
        ),
        st.lists(st.sampled_from(clusters), max_size=1),
    )


SCHEMA_SCOPES = scopes(("east", "west"), ("team-a", "team-b", "team-c", "planned", "ml"))
DEMO_SCOPES = scopes(("east", "west"), ("training", "research", "inference", "batch", "ml"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scope=SCHEMA_SCOPES)
async def test_every_fact_equals_the_admins_in_the_schema_world(scope: AccessScope) -> None:
    world = await world_of("schema")
    compare(await world.answers(scope), await world.oracle(), scope, world)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scope=DEMO_SCOPES)
async def test_every_fact_equals_the_admins_in_the_demo(scope: AccessScope) -> None:
    world = await world_of("demo")
    compare(await world.answers(scope), await world.oracle(), scope, world)


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize(
    "grants",
    [
        ["east/team-b"],
        ["east/team-c"],
        ["east/ml"],
        ["east/team-a", "west/team-a"],
        ["west/planned"],
    ],
)
async def test_a_device_held_outside_the_scope_is_held_not_free(
    grants: list[str], door: str
) -> None:
    """The defect as it was seen: a scope limited to one namespace was told that devices
    another namespace's claims hold were free (explainClaim ALLOCATABLE where the admin gets
    ALL_HELD; resourcePools counting them available; lintManifests finding them free)."""
    world = await world_of("schema")
    scope = AccessScope.parse(grants)
    key = tuple(grants)
    if key not in _ANSWERS:
        _ANSWERS[key] = await world.answers(scope)
    DOORS[door](_ANSWERS[key], await world.oracle(), scope, world)


_ANSWERS: dict[tuple[str, ...], dict[str, Any]] = {}
