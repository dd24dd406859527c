"""The history's answers as plain facts: the shape the graph's history fields give them.

`service.questions.history` answers with the history's spans (`service.history.spans`,
microseconds); every front end shows them from these facts, whether read in this process or
from a mirror over `/graphql` selecting the same fields:

* `timeline_facts(t)` — `DeviceTimeline` with `TIMELINE_FIELDS` (a device's versions as its
  driver published them, without their data, and its holders with their pods);
* `claim_life_facts(c)` — `ClaimHistory` with `CLAIM_LIFE_FIELDS` (without the versions);
* `contention_facts(r)` — `ContentionRow` with `CONTENTION_FIELDS`;
* `utilization_audit_facts(r)` — `UtilizationAuditRow` with `UTILIZATION_AUDIT_FIELDS`.

`DEVICE_HISTORY`, `CLAIM_HISTORY`, `CONTENTION` and `UTILIZATION_AUDIT` are the documents
asking the graph for these fields (`service.questions.remote`).

Times are RFC 3339 in UTC (`service.history.times.to_rfc3339`), as the graph's `DateTime`.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.history.times import to_rfc3339

__all__ = [
    "ALLOCATION_FIELDS",
    "CLAIM_HISTORY",
    "CLAIM_LIFE_FIELDS",
    "CONTENTION",
    "CONTENTION_FIELDS",
    "DEVICE_HISTORY",
    "TIMELINE_FIELDS",
    "UTILIZATION_AUDIT",
    "UTILIZATION_AUDIT_FIELDS",
    "allocation_facts",
    "claim_life_facts",
    "contention_facts",
    "timeline_facts",
    "utilization_audit_facts",
]

Facts = dict[str, Any]

ALLOCATION_FIELDS = """cluster driver pool device uuid node namespace claim claimUid request
      shareID consumedCapacity className since until endReason pods { name uid since until }"""

TIMELINE_FIELDS = f"""uuid
    inventory {{ cluster driver pool device uuid node since until endReason }}
    allocations {{ {ALLOCATION_FIELDS} }}"""

CLAIM_LIFE_FIELDS = f"""cluster namespace name uid
    waits {{ since until endReason classes }}
    allocations {{ {ALLOCATION_FIELDS} }}
    consumers {{ name uid since until }}
    idle {{ since until endReason classes }}"""

CONTENTION_FIELDS = """cluster group since until deviceHoursAvailable deviceHoursAllocated
    deviceHoursIdle utilization claimsWaited waitP50Seconds waitP95Seconds waitMaxSeconds
    peakPending claimsAbandoned gpuHoursAvailable gpuHoursAllocated gpuHoursIdle
    gpuUtilization"""

DEVICE_HISTORY = f"""query DeviceHistory($device: String!, $from: DateTime!, $to: DateTime!,
                                          $cluster: String) {{
  deviceHistory(device: $device, from: $from, to: $to, cluster: $cluster) {{ {TIMELINE_FIELDS} }}
}}"""

CLAIM_HISTORY = f"""query ClaimHistory($cluster: String!, $namespace: String!, $name: String!) {{
  claimHistory(cluster: $cluster, namespace: $namespace, name: $name) {{ {CLAIM_LIFE_FIELDS} }}
}}"""

CONTENTION = f"""query Contention($from: DateTime!, $to: DateTime!, $groupBy: ContentionGroup!,
                                   $cluster: String) {{
  contention(from: $from, to: $to, groupBy: $groupBy, cluster: $cluster) {{ {CONTENTION_FIELDS} }}
}}"""

UTILIZATION_AUDIT_FIELDS = """cluster group heldHours knownHours unknownHours busyHours
    busyPercent energyKwh"""
UTILIZATION_AUDIT = f"""query UtilizationAudit($from: DateTime!, $to: DateTime!,
                            $groupBy: UtilizationGroup!, $cluster: String) {{
  utilizationAudit(from: $from, to: $to, groupBy: $groupBy, cluster: $cluster) {{
    {UTILIZATION_AUDIT_FIELDS} }}
}}"""


def _time(us: int | None) -> str | None:
    return None if us is None else to_rfc3339(us)


def _pod(p: Any) -> Facts:
    return {"name": p.name, "uid": p.uid, "since": _time(p.start_us), "until": _time(p.end_us)}


def allocation_facts(a: Any) -> Facts:
    """An `AllocationSpan` as the graph's `HistoryAllocation`."""
    return {
        "cluster": a.cluster, "driver": a.driver, "pool": a.pool, "device": a.device,
        "uuid": a.uuid, "node": a.node, "namespace": a.namespace, "claim": a.claim,
        "claimUid": a.claim_uid, "request": a.request, "shareID": a.share_id,
        "consumedCapacity": dict(a.consumed_capacity), "className": a.class_name or None,
        "since": _time(a.start_us), "until": _time(a.end_us), "endReason": a.end_reason,
        "pods": [_pod(p) for p in a.pods],
    }  # fmt: skip


