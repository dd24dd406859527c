"""What a claim's consumer pod is doing: running, starting, or nothing — so starting is not idle.

Rules (a consumer is a pod a claim's `status.reservedFor` names; service.model.consumers):

* **running**: the pod's phase is Running;
* **starting**: the pod is scheduled (`nodeName` set) and still Pending — pulling its image,
  running its init containers, waiting for its devices to be prepared — for at most the idle
  grace (`DRA_MIRROR_CLUSTERS_IDLE_GRACE`, 600 s by default) counted from when it started
  (`status.startTime`, else its creation);
* otherwise it is doing nothing: gone, not scheduled, Succeeded, Failed, or starting for
  longer than the grace.

A claim is idle-held while it is allocated and none of its consumers is running or starting:
idle-held time begins when the last consumer ends, or when the start grace of a pod that never
came up runs out. The grace runs out without an event, so the index is ticked
(`ClusterIndex.tick`) and re-evaluates the claims whose grace has passed; the idle spell then
starts at the tick (within one tick interval of the grace's end).

Pure: times are RFC 3339 strings; a time that does not parse (a test's "t1") never ends a
grace.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dra_mirror.service.model.records import PodRecord

RUNNING = "Running"
PENDING = "Pending"
DEFAULT_GRACE = 600.0  # seconds


def seconds(at: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (None: absent or not a time)."""
    if not at:
        return None
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def grace_ends(pod: PodRecord, grace: float) -> float | None:
    """When a starting pod's grace ends, in seconds since the epoch (None: it is not starting,
    or its start is unknown: then it counts as starting for as long as it stays Pending)."""
    if pod.phase != PENDING or not pod.node_name:
        return None
    start = seconds(pod.started_at) or seconds(pod.meta.created_at)
    return None if start is None else start + grace


def activity(pod: PodRecord, grace: float, now: str) -> tuple[bool, float | None]:
    """(whether the consumer pod keeps its claim from being idle, when that changes without an
    event: the end of its start grace, None when no time will change it)."""
    if pod.phase == RUNNING:
        return True, None
    if pod.phase != PENDING or not pod.node_name:
        return False, None
    ends = grace_ends(pod, grace)
    if ends is None:
        return True, None
    current = seconds(now)
    if current is not None and current >= ends:
        return False, None
    return True, ends
