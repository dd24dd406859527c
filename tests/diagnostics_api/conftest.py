"""The mirrored world of the diagnostics API tests, through the real watch path.

One scenario: the shipped `demo` (clusters `east` and `west`) plus a cluster `manual` staging the
operations manual's "When Nothing Is Allocated" rows (a class typo, a selector no device
passes, every A100 held by an idle hand-made claim, an H100 taken by the first of two template
pods, a class of a driver that is not installed, a selector that fails to evaluate). The
simulator serves them over HTTP, the mirror watches them with the real Kubernetes client into
the in-memory store (`service.runtime.demo.demo_app`), and a real uvicorn serves the app on a loopback
port: tests ask GraphQL over HTTP, the CLI tests run `dra-mirror` against the same server or
against the simulator's kubeconfig. Truth comes from the simulator's own object store.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml

from dra_mirror.service.runtime.demo import Demo, demo_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.sim.scenario import scenario_dir
from tests.diagnostics.manifests import A100, H100, template, workload

H200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
# Whole GPUs publish no `profile`: reading it is an evaluation error, not "no match".
NO_PROFILE = "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"


def _held_by_hand(name: str, pool: str, device: str) -> dict[str, Any]:
    """A claim an admin allocated by hand (nothing deallocates it; no pod uses it)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ops"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": pool,
                            "device": device,
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
            }
        },
    }


MANUAL_CLUSTER: dict[str, Any] = {
    "name": "manual",
    "versions": ["v1"],
    "namespaces": ["ops"],
    "deviceClasses": ["gpu.nvidia.com"],
    "nodes": [
        {"name": "a100-0", "devices": [{"profile": "nvidia-a100-80gb-pcie", "count": 1}]},
        {"name": "h100-0", "devices": [{"profile": "nvidia-h100-80gb-hbm3", "count": 1}]},
        {"name": "legacy-0", "devicePlugin": {"nvidia.com/gpu": "2"}},
    ],
    "objects": [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.amd.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.amd.com'"}}]},
        },
        _held_by_hand("forgotten", "a100-0", "gpu-0"),
        template("typo", "gpu.nvidia.cmo"),
        template("h200", "gpu.nvidia.com", H200),
        template("a100", "gpu.nvidia.com", A100),
        template("h100", "gpu.nvidia.com", H100),
        template("amd", "gpu.amd.com"),
        template("profile", "gpu.nvidia.com", NO_PROFILE),
    ],
    "workloads": [
        workload("typo", "typo"),
        workload("h200", "h200"),
        workload("a100", "a100"),
        workload("first", "h100"),
        workload("second", "h100"),
        workload("amd", "amd"),
        workload("profile", "profile"),
    ],
}


@dataclass
class Mirrored:
    url: str  # the app's base URL (uvicorn on loopback)
    http: httpx.AsyncClient
    demo: Demo
    kubeconfig: Path

    def raw(self, cluster: str, plural: str) -> list[dict[str, Any]]:
        """The simulator's own objects (v1 dicts): the truth."""
        assert self.demo.simulator is not None
        return self.demo.simulator.clusters[cluster].list(plural)

    async def query(self, document: str, **variables: Any) -> dict[str, Any]:
        response = await self.http.post(
            "/graphql", json={"query": document, "variables": variables}
        )
        assert response.status_code == 200, response.text
        return response.json()

    async def data(self, document: str, **variables: Any) -> dict[str, Any]:
        body = await self.query(document, **variables)
        assert "errors" not in body, body["errors"]
        return body["data"]


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture(scope="session")
async def mirrored(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mirrored]:
    workdir = tmp_path_factory.mktemp("diagnostics-api")
    scenario = yaml.safe_load((scenario_dir() / "demo.yaml").read_text())
    scenario["name"] = "diagnostics"
    scenario["clusters"].append(MANUAL_CLUSTER)
    path = workdir / "diagnostics.yaml"
    path.write_text(yaml.safe_dump(scenario))
    demo = demo_app(Settings(), workdir=workdir, scenario=str(path))
    sock = _free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(demo.app, log_config=None, lifespan="on", access_log=False)
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    url = f"http://127.0.0.1:{port}"
    try:
        # a connection per request: the session's client is idle between modules longer than
        # uvicorn keeps a connection alive, and reusing one the server is closing reads nothing
        fresh = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=url, timeout=30, limits=fresh) as http:
            for _ in range(1200):  # until the app listens and every cluster synced once
                if server.started and (await http.get("/readyz")).status_code == 200:
                    break
                assert not serving.done(), "uvicorn stopped"
                await asyncio.sleep(0.05)
            else:
                raise AssertionError((await http.get("/readyz")).text)
            # The watchers froze what the initial sync built (gc.freeze, as in production);
            # the suite's other tests expect an unfrozen collector.
            gc.unfreeze()
            yield Mirrored(url=url, http=http, demo=demo, kubeconfig=demo.kubeconfig)
    finally:
        server.should_exit = True
        await asyncio.gather(serving, return_exceptions=True)
        sock.close()


EXPLAIN = """query Explain($cluster: String!, $namespace: String!, $name: String!,
                    $eligible: [String!]) {
  explainClaim(cluster: $cluster, namespace: $namespace, name: $name, eligibleNodes: $eligible) {
    cluster namespace name state verdict message holdersTotal nodesWithoutDriver
    pods { namespace name }
    requests { request deviceClassName classExists classDevices freeOrShareable nodes needed
               verdict summary selectors { expression passing rejected }
               selectorErrors { expression message } heldBy { namespace name } }
    holders { claim { namespace name } pods { namespace name } running idle idleSince
              resourceClaim { name state } }
    checks { name ok detail }
  }
}"""


def claim_named(raw_claims: list[dict[str, Any]], namespace: str, prefix: str) -> str:
    """The one claim of `namespace` whose name starts with `prefix` (template claims carry the
    pod's generated name)."""
    [name] = [
        c["metadata"]["name"]
        for c in raw_claims
        if c["metadata"]["namespace"] == namespace and c["metadata"]["name"].startswith(prefix)
    ]
    return name
