"""Several clusters in one simulator: ports, kubeconfig contexts, served version subsets,
scenario faults, and serve_forever's announcements."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from dra_mirror.service.sim.run import ClusterSpec, Simulator, serve_forever
from dra_mirror.service.sim.store import ClusterStore
from tests.sim.conftest import api_client_for, claim_body


async def test_two_clusters_with_their_own_versions_and_faults(tmp_path: Path):
    old = ClusterStore("old-cluster")
    new = ClusterStore("new-cluster")
    old.create("resourceclaims", claim_body("legacy"))
    specs = [
        ClusterSpec(old, versions=("v1beta1",), faults={"expireWatches": 1}),
        ClusterSpec(new, versions=("v1", "v1beta2")),
    ]
    kubeconfig = tmp_path / "kc" / "config"
    async with Simulator(specs, kubeconfig_path=kubeconfig) as sim:
        doc = yaml.safe_load(kubeconfig.read_text())
        assert [c["name"] for c in doc["contexts"]] == ["old-cluster", "new-cluster"]
        servers = {c["name"]: c["cluster"]["server"] for c in doc["clusters"]}
        assert servers == {name: sim.url(name) for name in sim.served}
        assert len(set(sim.ports.values())) == 2 and all(sim.ports.values())

        async with await api_client_for(kubeconfig, "old-cluster") as api:
            groups = await client.ApisApi(api).get_api_versions()
            assert [v.version for v in groups.groups[0].versions] == ["v1beta1"]
            claims = await client.ResourceV1beta1Api(api).list_resource_claim_for_all_namespaces()
            assert [c.metadata.name for c in claims.items] == ["legacy"]
            with pytest.raises(ApiException) as error:
                await client.ResourceV1Api(api).list_resource_claim_for_all_namespaces()
            assert error.value.status == 404
            assert sim.served["old-cluster"].faults.settings == {"expireWatches": 1}

        async with await api_client_for(kubeconfig, "new-cluster") as api:
            groups = await client.ApisApi(api).get_api_versions()
            assert groups.groups[0].preferred_version.version == "v1"
            claims = await client.ResourceV1beta2Api(api).list_resource_claim_for_all_namespaces()
            assert claims.items == []


async def test_names_must_be_unique():
    with pytest.raises(ValueError, match="unique"):
        Simulator([ClusterStore("same"), ClusterStore("same")])


async def test_serve_forever_announces_and_stops_on_cancel(tmp_path: Path):
    lines: list[str] = []
    ready = asyncio.Event()

    def announce(line: str) -> None:
        lines.append(line)
        if line.startswith("kubeconfig"):
            ready.set()

    kubeconfig = tmp_path / "sim.kubeconfig"
    task = asyncio.create_task(
        serve_forever([ClusterStore("demo")], kubeconfig_path=kubeconfig, announce=announce)
    )
    await asyncio.wait_for(ready.wait(), 10)
    assert kubeconfig.exists()  # written before the announcement
    assert lines[0].startswith("cluster demo listening on http://127.0.0.1:")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
