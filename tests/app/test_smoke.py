"""Smoke test through a real uvicorn on a free loopback port: the `demo` wiring (simulator in
the app's lifespan, the real Kubernetes client watching it, the in-memory store) queried over
HTTP with httpx. Truth comes from the simulator's own object store (raw v1 dicts)."""

from __future__ import annotations

import asyncio
import socket

import httpx
import uvicorn

from dra_mirror.service.runtime.demo import demo_app
from dra_mirror.service.settings import Settings

H200_UUID = "GPU-21f6a090-a7a1-f57a-27f8-e0da547eb43a"  # the real H200 of ../shared/hardware


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def holders_in(store, uuid: str) -> list[tuple[str, str]]:
    """(namespace, claim) of every claim whose allocation names the device with `uuid`."""
    devices = {
        (s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"])
        for s in store.list("resourceslices")
        for d in s["spec"].get("devices", [])
        if d.get("attributes", {}).get("uuid", {}).get("string") == uuid
    }
    return sorted(
        (c["metadata"]["namespace"], c["metadata"]["name"])
        for c in store.list("resourceclaims")
        for r in (c.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", [])
        if (r["driver"], r["pool"], r["device"]) in devices
    )


async def test_demo_served_by_uvicorn(tmp_path):
    demo = demo_app(Settings(), workdir=tmp_path)
    sock = free_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(demo.app, log_config=None, lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            for _ in range(600):  # until the app listens and every cluster synced once
                if server.started and (await http.get("/readyz")).status_code == 200:
                    break
                assert not serving.done(), "uvicorn stopped"
                await asyncio.sleep(0.05)
            else:
                raise AssertionError((await http.get("/readyz")).text)
            assert (await http.get("/healthz")).text == "ok\n"
            query = (
                "query($uuid: String!) { clusters { name status { connected synced apiVersion } }"
                " whoHolds(device: $uuid) { cluster claim { namespace name } pods { name phase } } }"
            )
            response = await http.post(
                "/graphql", json={"query": query, "variables": {"uuid": H200_UUID}}
            )
            assert response.status_code == 200
            data = response.json()["data"]
            sim = demo.simulator
            assert sim is not None
            assert [c["name"] for c in data["clusters"]] == sorted(sim.clusters)
            versions = {c["name"]: c["status"]["apiVersion"] for c in data["clusters"]}
            assert versions == {"east": "v1", "west": "v1beta1"}  # west serves v1beta1 only
            east = sim.clusters["east"]
            expected = holders_in(east, H200_UUID)
            assert expected, "the demo's first H200 is held"
            got = sorted((h["claim"]["namespace"], h["claim"]["name"]) for h in data["whoHolds"])
            assert got == expected
            assert all(p["phase"] == "Running" for h in data["whoHolds"] for p in h["pods"])
            # the demo records history (SQLite in its workdir): the history fields answer
            gaps = await http.post(
                "/graphql",
                json={
                    "query": (
                        '{ historyGaps(from: "2020-01-01T00:00:00Z", to: "2100-01-01T00:00:00Z") { cluster } }'
                    )
                },
            )
            assert "errors" not in gaps.json(), gaps.json()
            assert (demo.kubeconfig.parent / "history.db").exists()
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)
