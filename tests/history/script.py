"""A hand-written history of one cluster, and its truth written down independently.

Cluster `east`, driver `gpu.nvidia.com`, one pool per node, minutes after T0. Devices:
n1/gpu-0 = GPU-A; n1/gpu-1 = GPU-B, renumbered n1/gpu-5 at 70; n2/gpu-0 = GPU-C, its
attributes change at 80 and it disappears at 150. Claims (all class h200):

    claim ns      waits            allocated            consumers           idle
    A     team-a  [0,10)           GPU-A [10,90)        pa [12,60)          [10,12) [60,90)
    B     team-b  [5,30)           GPU-B [30,120)       pb [30,120)         -
    C     team-a  [20,50) deleted  -                    -                   -
    D     team-b  [95,100)         GPU-A [100,open)     pd [100,160)        [160,open)
    E     team-a  [35,40)          GPU-C [40,140)       pe [40,140)         -

`TRUTH_*` below repeat those facts as plain tuples; the tests compute expected audit numbers
from them with a naive minute-by-minute count, never from the event script.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec

from dra_mirror.service.model.changes import Changes, Transition
from dra_mirror.service.model.records import ClaimRecord, Meta

CLUSTER = "east"
DRIVER = "gpu.nvidia.com"
T0 = datetime(2026, 3, 2, tzinfo=UTC)
END = 180  # the audit window is [0, 180) minutes


def at(minute: float) -> str:
    return (T0 + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")


CLAIMS = {  # name -> (namespace, uid)
    "A": ("team-a", "uid-a"),
    "B": ("team-b", "uid-b"),
    "C": ("team-a", "uid-c"),
    "D": ("team-b", "uid-d"),
    "E": ("team-a", "uid-e"),
}
DEVICES = {  # uuid -> node, name at the start
    "GPU-A": ("n1", "gpu-0"),
    "GPU-B": ("n1", "gpu-1"),
    "GPU-C": ("n2", "gpu-0"),
}


def _claim(kind: str, name: str, minute: float, **extra) -> Transition:
    namespace, uid = CLAIMS[name]
    return Transition(kind, CLUSTER, at(minute), namespace=namespace, claim=name, claim_uid=uid,
                      class_names=("h200",), **extra)  # fmt: skip


def _device(kind: str, node: str, device: str, uuid: str, minute: float, **data) -> Transition:
    return Transition(kind, CLUSTER, at(minute), driver=DRIVER, pool=node, device=device,
                      uuid=uuid, node=node, data=data or {"model": "H200"})  # fmt: skip


def _held(kind: str, name: str, uuid: str, minute: float, device: str | None = None):
    node, default_name = DEVICES[uuid]
    return _claim(kind, name, minute, driver=DRIVER, pool=node, device=device or default_name,
                  uuid=uuid, node=node, request="gpu")  # fmt: skip


def _pod(kind: str, name: str, pod: str, minute: float) -> Transition:
    return _claim(kind, name, minute, pod=pod, pod_uid=f"uid-{pod}")


def transitions() -> list[tuple[float, Transition]]:
    events = [
        (0, _device("device_appeared", "n1", "gpu-0", "GPU-A", 0)),
        (0, _device("device_appeared", "n1", "gpu-1", "GPU-B", 0)),
        (0, _device("device_appeared", "n2", "gpu-0", "GPU-C", 0)),
        (0, _claim("claim_created", "A", 0)),
        (0, _claim("wait_started", "A", 0)),
        (5, _claim("claim_created", "B", 5)),
        (5, _claim("wait_started", "B", 5)),
        (10, _claim("wait_ended", "A", 10, reason="allocated")),
        (10, _held("allocated", "A", "GPU-A", 10)),
        (10, _claim("idle_started", "A", 10)),
        (12, _pod("consumer_added", "A", "pa", 12)),
        (12, _claim("idle_ended", "A", 12)),
        (20, _claim("claim_created", "C", 20)),
        (20, _claim("wait_started", "C", 20)),
        (30, _claim("wait_ended", "B", 30, reason="allocated")),
        (30, _held("allocated", "B", "GPU-B", 30)),
        (30, _pod("consumer_added", "B", "pb", 30)),
        (35, _claim("claim_created", "E", 35)),
        (35, _claim("wait_started", "E", 35)),
        (40, _claim("wait_ended", "E", 40, reason="allocated")),
        (40, _held("allocated", "E", "GPU-C", 40)),
        (40, _pod("consumer_added", "E", "pe", 40)),
        (50, _claim("wait_ended", "C", 50, reason="deleted")),
        (50, _claim("claim_deleted", "C", 50)),
        (60, _pod("consumer_removed", "A", "pa", 60)),
        (60, _claim("idle_started", "A", 60)),
        (70, _device("device_disappeared", "n1", "gpu-1", "GPU-B", 70)),
        (70, _device("device_appeared", "n1", "gpu-5", "GPU-B", 70)),
        (80, _device("device_changed", "n2", "gpu-0", "GPU-C", 80, model="H200", driver="580")),
        (90, _held("released", "A", "GPU-A", 90)),
        (90, _claim("idle_ended", "A", 90)),
        (90, _claim("claim_deleted", "A", 90)),
        (95, _claim("claim_created", "D", 95)),
        (95, _claim("wait_started", "D", 95)),
        (100, _claim("wait_ended", "D", 100, reason="allocated")),
        (100, _held("allocated", "D", "GPU-A", 100)),
        (100, _pod("consumer_added", "D", "pd", 100)),
        (120, _held("released", "B", "GPU-B", 120)),
        (120, _pod("consumer_removed", "B", "pb", 120)),
        (120, _claim("claim_deleted", "B", 120)),
        (140, _held("released", "E", "GPU-C", 140)),
        (140, _pod("consumer_removed", "E", "pe", 140)),
        (140, _claim("claim_deleted", "E", 140)),
        (150, _device("device_disappeared", "n2", "gpu-0", "GPU-C", 150)),
        (160, _pod("consumer_removed", "D", "pd", 160)),
        (160, _claim("idle_started", "D", 160)),
    ]
    return events


def claim_record(name: str, minute: float, version: int) -> ClaimRecord:
    namespace, uid = CLAIMS[name]
    meta = Meta(cluster=CLUSTER, name=name, namespace=namespace, uid=uid,
                resource_version=str(1000 + version), created_at=at(0))  # fmt: skip
    return ClaimRecord(meta=meta)


def batches() -> list[Changes]:
    """One Changes per minute with transitions, claim A's versions as upserts/deletes."""
    by_minute: dict[float, list[Transition]] = {}
    for minute, transition in transitions():
        by_minute.setdefault(minute, []).append(transition)
    versions = {0: 1, 10: 2, 12: 3, 60: 4}
    out = []
    for minute in sorted(by_minute):
        changes = Changes(CLUSTER, at(minute), transitions=by_minute[minute],
                          resource_version=str(2000 + int(minute)))  # fmt: skip
        if minute in versions:
            changes.upserts.append(claim_record("A", minute, versions[minute]))
        if minute == 90:
            changes.deletes.append(claim_record("A", minute, 4))
        out.append(changes)
    return out


