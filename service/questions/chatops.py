"""The questions on-call people ask (free, waiting, idle), as GraphQL documents and plain rows.

One place for every front end: the Slack endpoint runs these documents against the app's own
schema in-process, the `dra-mirror free|waiting|idle` commands send the same documents to a
running server's `/graphql`. Each `ask_*` takes an `Ask` (`service.questions.asking`: a document
and its variables in, the `data` out; a GraphQL error raises `QuestionError`) and returns a
dataclass of rows, which `service.slack.blocks` renders as Block Kit and `service.cli.client`
as a table or JSON (`dataclasses.asdict`). `duration` words a number of seconds the same way
for both.

`who-holds` lives in `service.questions.holdings`, `explain` in `service.questions.explain`.

Promises: no second query layer (every fact comes from the graph); rows are sorted so answers
are stable; long lists are cut at `limit` rows with the full count kept beside them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .asking import Ask, QuestionError

__all__ = [
    "Ask",
    "ClaimRow",
    "Claims",
    "DeviceRow",
    "Free",
    "QuestionError",
    "Scope",
    "ask_free",
    "ask_idle",
    "ask_waiting",
    "duration",
    "model_of",
    "read_scope",
]

PAGE = 500
MAX_PAGES = 20  # 10,000 claims: beyond that a chat answer is not the right tool

CLUSTERS_AND_CLASSES = "query Names { clusters { name } deviceClasses { name } }"

FREE = """query Free($cluster: String, $className: String, $first: Int) {
  devices(cluster: $cluster, className: $className, status: FREE, first: $first) {
    totalCount
    nodes { cluster driver pool name uuid nodeName attributes
            taintSources { key value effect rule unavailable } }
  }
}"""

CLAIM_FIELDS = """cluster namespace name origin createdAt pendingSeconds idleSince
      requests { deviceClassName count firstAvailable { deviceClassName count } }"""

PENDING = f"""query Waiting($cluster: String, $first: Int, $after: String) {{
  resourceClaims(cluster: $cluster, state: PENDING, first: $first, after: $after) {{
    totalCount pageInfo {{ hasNextPage endCursor }}
    nodes {{ {CLAIM_FIELDS} }}
  }}
}}"""

IDLE = f"""query Idle($cluster: String, $first: Int, $after: String) {{
  resourceClaims(cluster: $cluster, idle: true, first: $first, after: $after) {{
    totalCount pageInfo {{ hasNextPage endCursor }}
    nodes {{ {CLAIM_FIELDS}
      allocation {{ nodeName devices {{ device {{ driver pool name uuid attributes }} }} }}
      consumers {{ name phase }} }}
  }}
}}"""


def duration(seconds: float) -> str:
    """`59s`, `12m`, `5h 2m`, `3d 4h`: a wait or an age, to the two largest units."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m" if minutes else f"{seconds}s"


def model_of(attributes: Mapping[str, Any] | None) -> str | None:
    """The product name a driver publishes (`productName`, `model`...), qualified or not."""
    for wanted in ("productName", "model", "product"):
        for name, value in (attributes or {}).items():
            if name.rsplit("/", 1)[-1] == wanted and value not in (None, ""):
                return str(value)
    return None


@dataclass
class DeviceRow:
    cluster: str
    node: str | None
    device: str
    driver: str
    pool: str
    uuid: str | None
    model: str | None
    # Its NoSchedule/NoExecute taints (`key=value:Effect`, a rule's with its name): free, but
    # only for claims that tolerate them.
    taints: list[str] = field(default_factory=list)


@dataclass
class Free:
    class_name: str | None
    cluster: str | None
    total: int
    devices: list[DeviceRow]


@dataclass
class Scope:
    """`[class] [cluster]` as typed: a word naming a cluster is the cluster."""

    class_name: str | None = None
    cluster: str | None = None
    unknown: list[str] = field(default_factory=list)  # words naming neither


async def read_scope(ask: Ask, words: list[str]) -> Scope:
    """Which of `words` is a class and which a cluster (order free, at most one of each)."""
    scope = Scope()
    if not words:
        return scope
    data = await ask(CLUSTERS_AND_CLASSES, {})
    clusters = {c["name"] for c in data["clusters"]}
    classes = {c["name"] for c in data["deviceClasses"]}
    for word in words:
        if word in clusters and scope.cluster is None:
            scope.cluster = word
        elif word in classes and scope.class_name is None:
            scope.class_name = word
        else:
            scope.unknown.append(word)
    return scope


CLASS_NAMES = "query ClassNames($cluster: String) { deviceClasses(cluster: $cluster) { name } }"


