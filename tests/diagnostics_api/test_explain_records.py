"""explainClaim through the app over a small record world in a real MemoryStore (raw v1 objects
normalized by the model and folded into the index the store serves, as the reactor does): the verdicts the
simulator cannot stage (an allocated claim whose pod lacks CPU on its node, a selector that does
not compile, deletion pending), and the allocation ledger kept in step as claims are allocated,
released and deleted between questions — without rebuilding it until the inventory changes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from dra_mirror import schema
from dra_mirror.schema.context import make_context
from dra_mirror.schema.reader import Scope
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.questions.diagnosis import ledger_of, prepare, read_cluster
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ClusterStatus
from tests.diagnostics_api.conftest import EXPLAIN
from tests.feeding import feed

CLUSTER = "lab"
AT = "2026-11-30T00:00:00Z"
GPU_CLASS = "device.driver == 'gpu.nvidia.com'"


def node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {}},
        "status": {
            "capacity": {"cpu": cpu, "memory": "64Gi"},
            "allocatable": {"cpu": cpu, "memory": "64Gi"},
        },
    }


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def gpu_slice(node_name: str, count: int, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus", "uid": f"uid-{node_name}-gpus"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"productName": {"string": "NVIDIA H200"}},
                    "capacity": {"memory": {"value": "143771Mi"}},
                }
                for i in range(count)
            ],
        },
    }


def claim(
    name: str,
    *,
    selectors: tuple[str, ...] = (),
    device: tuple[str, str] | None = None,
    users: tuple[str, ...] = (),
    deleting: bool = False,
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com"}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:01Z"
        body["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    if device is not None:
        pool, name_ = device
        body["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": pool,
                            "device": name_,
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [pool]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": u, "uid": f"uid-{u}"} for u in users],
        }
    return body


def pod(
    name: str, claim_name: str, *, phase: str, node_name: str | None, cpu: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        "containers": [
            {
                "name": "main",
                "image": "cuda",
                "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "gpu"}]},
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": phase},
    }


def records(*objects: dict[str, Any]) -> list[Any]:
    return [normalize(o["kind"], o, cluster=CLUSTER) for o in objects]


@pytest.fixture
async def lab() -> AsyncIterator[tuple[MemoryStore, httpx.AsyncClient]]:
    store = MemoryStore()
    await feed(
        store,
        CLUSTER,
        at=AT,
        upserts=records(
            node("n1", "8"),
            device_class("gpu.nvidia.com", GPU_CLASS),
            gpu_slice("n1", 2),
            # n1 runs a batch pod asking for 7 CPUs; "trainer" holds gpu-0 and wants 2 more.
            pod("batch", "none", phase="Running", node_name="n1", cpu="7"),
            claim("trainer", device=("n1", "gpu-0"), users=("trainer",)),
            pod("trainer", "trainer", phase="Pending", node_name=None, cpu="2"),
            claim("typo", selectors=("device.attributes['gpu.nvidia.com'].productName ==",)),
            claim("leaving", deleting=True),
            claim("waiting"),
        ),
    )
    await store.set_status(ClusterStatus(name=CLUSTER, connected=True, synced=True))
    app = compose_app(Settings(), store=store)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            yield store, http


async def explain(http: httpx.AsyncClient, name: str) -> dict[str, Any]:
    response = await http.post(
        "/graphql",
        json={"query": EXPLAIN, "variables": {"cluster": CLUSTER, "namespace": "ml", "name": name}},
    )
    body = response.json()
    assert "errors" not in body, body
    return body["data"]["explainClaim"]


async def test_allocated_but_the_pod_lacks_cpu_on_the_node(lab) -> None:
    _, http = lab
    d = await explain(http, "trainer")
    assert (d["state"], d["verdict"]) == ("reserved", "NODE_RESOURCES")
    assert d["message"] == (
        "the claim is allocated on n1, but pod trainer is Pending: the node lacks cpu "
        "(9 requested with the pods already there, 8 allocatable)"
    )
    assert {c["name"]: c["ok"] for c in d["checks"]} == {
        "allocated": True,
        "node": True,
        "devices": True,
        "consumers": True,
        "running": False,
    }


async def test_a_selector_that_does_not_compile(lab) -> None:
    _, http = lab
    d = await explain(http, "typo")
    assert d["verdict"] == "SELECTOR_ERROR"
    [r] = d["requests"]
    [error] = r["selectorErrors"]
    assert error["expression"] == "device.attributes['gpu.nvidia.com'].productName =="
    assert "Syntax error" in error["message"]
    assert d["message"].startswith("request gpu: a selector failed: ")


async def test_deletion_pending(lab) -> None:
    _, http = lab
    d = await explain(http, "leaving")
    assert d["verdict"] == "DELETING"
    assert d["message"] == (
        "deletion requested at 2026-11-30T00:00:01Z; finalizers: "
        "resource.kubernetes.io/delete-protection"
    )


async def test_the_ledger_follows_allocations_between_questions(lab) -> None:
    store, http = lab
    first = await explain(http, "waiting")
    assert first["verdict"] == "ALLOCATABLE" and "on node n1" in first["message"]
    # Someone takes the last free GPU: the next question sees every GPU held.
    [taker] = records(claim("taker", device=("n1", "gpu-1")))
    await feed(store, CLUSTER, upserts=[taker], at=AT)
    held = await explain(http, "waiting")
    assert held["verdict"] == "ALL_HELD"
    assert [h["claim"]["name"] for h in held["holders"]] == ["taker", "trainer"]
    # Both idle: the taker has no pod, the trainer's pod is Pending.
    assert [(h["idle"], [p["name"] for p in h["pods"]]) for h in held["holders"]] == [
        (True, []),
        (True, ["trainer"]),
    ]
    # The taker is deleted: free again.
    await feed(store, CLUSTER, deletes=[taker], at=AT)
    assert (await explain(http, "waiting"))["verdict"] == "ALLOCATABLE"
    # The trainer's claim is deallocated: its GPU is free, but its pod has no room on n1.
    [released] = records(claim("trainer"))
    await feed(store, CLUSTER, upserts=[released], at=AT)
    again = await explain(http, "trainer")
    assert (again["state"], again["verdict"]) == ("pending", "NODE_RESOURCES")
    assert again["message"].startswith("devices are free on node n1, but pod trainer does not fit")
    # A new generation of the slice (a third GPU) changes the inventory.
    await feed(store, CLUSTER, upserts=records(gpu_slice("n1", 3, 2)), at=AT)
    await feed(store, CLUSTER, upserts=[taker], at=AT)
    assert (await explain(http, "waiting"))["verdict"] == "ALLOCATABLE"
    # Nothing was kept in step by the questions: the ledger reads the model's index in place.
    state = await read_cluster(store, CLUSTER)
    assert ledger_of(store, state).base is store.index(CLUSTER)


async def test_prepare_answers_the_class_selectors_before_the_first_question(lab) -> None:
    store, http = lab
    assert await prepare(store) == 1  # one cluster
    assert (await explain(http, "waiting"))["verdict"] == "ALLOCATABLE"
    # A claim allocated after the preparation: the next question sees it held.
    [taker] = records(claim("taker", device=("n1", "gpu-1")))
    await feed(store, CLUSTER, upserts=[taker], at=AT)
    assert (await explain(http, "waiting"))["verdict"] == "ALL_HELD"


class OnlyMl(Scope):
    """A narrower scope: namespace ml and the cluster-scoped objects."""

    def allows(self, cluster: str, namespace: str = "") -> bool:
        return namespace in ("", "ml")


async def test_a_narrowed_scope_gets_the_clusters_verdict(lab) -> None:
    """What a hidden claim holds is held: the narrower scope gets the admin's verdict, with the
    holder counted and not named."""
    store, _ = lab
    hidden = normalize(
        "ResourceClaim",
        {**claim("taker", device=("n1", "gpu-1")), "metadata": {
            "name": "taker", "namespace": "ops", "uid": "uid-ops-taker"}},
        cluster=CLUSTER,
    )  # fmt: skip
    await feed(store, CLUSTER, upserts=[hidden], at=AT)
    graph = schema.build_schema()
    variables = {"cluster": CLUSTER, "namespace": "ml", "name": "waiting"}

    async def diagnosis(scope: Scope) -> dict:
        result = await graph.execute(
            EXPLAIN, variable_values=variables, context_value=make_context(store, scope=scope)
        )
        assert result.errors is None, result.errors
        return result.data["explainClaim"]  # type: ignore[index]

    admin = await diagnosis(Scope.everything())
    assert admin["verdict"] == "ALL_HELD"  # ops/taker holds the last GPU
    assert "ops/taker" in admin["message"]
    narrow = await diagnosis(OnlyMl())
    assert narrow["verdict"] == "ALL_HELD" and narrow["holdersTotal"] == admin["holdersTotal"]
    assert narrow["requests"][0]["freeOrShareable"] == admin["requests"][0]["freeOrShareable"]
    assert "ops" not in str(narrow) and "1 claim(s) outside your scope" in narrow["message"]
    assert (await diagnosis(Scope.everything())) == admin


async def test_the_redis_store_gives_the_same_diagnoses(redis_url: str) -> None:
    """Through a shared Redis store (records decoded afresh on every read: no object is the
    same twice) the answers equal the in-memory store's, and the ledger is not rebuilt."""
    from dra_mirror.service.stores.redis import RedisStore

    world = records(
        node("n1", "8"),
        device_class("gpu.nvidia.com", GPU_CLASS),
        gpu_slice("n1", 2),
        pod("batch", "none", phase="Running", node_name="n1", cpu="7"),
        claim("trainer", device=("n1", "gpu-0"), users=("trainer",)),
        pod("trainer", "trainer", phase="Pending", node_name=None, cpu="2"),
        claim("typo", selectors=("device.attributes['gpu.nvidia.com'].productName ==",)),
        claim("waiting"),
    )
    memory = MemoryStore()
    redis = RedisStore.from_url(redis_url, prefix=f"test-diag-{uuid.uuid4().hex[:8]}")
    graph = schema.build_schema()
    find = """{ findDevices(selector: "device.driver == 'gpu.nvidia.com'", status: FREE) {
        totalCount edges { node { name status } } } }"""
    try:
        answers = []
        for store in (memory, redis):
            await feed(store, CLUSTER, upserts=world, at=AT)
            await store.set_status(ClusterStatus(name=CLUSTER, connected=True, synced=True))
            got = []
            for name in ("trainer", "typo", "waiting", "waiting"):
                result = await graph.execute(
                    EXPLAIN,
                    variable_values={"cluster": CLUSTER, "namespace": "ml", "name": name},
                    context_value=make_context(store),
                )
                assert result.errors is None, result.errors
                got.append(result.data)
            result = await graph.execute(find, context_value=make_context(store))
            assert result.errors is None, result.errors
            got.append(result.data)
            answers.append(got)
        assert answers[0] == answers[1]
        assert [a["explainClaim"]["verdict"] for a in answers[1][:3]] == [  # type: ignore[index]
            "NODE_RESOURCES",
            "SELECTOR_ERROR",
            "ALLOCATABLE",
        ]
        assert answers[1][4]["findDevices"]["totalCount"] == 1  # type: ignore[index]
    finally:
        await redis.close()


