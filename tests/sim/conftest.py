"""Simulated clusters on loopback and real clients pointed at them.

`sim` serves one cluster named `alpha` (all three resource.k8s.io versions, bookmarks every
0.2 s) on a free port and writes its kubeconfig; `api` is a real kubernetes_asyncio
ApiClient configured from that kubeconfig; `store` is the cluster's ClusterStore.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.sim.store import ClusterStore


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[Simulator]:
    spec = ClusterSpec(ClusterStore("alpha", seed=1))
    async with Simulator(
        [spec], kubeconfig_path=tmp_path / "kubeconfig", bookmark_interval=0.2
    ) as simulator:
        yield simulator


@pytest.fixture
def store(sim: Simulator) -> ClusterStore:
    return sim.clusters["alpha"]


async def api_client_for(kubeconfig: Path, context: str) -> client.ApiClient:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(kubeconfig), context=context, client_configuration=configuration
    )
    return client.ApiClient(configuration=configuration)


@pytest.fixture
async def api(sim: Simulator) -> AsyncIterator[client.ApiClient]:
    assert sim.kubeconfig_path is not None
    api_client = await api_client_for(sim.kubeconfig_path, "alpha")
    async with api_client:
        yield api_client


def claim_body(name: str, *, namespace: str = "default", labels: dict | None = None) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }


def slice_body(name: str, node: str, devices: int = 2, *, driver: str = "gpu.nvidia.com") -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"type": {"string": "gpu"}, "index": {"int": i}},
                    "capacity": {"memory": {"value": "143771Mi"}},
                }
                for i in range(devices)
            ],
        },
    }


async def deleted(store: ClusterStore, plural: str, namespace: str | None, name: str) -> None:
    """Return once the object is gone from the store (woken by its DELETED event)."""
    gone = asyncio.Event()

    def on_change(event_type: str, changed: str, obj: dict) -> None:
        meta = obj["metadata"]
        if changed == plural and event_type == "DELETED" and meta["name"] == name:
            gone.set()

    store.add_listener(on_change)
    if store.get(plural, namespace, name) is not None:
        await asyncio.wait_for(gone.wait(), timeout=10)
