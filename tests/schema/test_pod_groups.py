"""PodGroups in the graph (KEP-5729): a group's claims, pods and whether it holds devices with
no pod running. A claim the scheduler reserved for a PodGroup stays reserved until the group is
deleted, even when the group has no pod left: the group is then idle-held, and so is its claim.
Objects are shaped as a 1.37 workload controller and kube-scheduler write them
(scheduling.k8s.io/v1beta1 PodGroup, a claim generated from its template, status.reservedFor
naming the group)."""

from __future__ import annotations

from typing import Any

import httpx
from asgi_lifespan import LifespanManager

from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.feeding import feed

from . import world

GPU = "gpu.nvidia.com"
CLAIM = "trainers-shared-gpus-x7k2p"


def pod_group() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": world.meta("trainers", "ml"),
        "spec": {
            "workloadRef": {"workloadName": "training", "templateName": "workers"},
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "resourceClaims": [{"name": "shared-gpus", "resourceClaimTemplateName": "gpu-2"}],
        },
        "status": {
            "conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True",
                            "reason": "Scheduled", "lastTransitionTime": world.CREATED}],
            "resourceClaimStatuses": [{"name": "shared-gpus", "resourceClaimName": CLAIM}],
        },
    }  # fmt: skip


def group_claim() -> dict[str, Any]:
    body = world.claim(
        "ml", CLAIM, GPU, count=2, node_name="n1",
        results=[world.result(GPU, "n1", "gpu-0"), world.result(GPU, "n1", "gpu-1")],
        ownerReferences=[{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                          "name": "trainers", "uid": "uid-ml-trainers", "controller": True}],
        annotations={"resource.kubernetes.io/pod-claim-name": "shared-gpus"},
    )  # fmt: skip
    body["status"]["reservedFor"] = [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "trainers",
         "uid": "uid-ml-trainers"}
    ]  # fmt: skip
    return body


def member(name: str, phase: str) -> dict[str, Any]:
    body = world.pod("ml", name, node_name="n1", phase=phase,
                     templates={"shared-gpus": ("gpu-2", CLAIM)})  # fmt: skip
    body["spec"]["schedulingGroup"] = {"podGroupName": "trainers"}
    return body


QUERY = """{
  podGroups(cluster: "c") { name policy minCount workload scheduled runningPods idleHeld
    claims { name resourceClaimName resourceClaimTemplateName claim { name } }
    pods { name } heldClaims { name } }
  resourceClaim(cluster: "c", namespace: "ml", name: "%s") { idle podGroups { name } }
  pods(cluster: "c", namespace: "ml") { edges { node { name podGroup { name } } } }
}""".replace("%s", CLAIM)


async def _ask(http: httpx.AsyncClient) -> dict[str, Any]:
    body = (await http.post("/graphql", json={"query": QUERY})).json()
    assert "errors" not in body, body
    return body["data"]


async def test_a_pod_group_holding_devices_with_no_pod_running_is_idle_held() -> None:
    store = MemoryStore()
    slices = world.slice_("n1-gpu", GPU, "n1", "n1",
                          [world.gpu("gpu-0", "GPU-0"), world.gpu("gpu-1", "GPU-1")])  # fmt: skip
    objects = {
        "ResourceSlice": [slices],
        "ResourceClaim": [group_claim()],
        "PodGroup": [pod_group()],
        "Pod": [member("trainer-0", "Running"), member("trainer-1", "Running")],
    }
    records = [normalize(kind, raw, cluster="c") for kind, raws in objects.items() for raw in raws]
    await feed(store, "c", upserts=records, at="2026-01-01T02:00:00Z")
    app = compose_app(Settings(), store=store)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            await _phases(store, http)


async def _phases(store: MemoryStore, http: httpx.AsyncClient) -> None:
    running = await _ask(http)
    (group,) = running["podGroups"]
    assert group == {
        "name": "trainers", "policy": "Gang", "minCount": 2, "workload": "training",
        "scheduled": True, "runningPods": 2, "idleHeld": False,
        "claims": [{"name": "shared-gpus", "resourceClaimName": CLAIM,
                    "resourceClaimTemplateName": "gpu-2", "claim": {"name": CLAIM}}],
        "pods": [{"name": "trainer-0"}, {"name": "trainer-1"}],
        "heldClaims": [{"name": CLAIM}],
    }  # fmt: skip
    assert running["resourceClaim"] == {"idle": False, "podGroups": [{"name": "trainers"}]}
    assert {e["node"]["name"]: e["node"]["podGroup"] for e in running["pods"]["edges"]} == {
        "trainer-0": {"name": "trainers"}, "trainer-1": {"name": "trainers"},
    }  # fmt: skip

    # The job ends: both pods succeed; the group (and so the claim) keeps the devices.
    done = [
        normalize("Pod", member(n, "Succeeded"), cluster="c") for n in ("trainer-0", "trainer-1")
    ]
    await feed(store, "c", upserts=done, at="2026-01-01T03:00:00Z")
    ended = await _ask(http)
    (group,) = ended["podGroups"]
    assert (group["runningPods"], group["idleHeld"], group["heldClaims"]) == (
        0,
        True,
        [{"name": CLAIM}],
    )
    assert ended["resourceClaim"]["idle"] is True

    # The pods are deleted too: the group still holds its devices until it is deleted.
    gone = [
        normalize("Pod", member(n, "Succeeded"), cluster="c") for n in ("trainer-0", "trainer-1")
    ]
    await feed(store, "c", deletes=gone, at="2026-01-01T04:00:00Z")
    (group,) = (await _ask(http))["podGroups"]
    assert (group["pods"], group["idleHeld"]) == ([], True)