# --- the truth, written down from the table in the docstring ---------------------------------

OPEN = None  # still open at the end of the script

# (claim, namespace, uuid, node, start, end)
TRUTH_ALLOCATIONS = [
    ("A", "team-a", "GPU-A", "n1", 10, 90),
    ("B", "team-b", "GPU-B", "n1", 30, 120),
    ("D", "team-b", "GPU-A", "n1", 100, OPEN),
    ("E", "team-a", "GPU-C", "n2", 40, 140),
]
# (claim, start, end)
TRUTH_IDLE = [("A", 10, 12), ("A", 60, 90), ("D", 160, OPEN)]
# (claim, namespace, start, end)
# (claim, namespace, start, end, outcome): served (allocated) or abandoned (deleted)
TRUTH_WAITS = [
    ("A", "team-a", 0, 10, "served"),
    ("B", "team-b", 5, 30, "served"),
    ("C", "team-a", 20, 50, "abandoned"),
    ("D", "team-b", 95, 100, "served"),
    ("E", "team-a", 35, 40, "served"),
]
# (claim, pod, start, end)
TRUTH_CONSUMERS = [
    ("A", "pa", 12, 60),
    ("B", "pb", 30, 120),
    ("D", "pd", 100, 160),
    ("E", "pe", 40, 140),
]
# (uuid, node, name, start, end)
TRUTH_INVENTORY = [
    ("GPU-A", "n1", "gpu-0", 0, OPEN),
    ("GPU-B", "n1", "gpu-1", 0, 70),
    ("GPU-B", "n1", "gpu-5", 70, OPEN),
    ("GPU-C", "n2", "gpu-0", 0, 80),
    ("GPU-C", "n2", "gpu-0", 80, 150),
]


def moved(changes: list[Changes], *, cluster: str, days: float) -> list[Changes]:
    """The same history for another cluster, `days` later: every instant shifted, every
    cluster field renamed (claim and pod uids stay: they are unique per cluster)."""
    delta = timedelta(days=days)

    def later(text: str) -> str:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00")) + delta
        return moment.isoformat().replace("+00:00", "Z")

    def record(r):
        return msgspec.structs.replace(r, meta=msgspec.structs.replace(r.meta, cluster=cluster))

    return [
        Changes(
            cluster,
            later(c.at),
            upserts=[record(r) for r in c.upserts],
            deletes=[record(r) for r in c.deletes],
            transitions=[msgspec.structs.replace(t, cluster=cluster, at=later(t.at))
                         for t in c.transitions],
            resource_version=c.resource_version,
        )
        for c in changes
    ]  # fmt: skip
