"""One state, every front end, the same facts: each question asked through the graph
(`/graphql`: its core fields where they say the fact, else its question fields), Slack
(signed slash commands), MCP (`/mcp`, the SDK's client) and the command line (the installed
`dra-mirror`, over HTTP), on the demo's world with a SQLite history, all answered by one app
served by uvicorn on loopback; where the oracle knows the answer from the raw objects, it is
checked too."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from dra_mirror.service.questions.facts import DIAGNOSIS_FIELDS, FINDING_FIELDS, PLAN_FIELDS
from dra_mirror.service.questions.history_facts import TIMELINE_FIELDS
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.lifespan import opened
from dra_mirror.service.settings import Settings
from tests.contract.truth import free_rows, truth_of
from tests.contract.worlds import HistoryWorld, demo_with_history
from tests.mcp.test_mcp_http import client as mcp_client
from tests.plan.test_plan import deployment
from tests.slack.conftest import Slack, served, slack_settings
from tests.slack.test_commands import bullet_lines, holdings, texts

DRA_MIRROR = Path(sys.executable).with_name("dra-mirror")


@dataclass
class Fronts:
    url: str
    world: HistoryWorld
    http: httpx.AsyncClient
    slack: Slack

    async def graph(self, query: str, **variables: Any) -> dict[str, Any]:
        body = (await self.http.post("/graphql", json={"query": query,
                                                       "variables": variables})).json()  # fmt: skip
        assert "errors" not in body, body["errors"]
        return body["data"]

    async def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        async with mcp_client(self.url, None) as mcp:  # a session lives in one task
            result = await mcp.call_tool(name, arguments)
        assert not result.is_error, result.content
        return result.structured_content

    async def cli(self, *args: str) -> Any:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("DRA_MIRROR_")}
        process = await asyncio.create_subprocess_exec(
            str(DRA_MIRROR), *args, "--server", self.url, "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=environ,
        )  # fmt: skip
        out, err = await process.communicate()
        assert process.returncode in (0, 1), err  # lint exits 1 on an error finding
        return orjson.loads(out)

    def objects(self, cluster: str) -> list[dict[str, Any]]:
        return self.world.objects(cluster)


@pytest.fixture(scope="module")
async def fronts(tmp_path_factory) -> AsyncIterator[Fronts]:
    world = await demo_with_history(tmp_path_factory.mktemp("contract"))
    app = compose_app(Settings(), store=world.store, history=opened(world.history),
                      slack=slack_settings())  # fmt: skip
    try:
        async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as http:
            yield Fronts(url, world, http, Slack(http))
    finally:
        await world.history.close()


WHO_HOLDS = """query($device: String!) {
  whoHolds(device: $device) { cluster device { driver pool name }
    claim { namespace name state idle } pods { namespace name phase } }
  devicesNamed(device: $device) { cluster driver pool name status }
  whoHeld(device: $device, at: "2030-01-01T00:00:00Z") {
    cluster driver pool device namespace claim since } }"""


@pytest.mark.parametrize(
    "spec", ["east-h200-1/gpu-0", "gpu-0", "east-a100-0/gpu-1", "east-h200-0/gpu-1"]
)
async def test_who_holds(fronts: Fronts, spec: str) -> None:
    graph = await fronts.graph(WHO_HOLDS, device=spec)
    since = {(a["cluster"], a["driver"], a["pool"], a["device"], f"{a['namespace']}/{a['claim']}"):
             a["since"] for a in graph["whoHeld"]}  # fmt: skip
    facts = sorted(
        (h["cluster"], f"{h['device']['driver']}/{h['device']['pool']}/{h['device']['name']}",
         f"{h['claim']['namespace']}/{h['claim']['name']}", h["claim"]["state"],
         h["claim"]["idle"], sorted(f"{p['namespace']}/{p['name']} ({p['phase']})" for p in h["pods"]),
         since[(h["cluster"], h["device"]["driver"], h["device"]["pool"], h["device"]["name"],
                f"{h['claim']['namespace']}/{h['claim']['name']}")])
        for h in graph["whoHolds"]
    )  # fmt: skip
    statuses = sorted((d["cluster"], f"{d['driver']}/{d['pool']}/{d['name']}", d["status"])
                      for d in graph["devicesNamed"])  # fmt: skip
    mcp, cli = await asyncio.gather(fronts.tool("who_holds", device=spec, limit=200),
                                    fronts.cli("who-holds", spec))  # fmt: skip

    def rows(found: list[dict], device: Any) -> list[tuple]:
        return sorted((h["cluster"], device(h), h["claim"], h["state"], h["idle"],
                       sorted(h["pods"]), h["since"]) for h in found)  # fmt: skip

    assert rows(mcp["holdings"], lambda h: h["device"]) == facts
    assert rows(cli["holdings"], lambda h: f"{h['driver']}/{h['pool']}/{h['device']}") == facts
    assert sorted((d["cluster"], d["device"], d["status"]) for d in mcp["devices"]) == statuses
    assert sorted((d["cluster"], f"{d['driver']}/{d['pool']}/{d['device']}", d["status"])
                  for d in cli["devices"]) == statuses  # fmt: skip
    reply = await fronts.slack.command(f"who-holds {spec}")
    if len({f[1] for f in facts}) == 1:
        # one held device: a section per holding, its cluster / node and claim
        assert sorted(h[2] for h in holdings(reply)) == [f[2] for f in facts]
    elif facts:  # several: one line per held device, its holders named
        for f in facts:
            assert any(f[2] in line for line in bullet_lines(reply))
    else:
        (status,) = {s for _, _, s in statuses}
        assert f"it is {status.lower()}" in reply["text"]
    # the oracle's reading of the raw objects
    for cluster, device, status in statuses:
        driver, pool, name = device.split("/")
        assert truth_of(fronts.objects(cluster)).devices[(driver, pool, name)].status == (
            status.lower()
        )


async def test_free_devices(fronts: Fronts) -> None:
    for cluster in fronts.world.raw:
        top, nested = free_rows(fronts.objects(cluster))
        core = await fronts.graph(
            "query($c: String) { devices(cluster: $c, status: FREE, first: 1000) {"
            " nodes { driver pool name } } }", c=cluster,
        )  # fmt: skip
        every = {(d["driver"], d["pool"], d["name"]) for d in core["devices"]["nodes"]}
        assert every == top | {p for parts in nested.values() for p in parts}
        mcp = await fronts.tool("free_devices", cluster=cluster, limit=200)
        cli = await fronts.cli("free", "--cluster", cluster, "--limit", "1000")
        graph = await fronts.graph(
            "query($c: String) { freeDevices(cluster: $c, first: 1000) { total partitions"
            " devices { driver pool device partitions } } }", c=cluster,
        )  # fmt: skip
        reply = await fronts.slack.command(f"free {cluster}")
        for answer in (mcp, cli, graph["freeDevices"]):
            assert answer["total"] == len(top)
            assert answer["partitions"] == sum(len(p) for p in nested.values())
        found = {(d["driver"], d["pool"], d["device"]) for d in cli["devices"]}
        assert found == {
            (d["driver"], d["pool"], d["device"]) for d in graph["freeDevices"]["devices"]
        }
        assert found == {tuple(d["device"].split("/")) for d in mcp["devices"]} == top
        assert reply["text"].startswith(f"{len(top)} free devices in {cluster}")


CLAIMS = """query($pending: ClaimState, $idle: Boolean) {
  resourceClaims(state: $pending, idle: $idle, first: 1000) { nodes { cluster namespace name } } }"""


@pytest.mark.parametrize("question", ["waiting", "idle"])
async def test_waiting_and_idle(fronts: Fronts, question: str) -> None:
    core = await fronts.graph(CLAIMS, **({"pending": "PENDING"} if question == "waiting"
                                         else {"idle": True}))  # fmt: skip
    facts = sorted((c["cluster"], f"{c['namespace']}/{c['name']}")
                   for c in core["resourceClaims"]["nodes"])  # fmt: skip
    tool = "waiting_claims" if question == "waiting" else "idle_claims"
    field = "waitingClaims" if question == "waiting" else "idleClaims"
    graph = await fronts.graph(f"{{ {field}(first: 1000) {{ total claims {{ cluster claim }} }} }}")
    mcp = await fronts.tool(tool, limit=200)
    cli = await fronts.cli(question, "--limit", "1000")
    reply = await fronts.slack.command(question)
    slack = sorted(re.match(r"• (\S+) · (\S+) ", line).groups() for line in bullet_lines(reply))
    for answer in (graph[field], mcp, cli):
        assert sorted((c["cluster"], c["claim"]) for c in answer["claims"]) == facts
        assert answer["total"] == len(facts)
    assert slack == facts
    truths = {c: truth_of(fronts.objects(c)) for c in fronts.world.raw}
    oracle = sorted((c, f"{ns}/{n}") for c, t in truths.items() for (ns, n), claim in t.claims.items()
                    if (claim.state == "pending" if question == "waiting" else claim.idle))  # fmt: skip
    assert facts == oracle


async def test_explain(fronts: Fronts) -> None:
    pending = sorted((c, ns, n) for c in fronts.world.raw
                     for (ns, n), claim in truth_of(fronts.objects(c)).claims.items()
                     if claim.state == "pending")  # fmt: skip
    for cluster, namespace, name in [("east", "research", "notebook-gpu"), *pending]:
        graph = await fronts.graph(
            f"query($k: String!, $n: String!, $c: String!) {{ explainClaim(cluster: $k,"
            f" namespace: $n, name: $c) {{ {DIAGNOSIS_FIELDS} }} }}", k=cluster, n=namespace,
            c=name,
        )  # fmt: skip
        facts = graph["explainClaim"]
        assert facts is not None
        cli = await fronts.cli("explain", f"{namespace}/{name}")
        mcp = await fronts.tool("why_pending", namespace=namespace, claim=name)
        reply = await fronts.slack.command(f"explain {namespace}/{name}")
        assert [d for d in cli if d["cluster"] == cluster] == [facts]
        [m] = [x for x in mcp["diagnoses"] if x["cluster"] == cluster]
        assert (m["verdict"], m["message"]) == (facts["verdict"].lower().replace("_", "-"),
                                               facts["message"])  # fmt: skip
        assert m["holdersTotal"] == facts["holdersTotal"]
        assert f"in {cluster}: `{facts['verdict']}`" in "\n".join(texts(reply))


async def test_plan(fronts: Fronts) -> None:
    manifests = deployment("trainer-b", 3)
    graph = await fronts.graph(f"query($m: String!) {{ plan(manifests: $m) {{ {PLAN_FIELDS} }} }}",
                               m=manifests)  # fmt: skip
    path = Path(fronts.world.history.engine.url.database).with_name("plan.yaml")
    path.write_text(manifests)
    cli = await fronts.cli("plan", str(path))
    mcp = await fronts.tool("plan", manifests=manifests)
    assert cli == graph["plan"]
    for c, m in zip(graph["plan"]["clusters"], mcp["clusters"], strict=True):
        assert [i["placeable"] for i in c["items"]] == [i["placeable"] for i in m["items"]]
        assert c["summary"] == m["summary"]


async def test_lint_and_capacity(fronts: Fronts) -> None:
    graph = await fronts.graph(f'{{ lint(cluster: "east") {{ {FINDING_FIELDS} }} }}')
    cli = await fronts.cli("lint", "--cluster", "east")
    mcp = await fronts.tool("lint", cluster="east")
    reply = await fronts.slack.command("lint east")
    assert cli == graph["lint"] == mcp["findings"]
    assert reply["text"] == f"{len(graph['lint'])} finding(s) in east"
    fields = ("cluster driver devices free inUse partitioned tainted partitions partitionsFree"
              " partitionsInUse unpublished type physical physicalFree physicalWhole"
              " physicalPartitioned physicalShared heldEquivalents")  # fmt: skip
    nested = "partitionedDevices { physical node state heldEquivalents inUse }"
    rows = (await fronts.graph(f"{{ capacity {{ {fields} {nested} }} }}"))["capacity"]
    mcp_rows = (await fronts.tool("capacity"))["rows"]
    cli_rows = await fronts.cli("capacity")
    assert mcp_rows == rows
    keys = [*fields.split(), "partitionedDevices"]
    cli_fields = [{k: r[_snake(k)] for k in keys} for r in cli_rows]
    for row in cli_fields:
        row["partitionedDevices"] = [
            {_camel(k): v for k, v in p.items()} for p in row["partitionedDevices"]
        ]
    assert cli_fields == rows
    slack = "\n".join(texts(await fronts.slack.command("capacity")))
    for r in rows:
        assert f"{r['cluster']} · `{r['driver']}`: {r['physical']} " in slack
        assert f"{r['devices']} devices — {r['free']} free" in slack
        truth = truth_of(fronts.objects(r["cluster"]))
        published = [d for k, d in truth.devices.items() if k[0] == r["driver"] and d.published]
        assert r["devices"] + r["partitions"] == len(published)
        gpus, held = _gpu_recount(fronts.world.raw[r["cluster"]])
        if r["type"] == "gpu":
            assert (r["physical"], r["heldEquivalents"]) == (gpus, held)


def _gpu_recount(raw: dict[str, list[dict[str, Any]]]) -> tuple[int, float]:
    """GPUs and GPU-equivalents held, counted from the raw objects without the model: a GPU is
    a device of `type: gpu`; an allocated MIG partition takes the memory slices it consumes
    over its GPU's counter set's slices."""
    slices_of: dict[tuple[str, str], int] = {}  # (pool, counter set) -> memory slices
    devices: dict[tuple[str, str], dict[str, Any]] = {}
    gpus = 0
    for o in raw["resourceslices"]:
        if o["spec"]["driver"] != "gpu.nvidia.com":
            continue
        pool = o["spec"]["pool"]["name"]
        for cs in o["spec"].get("sharedCounters") or []:
            slices_of[(pool, cs["name"])] = sum(
                1 for n in cs["counters"] if n.startswith("memory-slice-")
            )
        for d in o["spec"].get("devices") or []:
            devices[(pool, d["name"])] = d
            gpus += d["attributes"]["type"]["string"] == "gpu"
    held = Fraction(0)
    for o in raw["resourceclaims"]:
        results = ((o.get("status") or {}).get("allocation") or {}).get("devices") or {}
        for result in results.get("results") or []:
            if result["driver"] != "gpu.nvidia.com" or result.get("adminAccess"):
                continue
            device = devices[(result["pool"], result["device"])]
            use = (device.get("consumesCounters") or [None])[0]
            if device["attributes"]["type"]["string"] == "gpu" or use is None:
                held += 1
                continue
            used = sum(1 for n in use["counters"] if n.startswith("memory-slice-"))
            held += Fraction(used, slices_of[(result["pool"], use["counterSet"])])
    return gpus, float(held)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


async def test_a_pods_devices_and_a_devices_history(fronts: Fronts) -> None:
    truth = truth_of(fronts.objects("east"))
    (namespace, pod), devices = next((k, v) for k, v in sorted(truth.pod_devices.items()) if v)
    core = await fronts.graph(
        "query($n: String) { pods(cluster: \"east\", namespace: $n, first: 1000) {"
        " nodes { name devices { driver pool name } } } }", n=namespace,
    )  # fmt: skip
    [found] = [p for p in core["pods"]["nodes"] if p["name"] == pod]
    facts = sorted((d["driver"], d["pool"], d["name"]) for d in found["devices"])
    assert facts == sorted(devices)
    mcp = await fronts.tool("pod_devices", namespace=namespace, pod=pod)
    cli = await fronts.cli("pod-devices", f"{namespace}/{pod}")
    reply = await fronts.slack.command(f"pod {namespace}/{pod}")
    assert sorted(tuple(d["device"].split("/")) for d in mcp["pods"][0]["devices"]) == facts
    assert sorted((d["driver"], d["pool"], d["device"]) for d in cli[0]["devices"]) == facts
    assert all(f"`{name}`" in "\n".join(texts(reply)) for _, _, name in facts)
    device = "/".join(devices[0])
    graph = await fronts.graph(
        f"query($d: String!) {{ deviceHistory(device: $d, from: \"2026-01-01T00:00:00Z\","
        f" to: \"2030-01-01T00:00:00Z\") {{ {TIMELINE_FIELDS} }} }}", d=device,
    )  # fmt: skip
    held = [(a["namespace"], a["claim"], a["since"]) for t in graph["deviceHistory"]
            for a in t["allocations"]]  # fmt: skip
    assert held, "history saw the allocation"
    mcp_history = await fronts.tool("device_history", device=device, hours=24 * 90 * 0.999)
    assert [(a["namespace"], a["claim"], a["since"]) for a in mcp_history["holders"]] == held
    code_history = await fronts.cli("device-history", device, "--hours", "2000")
    assert [(a["namespace"], a["claim"], a["since"])
            for t in code_history for a in t["allocations"]] == held  # fmt: skip
    slack = "\n".join(texts(await fronts.slack.command(f"history {device} 2000")))
    assert all(f"{ns}/{claim} from {since}" in slack for ns, claim, since in held)


FRAGMENTATION = """{ fragmentation(cluster: "east") { cluster node className gpus
  gpusPartlyAllocated gpusPlaceable freeMemory strandedMemory largestPlaceable unplaceable
  summary } }"""


async def test_fragmentation(fronts: Fronts) -> None:
    rows = (await fronts.graph(FRAGMENTATION))["fragmentation"]
    assert any(r["gpusPartlyAllocated"] for r in rows), rows  # the demo's H200s are partitioned
    fields = [_snake(k) for k in rows[0]]
    mcp, cli = await asyncio.gather(fronts.tool("fragmentation", cluster="east"),
                                    fronts.cli("fragmentation", "--cluster", "east"))  # fmt: skip
    as_graph = [{_camel(k): r[k] for k in fields} for r in cli]
    assert as_graph == rows
    assert [{_camel(k): r.get(k, r.get(_camel(k))) for k in fields} for r in mcp["rows"]] == rows
    for name in sorted({r["className"] for r in rows}):
        lines = bullet_lines(await fronts.slack.command(f"fragmentation {name} east"))
        assert lines == [
            f"• east · {r['node']} · `{name}`: {r['summary']} — "
            f"{r['strandedMemory'] / 1024**3:.1f} GiB stranded"
            for r in rows
            if r["className"] == name
        ]
    unknown = await fronts.slack.command("fragmentation no-such-class east")
    assert unknown["text"].startswith("no-such-class: no such class or cluster")