async def ask_class_names(ask: Ask, cluster: str | None = None) -> list[str]:
    """The DeviceClass names (of `cluster`, or every cluster), sorted, once each."""
    data = await ask(CLASS_NAMES, {"cluster": cluster})
    return sorted({c["name"] for c in data["deviceClasses"]})


def _taint(t: dict[str, Any]) -> str:
    value = f"={t['value']}" if t["value"] else ""
    rule = f" (rule {t['rule']})" if t["rule"] else ""
    return f"{t['key']}{value}:{t['effect']}{rule}"


async def ask_free(
    ask: Ask, class_name: str | None = None, cluster: str | None = None, *, limit: int = 50
) -> Free:
    data = await ask(FREE, {"cluster": cluster, "className": class_name, "first": limit})
    page = data["devices"]
    rows = [
        DeviceRow(
            cluster=d["cluster"],
            node=d["nodeName"],
            device=d["name"],
            driver=d["driver"],
            pool=d["pool"],
            uuid=d["uuid"],
            model=model_of(d["attributes"]),
            taints=[_taint(t) for t in d["taintSources"] if t["unavailable"]],
        )
        for d in page["nodes"]
    ]
    return Free(class_name=class_name, cluster=cluster, total=page["totalCount"], devices=rows)


@dataclass
class ClaimRow:
    cluster: str
    claim: str  # namespace/name
    origin: str
    classes: list[str]
    created_at: str | None
    pending_seconds: float | None = None
    idle_since: str | None = None
    node: str | None = None
    devices: list[str] = field(default_factory=list)  # node/device (uuid)
    consumers: list[str] = field(default_factory=list)  # name (phase)
    waiting_for_class: int = 0  # pending claims asking for one of its classes (idle answers)


@dataclass
class Claims:
    """Pending (`waiting`) or idle claims; `total` counts all, `claims` may be cut."""

    cluster: str | None
    class_name: str | None
    total: int
    claims: list[ClaimRow]


def _classes(claim: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for r in claim["requests"]:
        found = [r["deviceClassName"]] + [s["deviceClassName"] for s in r["firstAvailable"]]
        names += [n for n in found if n and n not in names]
    return names


async def _all_claims(ask: Ask, document: str, cluster: str | None) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    after = None
    for _ in range(MAX_PAGES):
        data = await ask(document, {"cluster": cluster, "first": PAGE, "after": after})
        page = data["resourceClaims"]
        found += page["nodes"]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    return found


def _claim_row(c: Mapping[str, Any]) -> ClaimRow:
    return ClaimRow(
        cluster=c["cluster"],
        claim=f"{c['namespace']}/{c['name']}",
        origin=c["origin"],
        classes=_classes(c),
        created_at=c["createdAt"],
        pending_seconds=c["pendingSeconds"],
        idle_since=c["idleSince"],
    )


async def ask_waiting(
    ask: Ask, class_name: str | None = None, cluster: str | None = None, *, limit: int = 50
) -> Claims:
    """Pending claims, longest waiting first."""
    rows = [_claim_row(c) for c in await _all_claims(ask, PENDING, cluster)]
    if class_name:
        rows = [r for r in rows if class_name in r.classes]
    rows.sort(key=lambda r: (-(r.pending_seconds or 0.0), r.cluster, r.claim))
    return Claims(cluster=cluster, class_name=class_name, total=len(rows), claims=rows[:limit])


async def ask_idle(ask: Ask, cluster: str | None = None, *, limit: int = 50) -> Claims:
    """Idle holders, longest idle first; each says how many claims wait for its classes."""
    pending, idle = await asyncio.gather(
        _all_claims(ask, PENDING, cluster), _all_claims(ask, IDLE, cluster)
    )
    waiting: dict[tuple[str, str], int] = {}
    for c in pending:
        for name in _classes(c):
            waiting[(c["cluster"], name)] = waiting.get((c["cluster"], name), 0) + 1
    rows = []
    for c in idle:
        row = _claim_row(c)
        allocation = c["allocation"] or {}
        row.node = allocation.get("nodeName")
        row.devices = [
            a["device"]["name"] + (f" ({a['device']['uuid']})" if a["device"]["uuid"] else "")
            for a in allocation.get("devices") or []
        ]
        row.consumers = [f"{p['name']} ({p['phase']})" for p in c["consumers"]]
        row.waiting_for_class = sum(waiting.get((row.cluster, n), 0) for n in row.classes)
        rows.append(row)
    rows.sort(key=lambda r: (-r.waiting_for_class, r.idle_since or "", r.cluster, r.claim))
    return Claims(cluster=cluster, class_name=None, total=len(rows), claims=rows[:limit])
