"""The mirror's questions as tools a model can call: small, typed answers.

Every tool is `async (questions, **arguments) -> result` (`service.mcp.results`): it asks one
question of `service.questions` — answered from the store in the mirror's own process over
`/mcp`, or by a running mirror over `/graphql` for `dra-mirror mcp` on stdio — and keeps what an
agent needs to act, lists cut at `limit` with the full count beside them.

Errors (the server returns them as MCP tool errors, `isError`, with this message): an unknown
cluster (the known ones and the nearest named), a name that designates no device, a claim or
pod that is not there, a DeviceClass no cluster has, a selector that does not compile or fails
to evaluate on every device, YAML that is not YAML, history not configured — every
`QuestionError`. A free, a blocked, a held and an elsewhere-held device are answers, told apart
by `answer` and each device's `status`.

Promises: no tool writes anything; the same tool answers the same over HTTP and stdio.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from dra_mirror.service.questions.asking import QuestionError
from dra_mirror.service.questions.holdings import WhoHolds
from dra_mirror.service.questions.protocol import Questions

from . import results as r

MAX_LIMIT = 200


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


def _where(cluster: str | None) -> str:
    return f"cluster {cluster}" if cluster else "any cluster you may see"


def _answer(found: WhoHolds) -> r.Answer:
    if found.holdings:
        return "held"
    if found.withheld:
        return "held-elsewhere"
    states = {d.status for d in found.devices}
    if states == {"FREE"}:
        return "free"
    if states == {"BLOCKED"}:
        return "blocked"
    return "mixed"


async def who_holds(
    questions: Questions, device: str, cluster: str | None = None, limit: int = 20
) -> r.WhoHoldsResult:
    limit = _limit(limit)
    found = await questions.who_holds(device, cluster)
    if found.unknown:
        raise QuestionError(
            f"no device named {device!r} in {_where(cluster)} (give a uuid, node/device, "
            "driver/pool/device or a device name; free_devices lists free ones)"
        )
    holdings = [
        r.Holding(cluster=h.cluster, node=h.node, device=f"{h.driver}/{h.pool}/{h.device}",
                  uuid=h.uuid, model=h.model, claim=h.claim, origin=h.origin, state=h.state,
                  pods=h.pods, since=h.since, idle=h.idle, idle_since=h.idle_since,
                  request=h.request, share_id=h.share_id)
        for h in found.holdings
    ]  # fmt: skip
    devices = [
        r.NamedDevice(cluster=d.cluster, node=d.node, device=f"{d.driver}/{d.pool}/{d.device}",
                      uuid=d.uuid, model=d.model, status=d.status,  # type: ignore[arg-type]
                      held_elsewhere=d.withheld)
        for d in found.devices
    ]  # fmt: skip
    return r.WhoHoldsResult(answer=_answer(found), devices_named=len(devices),
                            devices=devices[:limit], holdings=holdings[:limit],
                            total=len(holdings))  # fmt: skip


async def free_devices(
    questions: Questions,
    selector: str | None = None,
    device_class: str | None = None,
    cluster: str | None = None,
    limit: int = 20,
) -> r.FreeDevicesResult:
    found = await questions.free(device_class, cluster, selector=selector, limit=_limit(limit))
    devices = [
        r.FreeDevice(cluster=d.cluster, node=d.node, device=f"{d.driver}/{d.pool}/{d.device}",
                     uuid=d.uuid, model=d.model, taints=d.taints, partitions=d.partitions)
        for d in found.devices
    ]  # fmt: skip
    return r.FreeDevicesResult(
        total=found.total, partitions=found.partitions, selector=selector,
        device_class=device_class, evaluation_error_count=found.evaluation_error_count,
        evaluation_errors=found.evaluation_errors, devices=devices,
    )  # fmt: skip


def _claims(found: object) -> r.ClaimsResult:
    rows = [r.ListedClaim(**dataclasses.asdict(c)) for c in found.claims]  # type: ignore[attr-defined]
    return r.ClaimsResult(total=found.total, claims=rows)  # type: ignore[attr-defined]


async def waiting_claims(
    questions: Questions,
    device_class: str | None = None,
    cluster: str | None = None,
    limit: int = 20,
) -> r.ClaimsResult:
    return _claims(await questions.waiting(device_class, cluster, limit=_limit(limit)))


async def idle_claims(
    questions: Questions, cluster: str | None = None, limit: int = 20
) -> r.ClaimsResult:
    return _claims(await questions.idle(cluster, limit=_limit(limit)))


async def capacity(questions: Questions, cluster: str | None = None) -> r.CapacityResult:
    rows = await questions.capacity(cluster)
    return r.CapacityResult(rows=[r.CapacityRow(**dataclasses.asdict(x)) for x in rows])


async def fragmentation(
    questions: Questions,
    cluster: str | None = None,
    node: str | None = None,
    device_class: str | None = None,
) -> r.FragmentationResult:
    rows = await questions.fragmentation(cluster, node=node, class_name=device_class)
    fields = r.FragmentationRow.model_fields
    return r.FragmentationResult(
        rows=[r.FragmentationRow(**{k: v for k, v in vars(x).items() if k in fields}) for x in rows]
    )


async def pod_devices(
    questions: Questions, namespace: str, pod: str, cluster: str | None = None
) -> r.PodDevicesResult:
    found = await questions.pod_devices(namespace, pod, cluster)
    if not found:
        raise QuestionError(f"no pod {namespace}/{pod} in {_where(cluster)}")
    return r.PodDevicesResult(
        pods=[
            r.PodDevicesEntry(
                cluster=p.cluster, pod=f"{p.namespace}/{p.pod}", phase=p.phase, node=p.node,
                claims=p.claims, pending=p.pending, missing=p.missing,
                devices=[
                    r.PodDevice(claim=d.claim, request=d.request,
                                device=f"{d.driver}/{d.pool}/{d.device}", node=d.node,
                                uuid=d.uuid, model=d.model, status=d.status,  # type: ignore[arg-type]
                                share_id=d.share_id)
                    for d in p.devices
                ],
            )
            for p in found
        ]
    )  # fmt: skip


def _verdict(value: str) -> str:
    return value.lower().replace("_", "-")


async def why_pending(
    questions: Questions, namespace: str, claim: str, cluster: str | None = None
) -> r.WhyPendingResult:
    found = await questions.explain(namespace, claim, cluster)
    if not found:
        raise QuestionError(f"no claim {namespace}/{claim} in {_where(cluster)}")
    return r.WhyPendingResult(
        diagnoses=[
            r.Diagnosis(
                cluster=d["cluster"], claim=f"{d['namespace']}/{d['name']}", state=d["state"],
                verdict=_verdict(d["verdict"]), message=d["message"],
                requests=[{"request": q["request"], "class": q["deviceClassName"],
                           "verdict": _verdict(q["verdict"]), "classDevices": q["classDevices"],
                           "freeOrShareable": q["freeOrShareable"], "needed": q["needed"]}
                          for q in d["requests"]],
                holders=[{"claim": f"{h['claim']['namespace']}/{h['claim']['name']}",
                          "idle": h["idle"], "idleSince": h["idleSince"]}
                         for h in d["holders"][:20]],
                holders_total=d["holdersTotal"],
                # holders in namespaces outside the caller's scope: counted, never named
                holders_hidden=d.get("holdersHidden", 0),
            )
            for d in found
        ]
    )  # fmt: skip


async def plan(questions: Questions, manifests: str, cluster: str | None = None) -> r.PlanResult:
    answer = await questions.plan(manifests, cluster)
    clusters = []
    for c in answer["clusters"]:
        items = []
        for i in c["items"]:
            entry: dict[str, object] = {
                "pod": f"{i['namespace']}/{i['name']}" if i["kind"] == "Pod" else i["workload"],
                "replica": i["replica"], "placeable": i["placeable"],
                "verdict": _verdict(i["verdict"]), "message": i["message"],
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
    return r.PlanResult(clusters=clusters, skipped=answer["skipped"])


async def lint(
    questions: Questions, cluster: str | None = None, manifests: str | None = None
) -> r.LintResult:
    if manifests is not None:
        found = await questions.lint_manifests(manifests, cluster)
    elif cluster is not None:
        found = await questions.lint(cluster)
    else:
        raise QuestionError("give a cluster to check, or manifests (with a cluster or not)")
    findings = [r.Finding(**f) for f in found]
    return r.LintResult(findings=findings, errors=sum(f.severity == "ERROR" for f in findings))


async def device_history(
    questions: Questions, device: str, hours: float = 24, cluster: str | None = None
) -> r.DeviceHistoryResult:
    start, end = _window(hours)
    timelines = await questions.device_history(device, start, end, cluster)
    holders = [a for t in timelines for a in t["allocations"]]
    return r.DeviceHistoryResult(since=start, until=end, uuids=[t["uuid"] for t in timelines],
                                 holders=holders[:50], total=len(holders))  # fmt: skip


async def claim_history(
    questions: Questions, namespace: str, claim: str, cluster: str
) -> r.ClaimHistoryResult:
    lives = await questions.claim_history(cluster, namespace, claim)
    return r.ClaimHistoryResult(lives=lives[:5], total=len(lives))


async def contention(
    questions: Questions, hours: float = 24, group_by: str = "class", cluster: str | None = None
) -> r.ContentionResult:
    if group_by not in ("class", "namespace"):
        raise QuestionError("group_by must be 'class' or 'namespace'")
    start, end = _window(hours)
    rows = await questions.contention(start, end, group_by.upper(), cluster)
    return r.ContentionResult(since=start, until=end, rows=rows[:50], total=len(rows))
