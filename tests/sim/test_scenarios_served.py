"""Scenarios served over HTTP and read with the real kubernetes_asyncio client; pods created
through the API are scheduled by the world; churn and delayed starts run in the event loop."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.scenario import World, build_world, load_scenario, parse_scenario
from dra_mirror.service.sim.shapes import pod_object
from tests.sim.conftest import api_client_for


@pytest.fixture
async def served_demo(tmp_path: Path) -> AsyncIterator[tuple[World, Simulator]]:
    world = build_world(load_scenario("demo"))
    async with Simulator(world.specs, kubeconfig_path=tmp_path / "kubeconfig") as sim:
        yield world, sim


async def eventually(check, *, tries: int = 200) -> None:
    """Poll `check()` until it is true (bounded, so a broken world fails instead of hanging)."""
    for _ in range(tries):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition never became true")


async def test_demo_over_http_in_each_clusters_version(served_demo):
    world, sim = served_demo
    assert sim.kubeconfig_path is not None
    async with await api_client_for(sim.kubeconfig_path, "west") as west:
        custom = client.CustomObjectsApi(west)
        claims = await custom.list_cluster_custom_object(
            "resource.k8s.io", "v1beta1", "resourceclaims"
        )
        assert len(claims["items"]) == world.stores["west"].count("resourceclaims")
        pair = next(c for c in claims["items"] if c["metadata"]["name"] == "h100-pair")
        assert pair["spec"]["devices"]["requests"][0]["count"] == 2  # v1beta1: flat request
        slices = await custom.list_cluster_custom_object(
            "resource.k8s.io", "v1beta1", "resourceslices", limit=2
        )
        assert "basic" in slices["items"][0]["spec"].get("devices", [{"basic": {}}])[0]
    async with await api_client_for(sim.kubeconfig_path, "east") as east:
        core = client.CoreV1Api(east)
        pending = await core.list_pod_for_all_namespaces(field_selector="status.phase=Pending")
        assert [p.metadata.name.split("-")[0] for p in pending.items] == ["trainer"]


async def test_a_pod_posted_to_the_api_is_scheduled(served_demo):
    world, sim = served_demo
    assert sim.kubeconfig_path is not None
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "posted", "namespace": "research"},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "a100"}],
        },
    }
    async with await api_client_for(sim.kubeconfig_path, "east") as east:
        core = client.CoreV1Api(east)
        await core.create_namespaced_pod("research", pod)
        read = await core.read_namespaced_pod("posted", "research")
        assert read.status.phase == "Running" and read.spec.node_name == "east-a100-0"
        claim_name = read.status.resource_claim_statuses[0].resource_claim_name
        claim = await client.CustomObjectsApi(east).get_namespaced_custom_object(
            "resource.k8s.io", "v1", "research", "resourceclaims", claim_name
        )
        assert claim["status"]["reservedFor"][0]["name"] == "posted"
        await core.delete_namespaced_pod("posted", "research")
    assert world.stores["east"].get("resourceclaims", "research", claim_name) is None


SMALL = {
    "clusters": [
        {
            "name": "tiny",
            "startDelay": 0.05,
            "namespaces": ["jobs"],
            "deviceClasses": ["gpu.nvidia.com"],
            "nodes": [{"name": "n0", "devices": [{"profile": "nvidia-a100-80gb-pcie", "count": 2}]}],
            "objects": [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaimTemplate",
                    "metadata": {"name": "gpu", "namespace": "jobs"},
                    "spec": {"spec": {"devices": {"requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                    ]}}},
                }
            ],
            "workloads": [{"name": "w", "namespace": "jobs", "replicas": 1,
                           "claims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}],
            "churn": {"rate": 50, "lifetime": 0.1, "seed": 1, "namespace": "jobs", "speed": 1,
                      "shapes": [{"name": "g", "claims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}]},
        }
    ]
}  # fmt: skip


async def test_a_pod_starts_after_the_delay_when_a_loop_runs():
    world = build_world(parse_scenario({"clusters": [{**SMALL["clusters"][0], "churn": None}]}))
    store = world.stores["tiny"]
    (first,) = store.list("pods")
    assert first["spec"]["nodeName"] == "n0" and first["status"]["phase"] == "Pending"
    store.create(
        "pods",
        pod_object("late", "jobs", claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}]),
    )
    late = store.get("pods", "jobs", "late")
    assert late["spec"]["nodeName"] == "n0" and late["status"]["phase"] == "Pending"
    assert late["status"]["conditions"][0]["type"] == "PodScheduled"
    await eventually(lambda: {p["status"]["phase"] for p in store.list("pods")} == {"Running"})


async def test_churn_runs_inside_the_loop():
    world = build_world(parse_scenario(SMALL))
    store = world.stores["tiny"]
    seen: list[tuple[str, str]] = []
    store.add_listener(lambda kind, plural, obj: seen.append((kind, plural)))
    task = asyncio.create_task(world.run())
    try:
        await eventually(lambda: ("ADDED", "pods") in seen and ("DELETED", "pods") in seen)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    applied = world.churns["tiny"].applied
    assert {s.action for s in applied} >= {"arrive", "leave"}


POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: applied
  namespace: training
spec:
  nodeSelector: {kubernetes.io/hostname: east-h200-1}
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04
    resources:
      claims: [{name: gpu}]
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: single-h200
"""


