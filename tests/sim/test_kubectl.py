"""The real kubectl against the simulated API server: tables, YAML, watch, apply, delete.

kubectl runs as a subprocess through asyncio (the server shares the test's event loop), with
its discovery cache in a temporary directory.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.store import ClusterStore
from tests.sim.conftest import claim_body, deleted, slice_body


class Kubectl:
    def __init__(self, binary: Path, sim: Simulator, cache: Path) -> None:
        assert sim.kubeconfig_path is not None
        self.base = [
            str(binary),
            "--kubeconfig",
            str(sim.kubeconfig_path),
            "--cache-dir",
            str(cache),
            "--context",
            "alpha",
        ]

    async def run(self, *args: str, check: bool = True) -> str:
        proc = await asyncio.create_subprocess_exec(
            *self.base,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        if check:
            assert proc.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
        return out.decode()

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.base, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


async def test_get_resourceclaims_table_with_state(
    kubectl_binary: Path, sim: Simulator, store: ClusterStore, tmp_path: Path
):
    store.create("namespaces", {"metadata": {"name": "team-a"}})
    store.create("resourceclaims", claim_body("idle", namespace="team-a"))
    store.create("resourceclaims", claim_body("busy"))
    allocation = {
        "devices": {"results": [{"request": "gpu", "driver": "d.x", "pool": "p", "device": "g"}]}
    }
    reserved = [
        {"resource": "pods", "name": "web-0", "uid": "8d2c6b1e-1111-4a43-9a7b-123456789abc"}
    ]
    store.patch(
        "resourceclaims",
        "default",
        "busy",
        {"status": {"allocation": allocation, "reservedFor": reserved}},
        subresource="status",
    )
    kubectl = Kubectl(kubectl_binary, sim, tmp_path / "cache")
    rows = table(await kubectl.run("get", "resourceclaims", "-A"))
    assert rows[0] == ["NAMESPACE", "NAME", "STATE", "AGE"]
    assert [r[:3] for r in rows[1:]] == [
        ["default", "busy", "allocated,reserved"],
        ["team-a", "idle", "pending"],
    ]


async def test_get_one_object_has_the_list_columns(
    kubectl_binary: Path, sim: Simulator, store: ClusterStore, tmp_path: Path
):
    """`kubectl get KIND NAME` asks for a Table of one object: the same columns as the list."""
    store.create("resourceclaims", claim_body("solo"))
    store.create("resourceslices", slice_body("node-0-gpu", "node-0", devices=1))
    kubectl = Kubectl(kubectl_binary, sim, tmp_path / "cache")
    claim = table(await kubectl.run("get", "resourceclaim", "solo"))
    assert claim[0] == ["NAME", "STATE", "AGE"] and claim[1][:2] == ["solo", "pending"]
    one = table(await kubectl.run("get", "resourceslice", "node-0-gpu"))
    assert one[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert one[1][:4] == ["node-0-gpu", "node-0", "gpu.nvidia.com", "node-0"]


async def test_get_resourceslices_yaml_and_nodes(
    kubectl_binary: Path, sim: Simulator, store: ClusterStore, tmp_path: Path
):
    store.create("resourceslices", slice_body("node-0-gpu", "node-0", devices=3))
    store.create(
        "nodes",
        {
            "metadata": {"name": "node-0", "labels": {"node-role.kubernetes.io/worker": ""}},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.35.0"},
            },
        },
        validate=False,
    )
    kubectl = Kubectl(kubectl_binary, sim, tmp_path / "cache")
    listed = yaml.safe_load(await kubectl.run("get", "resourceslices", "-o", "yaml"))
    assert listed["kind"] == "List"
    (item,) = listed["items"]
    assert item["apiVersion"] == "resource.k8s.io/v1" and item["kind"] == "ResourceSlice"
    assert [d["name"] for d in item["spec"]["devices"]] == ["gpu-0", "gpu-1", "gpu-2"]
    slices = table(await kubectl.run("get", "resourceslices"))
    assert slices[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    assert slices[1][:4] == ["node-0-gpu", "node-0", "gpu.nvidia.com", "node-0"]
    nodes = table(await kubectl.run("get", "nodes"))
    assert nodes[1][:3] == ["node-0", "Ready", "worker"] and nodes[1][4] == "v1.35.0"
    beta = yaml.safe_load(
        await kubectl.run("get", "resourceslices.v1beta1.resource.k8s.io", "-o", "yaml")
    )
    assert beta["items"][0]["spec"]["devices"][0]["basic"]["capacity"]["memory"]["value"] == (
        "143771Mi"
    )


async def test_get_pods_watch(
    kubectl_binary: Path, sim: Simulator, store: ClusterStore, tmp_path: Path
):
    pod = {"metadata": {"name": "first"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    store.create("pods", pod)
    kubectl = Kubectl(kubectl_binary, sim, tmp_path / "cache")
    proc = await kubectl.start("get", "pods", "-A", "-w")
    assert proc.stdout is not None
    try:
        header = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().split()
        assert header[:4] == ["NAMESPACE", "NAME", "READY", "STATUS"]
        first = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().split()
        assert first[:4] == ["default", "first", "0/1", "Pending"]
        store.create("pods", dict(pod, metadata={"name": "second"}))
        store.patch(
            "pods", "default", "first", {"status": {"phase": "Running"}}, subresource="status"
        )
        lines = [
            (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().split() for _ in range(2)
        ]
        assert [line[1] for line in lines] == ["second", "first"]
        assert lines[1][3] == "Running"
    finally:
        proc.kill()
        await proc.wait()


async def test_apply_and_delete_fixture(
    kubectl_binary: Path, sim: Simulator, store: ClusterStore, tmp_path: Path, shared_dir: Path
):
    fixture = (
        shared_dir / "fixtures" / "upstream" / "dra-example-driver-prioritized-alternatives.yaml"
    )
    kubectl = Kubectl(kubectl_binary, sim, tmp_path / "cache")
    out = await kubectl.run("apply", "-f", str(fixture))
    assert "resourceclaimtemplate.resource.k8s.io/prioritized-gpu created" in out
    templates = store.list("resourceclaimtemplates", "prioritized-alternatives")
    assert sorted(t["metadata"]["name"] for t in templates) == ["preferred-gpu", "prioritized-gpu"]
    annotation = templates[0]["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/last-applied-configuration" in annotation
    assert templates[0]["metadata"]["managedFields"][0]["manager"] == "kubectl-client-side-apply"
    dry = await kubectl.run("delete", "-f", str(fixture), "--dry-run=server")
    assert "(server dry run)" in dry
    assert store.get("pods", "prioritized-alternatives", "pod0") is not None
    again = await kubectl.run("apply", "-f", str(fixture))
    assert "pod/pod0 unchanged" in again
    await kubectl.run("label", "pod", "-n", "prioritized-alternatives", "pod0", "team=a")
    labels = store.get("pods", "prioritized-alternatives", "pod0")["metadata"]["labels"]
    assert labels == {"app": "pod", "team": "a"}
    out = await kubectl.run("delete", "-f", str(fixture), "--wait=false")
    assert 'namespace "prioritized-alternatives" deleted' in out
    assert store.list("pods", "prioritized-alternatives") == []
    # Terminating until the namespace controller is done.
    await deleted(store, "namespaces", None, "prioritized-alternatives")


async def test_kubectl_sees_status_errors(kubectl_binary: Path, sim: Simulator, tmp_path: Path):
    kubectl = Kubectl(kubectl_binary, sim, tmp_path / "cache")
    proc = await kubectl.start("get", "resourceclaim", "missing")
    _, err = await proc.communicate()
    assert proc.returncode != 0
    assert 'resourceclaims.resource.k8s.io "missing" not found' in err.decode()


async def test_a_1_37_cluster_serves_podgroups_and_device_taint_rules_to_kubectl(
    kubectl_binary: Path, tmp_path: Path
):
    """1.37 serves PodGroup in scheduling.k8s.io (v1beta1, v1alpha3) beside resource.k8s.io;
    `kubectl get` of a kind without printer columns of its own shows its name and age."""
    from dra_mirror.service.sim.run import ClusterSpec
    from tests.clusters.world import pod_group

    spec = ClusterSpec(ClusterStore("alpha", seed=1), kubernetes=37)
    async with Simulator([spec], kubeconfig_path=tmp_path / "kubeconfig") as sim:
        kubectl = Kubectl(kubectl_binary, sim, tmp_path / "cache")
        resources = table(await kubectl.run("api-resources", "--api-group=scheduling.k8s.io"))
        assert ["podgroups", "scheduling.k8s.io/v1beta1", "true", "PodGroup"] in resources
        manifest = tmp_path / "group.yaml"
        manifest.write_text(yaml.safe_dump(pod_group("trainers", claim_name="shared")))
        await kubectl.run("apply", "-f", str(manifest))
        rows = table(await kubectl.run("get", "podgroups", "-A"))
        assert rows[0] == ["NAMESPACE", "NAME", "AGE"] and rows[1][:2] == ["default", "trainers"]
        alpha = yaml.safe_load(await kubectl.run(
            "get", "podgroups.v1alpha3.scheduling.k8s.io", "trainers", "-o", "yaml"))  # fmt: skip
        assert alpha["apiVersion"] == "scheduling.k8s.io/v1alpha3"
        assert alpha["spec"]["resourceClaims"] == [
            {"name": "shared-gpus", "resourceClaimName": "shared"}
        ]
        assert table(await kubectl.run("get", "devicetaintrules")) == []  # none yet, no error
