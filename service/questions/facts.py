"""The diagnostics' answers as plain facts: the shape the graph gives them, as JSON values.

`explain`, `plan` and `lint` answer with the pure results of `service.diagnostics`; every
front end shows them from these facts, whether they came from this process or from a mirror
over `/graphql` (the graph's `explainClaim`, `plan`, `lint` selecting the same fields):

* `diagnosis_facts(d)` — `ClaimDiagnosis` with `DIAGNOSIS_FIELDS`;
* `plan_facts(answer)` — `Plan` with `PLAN_FIELDS`;
* `finding_facts(f)` — `LintFinding` with `FINDING_FIELDS`.

Names are the graph's (camelCase); verdicts and severities are the graph's enum names
(`all-held` → `ALL_HELD`, `error` → `ERROR`); claim states stay as the graph gives them.
The contract test (`tests/contract`) holds these to the graph's own answers.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.diagnostics.explain import Diagnosis, Holder
from dra_mirror.service.diagnostics.lint import Finding
from dra_mirror.service.diagnostics.plan_results import ClusterPlan, ItemPlan
from dra_mirror.service.diagnostics.verdicts import RequestVerdict
from dra_mirror.service.model.records import ObjectKey

__all__ = [
    "DIAGNOSIS_FIELDS",
    "FINDING_FIELDS",
    "PLAN_FIELDS",
    "diagnosis_facts",
    "finding_facts",
    "plan_facts",
    "plan_summary",
]

Facts = dict[str, Any]

FINDING_FIELDS = "rule severity object path message"

DIAGNOSIS_FIELDS = """cluster namespace name state verdict message holdersTotal holdersHidden
  nodesWithoutDriver
  pods { namespace name }
  ahead { namespace name }
  requests { request deviceClassName classExists classDevices freeOrShareable nodes needed
             verdict summary selectors { expression passing rejected }
             selectorErrors { expression message } heldBy { namespace name } }
  holders { claim { namespace name } pods { namespace name } running idle idleSince }
  checks { name ok detail }"""

PLAN_ITEM_FIELDS = """kind workload namespace name replica placeable verdict message node
      blockingClaim holdersHidden freedHidden
      claims { podClaim name template shared allocatedBefore node
               devices { request driver pool device shareID consumedCapacity } }
      requests { request deviceClassName classExists classDevices freeOrShareable nodes needed
                 verdict summary selectors { expression passing rejected }
                 selectorErrors { expression message } heldBy { namespace name } }
      holders { claim { namespace name } pods { namespace name } running idle idleSince }
      freedBy { namespace name }"""

PLAN_FIELDS = f"""pods skipped
    clusters {{ cluster placeable summary
      items {{ {PLAN_ITEM_FIELDS} }}
      findings {{ {FINDING_FIELDS} }} }}"""


def enum_name(value: str) -> str:
    return value.upper().replace("-", "_")


def _ref(key: ObjectKey) -> Facts:
    return {"namespace": key.namespace, "name": key.name}


def selector_counts(v: RequestVerdict) -> list[tuple[str, int, int]]:
    """(expression, devices left after it, devices it turned away) per request selector."""
    out, before = [], v.class_matched
    for expression, passing in v.selector_matches:
        out.append((expression, passing, before - passing))
        before = passing
    return out


def request_facts(v: RequestVerdict) -> Facts:
    selectors = [{"expression": e, "passing": p, "rejected": r} for e, p, r in selector_counts(v)]
    return {
        "request": v.request, "deviceClassName": v.class_name, "classExists": v.class_exists,
        "classDevices": v.class_matched, "freeOrShareable": v.free_or_shareable,
        "nodes": list(v.nodes), "needed": v.needed, "verdict": enum_name(v.verdict),
        "summary": v.summary(), "selectors": selectors,
        "selectorErrors": [{"expression": e, "message": m} for e, m in v.selector_errors],
        "heldBy": [_ref(k) for k in v.held_by],
    }  # fmt: skip


def holder_facts(h: Holder) -> Facts:
    return {
        "claim": _ref(h.claim), "pods": [_ref(k) for k in h.pods], "running": h.running,
        "idle": h.idle, "idleSince": h.idle_since or None,
    }  # fmt: skip


def diagnosis_facts(d: Diagnosis) -> Facts:
    return {
        "cluster": d.claim.cluster, "namespace": d.claim.namespace, "name": d.claim.name,
        "state": d.state, "verdict": enum_name(d.verdict), "message": d.message,
        "holdersTotal": d.holders_total, "holdersHidden": d.holders_hidden,
        "nodesWithoutDriver": list(d.nodes_without_driver),
        "pods": [_ref(k) for k in d.pods],
        "ahead": [_ref(k) for k in d.ahead],
        "requests": [request_facts(v) for v in d.requests],
        "holders": [holder_facts(h) for h in d.holders],
        "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in d.checks],
    }  # fmt: skip


def finding_facts(f: Finding) -> Facts:
    return {"rule": f.rule, "severity": f.severity.upper(), "object": f.object, "path": f.path,
            "message": f.message}  # fmt: skip


def _item_facts(i: ItemPlan) -> Facts:
    return {
        "kind": i.kind, "workload": i.workload, "namespace": i.namespace, "name": i.name,
        "replica": i.replica, "placeable": i.placeable, "verdict": enum_name(i.verdict),
        "message": i.message, "node": i.node, "blockingClaim": i.blocking_claim,
        "holdersHidden": i.holders_hidden, "freedHidden": i.freed_hidden,
        "claims": [
            {"podClaim": o.claim.pod_claim, "name": o.claim.name, "template": o.claim.template,
             "shared": o.claim.shared, "allocatedBefore": o.allocated_before, "node": o.node,
             "devices": [
                 {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device,
                  "shareID": r.share_id,
                  "consumedCapacity": dict(r.consumed_capacity) if r.consumed_capacity else None}
                 for r in o.results
             ]}
            for o in i.claims
        ],
        "requests": [request_facts(v) for v in i.requests],
        "holders": [holder_facts(h) for h in i.holders],
        "freedBy": [_ref(k) for k in i.freed_by],
    }  # fmt: skip


def plan_summary(plan: ClusterPlan) -> str:
    """ "3 of 3 placeable" and the like."""
    placed = sum(1 for i in plan.items if i.placeable)
    return f"{placed} of {len(plan.items)} placeable"


def plan_facts(answer: Any) -> Facts:
    """A `service.questions.plan.PlanAnswer` as the graph's `Plan`."""
    clusters = []
    for a in answer.clusters:
        clusters.append({
            "cluster": a.plan.cluster, "placeable": a.plan.placeable,
            "summary": plan_summary(a.plan),
            "items": [_item_facts(i) for i in a.plan.items],
            "findings": [finding_facts(f) for f in a.findings],
        })  # fmt: skip
    return {"pods": answer.pods, "skipped": list(answer.skipped), "clusters": clusters}