async def kubectl(binary: Path, kubeconfig: Path, cache: Path, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(binary), "--kubeconfig", str(kubeconfig), "--context", "east",
        "--cache-dir", str(cache), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_kubectl_apply_and_delete_drive_the_world(served_demo, kubectl_binary, tmp_path):
    world, sim = served_demo
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD_YAML)
    cache = tmp_path / "cache"
    await kubectl(kubectl_binary, sim.kubeconfig_path, cache, "apply", "-f", str(manifest))
    # east-h200-1 has no whole GPU left (demo): the applied pod waits like the third trainer.
    table = await kubectl(
        kubectl_binary, sim.kubeconfig_path, cache, "get", "pods", "-n", "training"
    )
    assert re.search(r"^applied\s+0/1\s+Pending", table, re.M)
    running = [
        p["metadata"]["name"]
        for p in world.stores["east"].list("pods", "training")
        if p["status"]["phase"] == "Running"
    ]
    await kubectl(
        kubectl_binary, sim.kubeconfig_path, cache, "delete", "pod", "-n", "training", running[0]
    )
    claims = await kubectl(
        kubectl_binary, sim.kubeconfig_path, cache, "get", "resourceclaims", "-n", "training"
    )
    # The freed GPU went to the first pod waiting for it (the trainer replica), not to "applied".
    assert len(re.findall(r"allocated,reserved", claims)) == 2
    assert re.search(r"^applied-gpu-\w{5}\s+pending", claims, re.M)


async def test_churn_behind_its_plan_lets_the_api_answer_meanwhile():
    """A churn that has fallen behind (a busy machine) catches up step by step, yielding to
    the event loop between steps, so the API server's requests are answered meanwhile
    instead of waiting until the backlog is written."""
    fast = {**SMALL["clusters"][0], "churn": {**SMALL["clusters"][0]["churn"], "speed": 1e6}}
    world = build_world(parse_scenario({"clusters": [{**fast, "workloads": []}]}))
    churn = world.churns["tiny"]
    apply = churn.apply

    def bounded(step):  # the plan is endless: stop a churn that never yields after a while
        if len(churn.applied) >= 500:
            raise RuntimeError("the churn never yielded")
        apply(step)

    churn.apply = bounded  # type: ignore[method-assign]
    task = asyncio.create_task(churn.run())
    ticks = 0
    for _ in range(20):
        await asyncio.sleep(0)
        ticks += 1
        if task.done():
            break
    applied = len(churn.applied)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert ticks == 20 and 0 < applied < 500


async def test_a_running_churn_says_how_far_behind_its_plan_it_is():
    world = build_world(parse_scenario({"clusters": [{**SMALL["clusters"][0], "workloads": []}]}))
    churn = world.churns["tiny"]
    assert churn.behind() == 0.0  # not running
    task = asyncio.create_task(churn.run())
    try:
        await asyncio.sleep(0.05)
        assert churn.behind() < 0.05  # an idle loop keeps up
        time.sleep(0.3)  # noqa: ASYNC251 (the loop held on purpose: steps fall due and wait)
        assert churn.behind() >= 0.2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
