"""The MCP tools at /mcp, asked with the `mcp` SDK's own client over streamable HTTP against the
app served by uvicorn on loopback: bearer tokens through the app's access gate, each tool's
answer within the token's scope, exactly as /graphql answers it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from asgi_lifespan import LifespanManager
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from dra_mirror.service.access.config import AccessConfig
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.access.static import StaticTokens, token_hash
from dra_mirror.service.mcp.http import McpEndpoint
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.plan.conftest import World, demo_world
from tests.plan.test_plan import deployment
from tests.slack.conftest import served

ADMIN, TRAINING = "admin-token-0123456789", "training-token-0123456789"


@pytest.fixture
async def mirror(tmp_path) -> AsyncIterator[tuple[str, World]]:
    world = await demo_world()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        f"  - {{name: admin, sha256: {token_hash(ADMIN)}, scope: {{admin: true}}}}\n"
        f"  - {{name: training, sha256: {token_hash(TRAINING)}, scope: {{namespaces: [east/training]}}}}\n"
    )
    config = AccessConfig(static_tokens=str(tokens), rate_limit=0)
    control = AccessControl(config, authenticators=[StaticTokens.from_file(tokens)])
    app = compose_app(Settings(), store=world.store, access=opened(control))
    async with served(app) as url:
        yield url, world


@asynccontextmanager
async def client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(f"{url}mcp", http_client=http)) as session:
            yield session


async def call(session: Client, name: str, **arguments):
    result = await session.call_tool(name, arguments)
    return result


async def test_tools_are_listed_with_their_schemas(mirror) -> None:
    url, _ = mirror
    async with client(url, ADMIN) as session:
        listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {"who_holds", "free_devices", "why_pending", "plan", "device_history",
                          "claim_history", "contention"}  # fmt: skip
    plan = tools["plan"]
    assert plan.input_schema["required"] == ["manifests"]
    assert "would wait" in plan.description and plan.annotations.read_only_hint


async def test_answers_follow_the_tokens_scope(mirror) -> None:
    url, world = mirror
    async with client(url, ADMIN) as session:
        holds = await call(session, "who_holds", device="east-h200-1/gpu-0")
        assert not holds.is_error
        [row] = holds.structured_content["holdings"]
        assert row["claim"] == "research/notebook-gpu" and row["idle"]
        why = await call(session, "why_pending", namespace="research", claim="notebook-gpu")
        assert why.structured_content["diagnoses"][0]["verdict"] == "idle"
        free = await call(session, "free_devices", device_class="gpu.nvidia.com", cluster="east")
        held = world.held("east")
        assert free.structured_content["total"] > 0
        assert all(
            tuple(d["device"].split("/")) not in held for d in free.structured_content["devices"]
        )
        plan = await call(session, "plan", manifests=deployment("trainer-b", 3), cluster="east")
        [east] = plan.structured_content["clusters"]
        assert [i["placeable"] for i in east["items"]] == [True, True, False]
        assert east["items"][2]["releaseToFit"] == ["research/notebook-gpu"]
    async with client(url, TRAINING) as session:
        holds = await call(session, "who_holds", device="east-h200-1/gpu-0")
        assert holds.structured_content["holdings"] == []  # research is outside the scope
        why = await call(session, "why_pending", namespace="research", claim="notebook-gpu")
        assert why.is_error and "no claim research/notebook-gpu" in why.content[0].text
        plan = await call(session, "plan", manifests=deployment("trainer-b", 3))
        clusters = plan.structured_content["clusters"]
        assert [c["cluster"] for c in clusters] == ["east"]
        waiting = clusters[0]["items"][2]
        assert waiting["releaseToFit"] == [] and "research/" not in waiting["message"]
        # what the scope hides is counted: holders in research, and the idle one to release
        assert waiting["holdersHidden"] > 0 and waiting["releaseHidden"] == 1
        assert not any(h.startswith("research/") for h in waiting["holders"])


async def test_why_pending_keeps_held_devices_held_for_a_narrow_scope(mirror) -> None:
    """A training claim waits behind GPUs research holds: the training token gets the admin's
    verdict and counts, with research's holders counted and never named."""
    url, world = mirror
    pending = [
        (c["metadata"]["namespace"], c["metadata"]["name"])
        for c in world.raw["east"]["resourceclaims"]
        if c["metadata"]["namespace"] == "training"
        and not (c.get("status") or {}).get("allocation")
    ]
    assert pending
    for namespace, name in pending:
        async with client(url, ADMIN) as session:
            admin = await call(
                session, "why_pending", namespace=namespace, claim=name, cluster="east"
            )
        async with client(url, TRAINING) as session:
            mine = await call(
                session, "why_pending", namespace=namespace, claim=name, cluster="east"
            )
        [a] = admin.structured_content["diagnoses"]
        [d] = mine.structured_content["diagnoses"]
        assert d["verdict"] == a["verdict"] == "all-held", (a, d)
        assert d["requests"] == a["requests"] and d["holdersTotal"] == a["holdersTotal"]
        assert d["holdersHidden"] == a["holdersTotal"] - len(d["holders"]) > 0
        assert "research/" not in str(d) and "outside your scope" in d["message"]


async def test_bad_input_is_a_tool_error_and_no_token_is_refused(mirror) -> None:
    url, _ = mirror
    async with client(url, ADMIN) as session:
        bad = await call(session, "plan", manifests="a: [b")
        assert bad.is_error and "not YAML" in bad.content[0].text
        history = await call(
            session, "claim_history", namespace="research", claim="x", cluster="east"
        )
        assert history.is_error  # no history database behind this mirror
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{url}mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
    assert response.status_code == 401


async def test_free_devices_of_a_class_use_each_clusters_own_class(mirror) -> None:
    url, _ = mirror
    mig = "mig-1g-18gb.gpu.nvidia.com"  # a DeviceClass of east only; west has such MIG devices
    async with client(url, ADMIN) as session:
        every = await call(session, "free_devices", device_class=mig)
        assert not every.is_error and every.structured_content["total"] > 0
        assert {d["cluster"] for d in every.structured_content["devices"]} == {"east"}
        west = await call(session, "free_devices", device_class=mig, cluster="west")
        assert west.is_error and f"no DeviceClass {mig} in west" in west.content[0].text


async def test_mcp_answers_after_the_apps_lifespan_ran_again() -> None:
    app = compose_app(Settings(), store=MemoryStore())
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"accept": "application/json, text/event-stream"}
    for _ in range(2):  # an app started, stopped, started again (tests, embedding servers)
        async with LifespanManager(app) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
                response = await http.post("/mcp", json=listing, headers=headers)
        assert response.status_code == 200, response.text
        assert {t["name"] for t in response.json()["result"]["tools"]} >= {"who_holds", "plan"}


async def test_a_server_that_cannot_start_fails_its_requests_instead_of_hanging(monkeypatch):
    endpoint = McpEndpoint(lambda request: None, None)
    with pytest.raises(RuntimeError, match="lifespan"):
        await endpoint.current()  # no lifespan running: refused at once

    def broken():
        raise ValueError("no server today")

    monkeypatch.setattr(endpoint, "_new_manager", broken)
    async with endpoint.running():
        for _ in range(2):  # every request sees the failure, none waits for ever
            with pytest.raises(ValueError, match="no server today"):
                await asyncio.wait_for(endpoint.current(), 5)
