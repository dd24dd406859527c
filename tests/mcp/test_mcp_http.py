"""The MCP tools at /mcp, asked with the `mcp` SDK's own client over streamable HTTP against the
app served by uvicorn on loopback: bearer tokens through the app's access gate, each tool's
answer within the token's scope and checked against the oracle's reading of the raw objects."""

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
from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.local import LocalQuestions
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.contract.truth import free_rows, truth_of
from tests.contract.worlds import HistoryWorld, demo_with_history
from tests.plan.conftest import World, demo_world
from tests.plan.test_plan import deployment
from tests.slack.conftest import served

ADMIN, TRAINING = "admin-token-0123456789", "training-token-0123456789"
TOOLS = {"who_holds", "free_devices", "waiting_claims", "idle_claims", "capacity", "fragmentation",
         "pod_devices", "why_pending", "plan", "lint", "device_history", "claim_history",
         "contention"}  # fmt: skip


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
    return await session.call_tool(name, arguments)


async def test_tools_are_listed_with_their_schemas(mirror) -> None:
    url, _ = mirror
    async with client(url, ADMIN) as session:
        listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == TOOLS
    for tool in tools.values():  # every answer typed and documented
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        assert tool.description and tool.annotations.read_only_hint
    plan = tools["plan"]
    assert plan.input_schema["required"] == ["manifests"]
    assert "would wait" in plan.description
    who = tools["who_holds"].output_schema["properties"]
    assert set(who["answer"]["enum"]) == {"held", "held-elsewhere", "free", "blocked", "mixed"}


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
        assert holds.structured_content["answer"] == "held-elsewhere"
        assert holds.structured_content["devices"][0]["heldElsewhere"] == 1
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
        idle = await call(session, "idle_claims")
        assert idle.structured_content == {"total": 0, "claims": []}  # research's: not seen


async def test_a_bare_name_is_answered_in_full(mirror) -> None:
    """`gpu-0` names a held device on several nodes: each holding still says its claim's
    state, whether it is idle, and its pods (not the short answer of a chat list)."""
    url, world = mirror
    truth = truth_of(o for objects in world.raw["east"].values() for o in objects)
    async with client(url, ADMIN) as session:
        answer = await call(session, "who_holds", device="gpu-0", cluster="east")
    rows = answer.structured_content["holdings"]
    assert len(rows) > 1
    for row in rows:
        namespace, name = row["claim"].split("/")
        claim = truth.claims[(namespace, name)]
        assert row["state"] == claim.state.upper() and row["idle"] == claim.idle
        assert sorted(p.split(" (")[0] for p in row["pods"]) == sorted(
            f"{namespace}/{pod}" for pod in claim.consumers
        )
    assert any(r["claim"] == "research/notebook-gpu" and r["idle"] for r in rows)
    assert answer.structured_content["answer"] == "held"


async def test_free_blocked_unknown_device_and_cluster_are_told_apart(mirror) -> None:
    url, world = mirror
    truth = truth_of(o for objects in world.raw["east"].values() for o in objects)
    assert truth.devices[("gpu.nvidia.com", "east-h200-0", "gpu-1")].status == "blocked"
    assert truth.devices[("gpu.nvidia.com", "east-a100-0", "gpu-1")].status == "free"
    async with client(url, ADMIN) as session:
        blocked = await call(session, "who_holds", device="east-h200-0/gpu-1")
        free = await call(session, "who_holds", device="east-a100-0/gpu-1")
        unknown = await call(session, "who_holds", device="east-a100-0/gpu-9")
        cluster = await call(session, "who_holds", device="gpu-0", cluster="eastt")
    assert blocked.structured_content["answer"] == "blocked"
    assert blocked.structured_content["devices"][0]["status"] == "BLOCKED"
    assert free.structured_content["answer"] == "free"
    assert free.structured_content["devices"][0]["status"] == "FREE"
    assert unknown.is_error and "no device named 'east-a100-0/gpu-9'" in unknown.content[0].text
    assert cluster.is_error and "no cluster named 'eastt'" in cluster.content[0].text
    assert "did you mean 'east'" in cluster.content[0].text


async def test_free_devices_count_a_gpu_and_its_partitions_once(mirror) -> None:
    url, world = mirror
    async with client(url, ADMIN) as session:
        for cluster in world.raw:
            top, nested = free_rows([o for objs in world.raw[cluster].values() for o in objs])
            assert nested, "the demo has a free GPU whose partitions are free too"
            found = await call(session, "free_devices", cluster=cluster, limit=200)
            answer = found.structured_content
            assert answer["total"] == len(top)
            assert answer["partitions"] == sum(len(p) for p in nested.values())
            rows = {tuple(d["device"].split("/")): d for d in answer["devices"]}
            assert set(rows) == top
            for whole, parts in nested.items():
                assert {(whole[0], whole[1], p) for p in rows[whole]["partitions"]} == parts