async def test_the_nodes_a_waiting_pod_may_use_come_from_its_spec(lab) -> None:
    store, http = lab
    # n2's only GPU is held by an idle hand-made claim; n1 still has gpu-1 free.
    n2 = node("n2", "8")
    n2["metadata"]["labels"] = {"rack": "r2", "gpus": "1"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "rack", "operator": "In", "values": ["r2", "r3"]},
                            {"key": "gpus", "operator": "Gt", "values": ["0"]},
                        ]
                    }
                ]
            }
        }
    }
    pinned = pod("pinned", "pinned", phase="Pending", node_name=None, cpu="1")
    pinned["spec"]["affinity"] = affinity
    lost = pod("lost", "lost", phase="Pending", node_name=None, cpu="1")
    lost["spec"]["nodeSelector"] = {"rack": "r9"}  # no such node
    await feed(
        store,
        CLUSTER,
        at=AT,
        upserts=records(
            n2,
            gpu_slice("n2", 1),
            claim("parked", device=("n2", "gpu-0")),
            claim("pinned"),
            pinned,
            claim("lost"),
            lost,
        ),
    )
    d = await explain(http, "pinned")
    assert d["verdict"] == "ALL_HELD"
    assert [(h["claim"]["name"], h["idle"]) for h in d["holders"]] == [("parked", True)]
    # The same claim asked of n1 by name: the caller's nodes override the pod's.
    response = await http.post(
        "/graphql",
        json={
            "query": EXPLAIN,
            "variables": {
                "cluster": CLUSTER,
                "namespace": "ml",
                "name": "pinned",
                "eligible": ["n1"],
            },
        },
    )
    overridden = response.json()["data"]["explainClaim"]
    assert overridden["verdict"] == "ALLOCATABLE" and "on node n1" in overridden["message"]
    # A selector no node satisfies: every node is asked, rather than "no devices".
    assert (await explain(http, "lost"))["verdict"] == "ALLOCATABLE"
