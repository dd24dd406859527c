"""The mirror's questions as tools a model can call: small, structured answers.

Every tool is `async (ask, **arguments) -> dict`: it asks the graph through `ask` (documents of
`service.questions`, or the graph's own fields) and keeps only what an agent needs to act —
names, states, nodes, verdicts, one-line messages — with lists cut at `limit` and the full count
beside them. A refusal of the graph (a bad argument, history off, a scope that hides the
object) raises `QuestionError`, which the server returns as a tool error with its message.

Promises: no tool writes anything; the same tool answers the same over HTTP and stdio.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dra_mirror.service.questions.asking import Ask, QuestionError
from dra_mirror.service.questions.explain import explain_claim
from dra_mirror.service.questions.holdings import ask_who_holds
from dra_mirror.service.questions.plan import ask_plan

MAX_LIMIT = 200

FREE = """query Free($selector: String!, $cluster: String, $first: Int) {
  findDevices(selector: $selector, status: FREE, cluster: $cluster, first: $first) {
    totalCount evaluationErrorCount
    nodes { cluster driver pool name uuid node { name } attributes } } }"""

DEVICE_HISTORY = """query DeviceHistory($device: String!, $from: DateTime!, $to: DateTime!,
                                       $cluster: String) {
  deviceHistory(device: $device, from: $from, to: $to, cluster: $cluster) {
    uuid allocations { cluster driver pool device node namespace claim request since until } } }"""

CLAIM_HISTORY = """query ClaimHistory($cluster: String!, $namespace: String!, $name: String!) {
  claimHistory(cluster: $cluster, namespace: $namespace, name: $name) {
    cluster namespace name uid
    waits { since until endReason classes }
    allocations { driver pool device node request since until }
    consumers { name since until } idle { since until } } }"""

CONTENTION = """query Contention($from: DateTime!, $to: DateTime!, $groupBy: ContentionGroup!,
                                   $cluster: String) {
  contention(from: $from, to: $to, groupBy: $groupBy, cluster: $cluster) {
    cluster group deviceHoursAvailable deviceHoursAllocated deviceHoursIdle utilization
    claimsWaited waitP50Seconds waitP95Seconds waitMaxSeconds } }"""

CLASSES = """query Classes($cluster: String) {
  deviceClasses(cluster: $cluster) { cluster name selectors } }"""


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise QuestionError(f"limit must be between 1 and {MAX_LIMIT}")
    return limit


def _window(hours: float) -> tuple[str, str]:
    if not 0 < hours <= 24 * 90:
        raise QuestionError("hours must be more than 0 and at most 2160 (90 days)")
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(hours=hours)
    return start.isoformat().replace("+00:00", "Z"), now.isoformat().replace("+00:00", "Z")


async def who_holds(
    ask: Ask, device: str, cluster: str | None = None, limit: int = 20
) -> dict[str, Any]:
    answer = await ask_who_holds(ask, device, cluster, history=False, brief_when_ambiguous=True)
    rows = [
        {"cluster": h.cluster, "node": h.node, "device": f"{h.driver}/{h.pool}/{h.device}",
         "uuid": h.uuid, "model": h.model, "claim": h.claim, "state": h.state,
         "pods": h.pods, "since": h.since, "idle": h.idle}
        for h in answer.holdings
    ]  # fmt: skip
    # Held by claims the caller may not see: no row (as whoHolds), but never "free" either —
    # the devices count those holders (withheldAllocations), and so does this answer.
    elsewhere = [
        {"cluster": w.cluster, "node": w.node, "device": f"{w.driver}/{w.pool}/{w.device}",
         "uuid": w.uuid, "allocations": w.allocations}
        for w in answer.withheld
    ]  # fmt: skip
    limit = _limit(limit)
    return {"devicesNamed": len(answer.devices), "holdings": rows[:limit], "total": len(rows),
            "heldElsewhere": elsewhere}  # fmt: skip


async def free_devices(
    ask: Ask,
    selector: str | None = None,
    device_class: str | None = None,
    cluster: str | None = None,
    limit: int = 20,
) -> dict[str, Any]:
    limit = _limit(limit)
    if not device_class:
        expression = selector or "true"
        found = await ask(FREE, {"selector": expression, "cluster": cluster, "first": limit})
        return _free_answer(expression, [found["findDevices"]], limit)
    # A DeviceClass is a cluster's own object: each cluster that has it is searched with its
    # own selectors, and a cluster without it contributes nothing.
    data = await ask(CLASSES, {"cluster": cluster})
    classes = sorted(
        (c for c in data["deviceClasses"] if c["name"] == device_class), key=lambda c: c["cluster"]
    )
    if not classes:
        raise QuestionError(
            f"no DeviceClass {device_class} in {cluster or 'any cluster you may see'}"
        )
    searches, expressions = [], []
    for c in classes:
        parts = [f"({s})" for s in c["selectors"]] + ([f"({selector})"] if selector else [])
        expression = " && ".join(parts) or "true"
        expressions.append(expression)
        found = await ask(FREE, {"selector": expression, "cluster": c["cluster"], "first": limit})
        searches.append(found["findDevices"])
    answer = _free_answer(expressions[0], searches, limit)
    if len(set(expressions)) > 1:
        answer["selector"] = {c["cluster"]: e for c, e in zip(classes, expressions, strict=True)}
    return answer


def _free_answer(expression: str, searches: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    return {
        "selector": expression,
        "total": sum(f["totalCount"] for f in searches),
        "evaluationErrors": sum(f["evaluationErrorCount"] for f in searches),
        "devices": [
            {"cluster": d["cluster"], "node": (d["node"] or {}).get("name"),
             "device": f"{d['driver']}/{d['pool']}/{d['name']}", "uuid": d["uuid"],
             "attributes": d["attributes"]}
            for f in searches for d in f["nodes"]
        ][:limit],
    }  # fmt: skip


async def why_pending(
    ask: Ask, namespace: str, claim: str, cluster: str | None = None
) -> dict[str, Any]:
    found = await explain_claim(ask, namespace, claim, cluster)
    if not found:
        raise QuestionError(
            f"no claim {namespace}/{claim} in {cluster or 'any cluster you may see'}"
        )
    out = []
    for d in found:
        out.append({
            "cluster": d["cluster"], "claim": f"{d['namespace']}/{d['name']}", "state": d["state"],
            "verdict": d["verdict"].lower().replace("_", "-"), "message": d["message"],
            "requests": [{"request": r["request"], "class": r["deviceClassName"],
                          "verdict": r["verdict"].lower().replace("_", "-"),
                          "classDevices": r["classDevices"], "freeOrShareable": r["freeOrShareable"],
                          "needed": r["needed"]} for r in d["requests"]],
            "holders": [{"claim": f"{h['claim']['namespace']}/{h['claim']['name']}", "idle": h["idle"],
                         "idleSince": h["idleSince"]} for h in d["holders"][:20]],
            "holdersTotal": d["holdersTotal"],
            # holders in namespaces outside the caller's scope: counted, never named
            "holdersHidden": d.get("holdersHidden", 0),
        })  # fmt: skip
    return {"diagnoses": out}


async def plan(ask: Ask, manifests: str, cluster: str | None = None) -> dict[str, Any]:
    answer = await ask_plan(ask, manifests, cluster)
    clusters = []
    for c in answer["clusters"]:
        items = []
        for i in c["items"]:
            entry: dict[str, Any] = {
                "pod": f"{i['namespace']}/{i['name']}" if i["kind"] == "Pod" else i["workload"],
                "replica": i["replica"], "placeable": i["placeable"],
                "verdict": i["verdict"].lower().replace("_", "-"), "message": i["message"],
            }  # fmt: skip
            if i["placeable"]:
                entry["node"] = i["node"]
                entry["devices"] = [f"{d['driver']}/{d['pool']}/{d['device']}"
                                    for cl in i["claims"] for d in cl["devices"]]  # fmt: skip
            else:
                entry["holders"] = [
                    f"{h['claim']['namespace']}/{h['claim']['name']}" for h in i["holders"][:10]
                ]
                entry["releaseToFit"] = [f"{k['namespace']}/{k['name']}" for k in i["freedBy"]]
                # claims of namespaces outside the caller's scope: counted, never named
                entry["holdersHidden"] = i["holdersHidden"]
                entry["releaseHidden"] = i["freedHidden"]
                if len(i["holders"]) > 10:
                    entry["holdersShown"] = f"10 of {len(i['holders'])}"
            items.append(entry)
        clusters.append({"cluster": c["cluster"], "placeable": c["placeable"], "summary": c["summary"],
                         "items": items, "lint": [f"{f['rule']}: {f['message']}" for f in c["findings"]]})  # fmt: skip
    return {"clusters": clusters, "skipped": answer["skipped"]}


async def device_history(
    ask: Ask, device: str, hours: float = 24, cluster: str | None = None
) -> dict[str, Any]:
    start, end = _window(hours)
    data = await ask(
        DEVICE_HISTORY, {"device": device, "from": start, "to": end, "cluster": cluster}
    )
    timelines = data["deviceHistory"]
    holders = [a for t in timelines for a in t["allocations"]]
    return {"from": start, "to": end, "uuids": [t["uuid"] for t in timelines],
            "holders": holders[:50], "total": len(holders)}  # fmt: skip


async def claim_history(ask: Ask, namespace: str, claim: str, cluster: str) -> dict[str, Any]:
    data = await ask(CLAIM_HISTORY, {"cluster": cluster, "namespace": namespace, "name": claim})
    return {"lives": data["claimHistory"][:5], "total": len(data["claimHistory"])}


async def contention(
    ask: Ask, hours: float = 24, group_by: str = "class", cluster: str | None = None
) -> dict[str, Any]:
    if group_by not in ("class", "namespace"):
        raise QuestionError("group_by must be 'class' or 'namespace'")
    start, end = _window(hours)
    data = await ask(
        CONTENTION, {"from": start, "to": end, "groupBy": group_by.upper(), "cluster": cluster}
    )
    rows = data["contention"]
    return {"from": start, "to": end, "rows": rows[:50], "total": len(rows)}