async def test_a_selector_that_fails_to_evaluate_is_an_error(mirror) -> None:
    url, _ = mirror
    async with client(url, ADMIN) as session:
        broken = await call(session, "free_devices",
                            selector="device.attributes['gpu.nvidia.com'].noSuchAttribute == 1")  # fmt: skip
        bad = await call(session, "free_devices", selector="device.driver ==")
        partly = await call(session, "free_devices",
                            selector="device.attributes['gpu.nvidia.com'].productName != ''")  # fmt: skip
    assert broken.is_error and "failed to evaluate on every device" in broken.content[0].text
    assert bad.is_error and "does not compile" in bad.content[0].text
    # NICs have no gpu.nvidia.com attributes: those fail, the GPUs answer
    assert not partly.is_error and partly.structured_content["total"] > 0
    assert partly.structured_content["evaluationErrorCount"] > 0


async def test_agents_list_waiting_idle_capacity_pods_and_lint(mirror) -> None:
    url, world = mirror
    truths = {c: truth_of(o for objs in world.raw[c].values() for o in objs) for c in world.raw}
    async with client(url, ADMIN) as session:
        waiting = (await call(session, "waiting_claims", limit=200)).structured_content
        idle = (await call(session, "idle_claims", limit=200)).structured_content
        capacity = (await call(session, "capacity")).structured_content
        pods = (await call(session, "pod_devices", namespace="research",
                           pod=next(p for ns, p in truths["east"].pod_devices
                                    if ns == "research" and truths["east"].pod_devices[(ns, p)])))  # fmt: skip
        lint = (await call(session, "lint", cluster="east")).structured_content
        no_pod = await call(session, "pod_devices", namespace="research", pod="nobody")
        no_cluster = await call(session, "lint", cluster="nowhere")
    pending = {(c, f"{ns}/{n}") for c, t in truths.items()
               for (ns, n), claim in t.claims.items() if claim.state == "pending"}  # fmt: skip
    assert {(c["cluster"], c["claim"]) for c in waiting["claims"]} == pending
    assert waiting["total"] == len(pending)
    idle_truth = {(c, f"{ns}/{n}") for c, t in truths.items()
                  for (ns, n), claim in t.claims.items() if claim.idle}  # fmt: skip
    assert {(c["cluster"], c["claim"]) for c in idle["claims"]} == idle_truth
    for row in capacity["rows"]:
        devices = [d for k, d in truths[row["cluster"]].devices.items()
                   if k[0] == row["driver"] and d.published]  # fmt: skip
        assert row["devices"] + row["partitions"] == len(devices)
        assert row["free"] + row["partitionsFree"] == sum(d.status == "free" for d in devices)
    [entry] = pods.structured_content["pods"]
    namespace, name = entry["pod"].split("/")
    assert {tuple(d["device"].split("/")) for d in entry["devices"]} == set(
        truths["east"].pod_devices[(namespace, name)]
    )
    assert isinstance(lint["findings"], list) and lint["errors"] == sum(
        f["severity"] == "ERROR" for f in lint["findings"]
    )
    assert no_pod.is_error and "no pod research/nobody" in no_pod.content[0].text
    assert no_cluster.is_error and "no cluster named 'nowhere'" in no_cluster.content[0].text


async def test_since_comes_from_history(tmp_path) -> None:
    """The demo's claims carry no allocationTimestamp (clusters before 1.34): since when a
    claim holds a device is when history saw the allocation begin."""
    world: HistoryWorld = await demo_with_history(tmp_path)
    try:
        app = compose_app(Settings(), store=world.store, history=opened(world.history))
        async with served(app) as url, client(url, None) as session:
            answer = await call(session, "who_holds", device="gpu-0")
            history = await call(session, "device_history", device="east-h200-1/gpu-0",
                                 hours=24 * 90)  # fmt: skip
    finally:
        await world.history.close()
    rows = answer.structured_content["holdings"]
    assert rows and all(r["since"] == "2026-11-30T00:00:00Z" for r in rows)
    [held] = history.structured_content["holders"]
    assert held["claim"] == "notebook-gpu" and held["until"] is None


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
        assert history.is_error and "history is not configured" in history.content[0].text
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
        assert west.is_error and f"no DeviceClass {mig} in cluster west" in west.content[0].text


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
    endpoint = McpEndpoint(lambda request: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(RuntimeError, match="lifespan"):
        await endpoint.current()  # no lifespan running: refused at once

    def broken():
        raise ValueError("no server today")

    monkeypatch.setattr(endpoint, "_new_manager", broken)
    async with endpoint.running():
        for _ in range(2):  # every request sees the failure, none waits for ever
            with pytest.raises(ValueError, match="no server today"):
                await asyncio.wait_for(endpoint.current(), 5)


async def test_agents_read_fragmentation_as_the_graph_answers_it(mirror) -> None:
    url, world = mirror
    async with client(url, ADMIN) as session:
        found = await call(session, "fragmentation", cluster="east", device_class="mig.nvidia.com")
        unknown = await call(session, "fragmentation", device_class="nope")
    rows = found.structured_content["rows"]
    local = await LocalQuestions(Asker.over(world.store)).fragmentation(
        "east", class_name="mig.nvidia.com"
    )
    assert [
        (r["node"], r["largestPlaceable"], r["strandedMemory"], r["summary"]) for r in rows
    ] == [(x.node, x.largest_placeable, x.stranded_memory, x.summary) for x in local]
    assert any(r["unplaceable"] for r in rows)
    assert unknown.is_error and "no DeviceClass nope" in unknown.content[0].text