def timeline_facts(t: Any) -> Facts:
    """A `DeviceTimeline` as the graph's."""
    return {
        "uuid": t.uuid,
        "inventory": [
            {"cluster": i.cluster, "driver": i.driver, "pool": i.pool, "device": i.device,
             "uuid": i.uuid, "node": i.node, "since": _time(i.start_us),
             "until": _time(i.end_us), "endReason": i.end_reason}
            for i in t.inventory
        ],
        "allocations": [allocation_facts(a) for a in t.allocations],
    }  # fmt: skip


def _span(s: Any) -> Facts:
    classes = [x for x in (s.detail or "").split(",") if x]
    return {"since": _time(s.start_us), "until": _time(s.end_us), "endReason": s.end_reason,
            "classes": classes}  # fmt: skip


def claim_life_facts(c: Any) -> Facts:
    """A `ClaimIncarnation` as the graph's `ClaimHistory` (versions left out)."""
    return {
        "cluster": c.cluster, "namespace": c.namespace, "name": c.name, "uid": c.uid,
        "waits": [_span(w) for w in c.waits],
        "allocations": [allocation_facts(a) for a in c.allocations],
        "consumers": [_pod(p) for p in c.consumers],
        "idle": [{**_span(i), "classes": []} for i in c.idle],
    }  # fmt: skip


def contention_facts(r: Any) -> Facts:
    """A contention row as the graph's `ContentionRow`."""
    return {
        "cluster": r.cluster, "group": r.group, "since": _time(r.bucket_start_us),
        "until": _time(r.bucket_end_us), "deviceHoursAvailable": r.device_hours_available,
        "deviceHoursAllocated": r.device_hours_allocated,
        "deviceHoursIdle": r.device_hours_idle, "utilization": r.utilization,
        "claimsWaited": r.claims_waited, "waitP50Seconds": r.wait_p50,
        "waitP95Seconds": r.wait_p95, "waitMaxSeconds": r.wait_max,
        "peakPending": r.peak_pending, "claimsAbandoned": r.claims_abandoned,
        "gpuHoursAvailable": r.gpu_hours_available, "gpuHoursAllocated": r.gpu_hours_allocated,
        "gpuHoursIdle": r.gpu_hours_idle, "gpuUtilization": r.gpu_utilization,
    }  # fmt: skip


def utilization_audit_facts(r: Any) -> Facts:
    """A utilisation audit row as the graph's `UtilizationAuditRow`."""
    return {
        "cluster": r.cluster, "group": r.group, "heldHours": r.held_hours,
        "knownHours": r.known_hours, "unknownHours": r.unknown_hours,
        "busyHours": r.busy_hours, "busyPercent": r.busy_percent, "energyKwh": r.energy_kwh,
    }  # fmt: skip
