"""`who-holds`: the claims holding the devices a person names, as rows.

`ask_who_holds` sends the graph's `whoHolds` (a uuid, `node/device`, `driver/pool/device` or a
bare name; the graph answers it with `service.questions.holders`) and turns each holding into a `HoldingRow`: the device (name,
uuid, model), its cluster and node, the claim (namespace/name, origin, state), the consumer
pods, since when it is held and whether it is idle. When the API server gives no
allocationTimestamp, "since" is read from history (`whoHeld` at this instant) if the server has
history. In chat only a list of candidates is shown for an ambiguous name, so the candidates
can be asked first in a light document (`brief_when_ambiguous`). Holders in namespaces the
asker may not see are not shown, but counted (`withheld`): a device held only there is "held in
another namespace", never "free".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .asking import Ask, QuestionError
from .chatops import model_of

WHO_HOLDS = """query WhoHolds($device: String!, $cluster: String) {
  whoHolds(device: $device, cluster: $cluster) {
    cluster request shareID since
    device { driver pool name uuid nodeName attributes }
    claim { namespace name origin state idle idleSince }
    pods { namespace name phase }
  }
}"""

# What an ambiguous answer lists; a bare name on a 5,000-node cluster matches 5,000 held
# devices, and the full document above costs ~4 s for them, this one ~1 s.
WHO_HOLDS_BRIEF = """query WhoHoldsBrief($device: String!, $cluster: String) {
  whoHolds(device: $device, cluster: $cluster) {
    cluster shareID device { driver pool name uuid nodeName } claim { namespace name }
  }
}"""

# Devices the asker sees (their cluster is in scope) may be held by claims it may not see:
# whoHolds leaves those out, the devices themselves count them.
HELD_ELSEWHERE = """query HeldElsewhere($device: String!, $cluster: String) {
  devicesNamed(device: $device, cluster: $cluster) {
    cluster driver pool name uuid nodeName withheldAllocations
  }
}"""

HELD_SINCE = """query HeldSince($device: String!, $cluster: String, $at: DateTime!) {
  whoHeld(device: $device, at: $at, cluster: $cluster) {
    cluster driver pool device namespace claim since
  }
}"""


@dataclass
class HoldingRow:
    """One claim holding one device (a share of it, for a shared device)."""

    cluster: str
    node: str | None
    device: str
    driver: str
    pool: str
    uuid: str | None
    model: str | None
    claim: str  # namespace/name
    origin: str  # TEMPLATE, EXTENDED_RESOURCE or MANUAL
    state: str
    pods: list[str]  # namespace/name (phase) of the consumer pods
    since: str | None  # allocated at (API server), else when history saw it allocated
    idle: bool
    idle_since: str | None
    share_id: str | None = None

    @property
    def device_ref(self) -> tuple[str, str, str, str]:
        return (self.cluster, self.driver, self.pool, self.device)


@dataclass
class WithheldRow:
    """A device held (also) by claims in namespaces the asker may not see."""

    cluster: str
    node: str | None
    device: str
    driver: str
    pool: str
    uuid: str | None
    allocations: int  # allocation results of claims outside the asker's scope

    @property
    def device_ref(self) -> tuple[str, str, str, str]:
        return (self.cluster, self.driver, self.pool, self.device)


@dataclass
class WhoHolds:
    spec: str
    cluster: str | None
    holdings: list[HoldingRow]
    detailed: bool = True  # False: an ambiguous answer with only device, cluster and claim
    withheld: list[WithheldRow] = field(default_factory=list)  # held in other namespaces

    @property
    def held_elsewhere(self) -> int:
        """Allocations of the named devices the asker may not see."""
        return sum(w.allocations for w in self.withheld)

    @property
    def devices(self) -> list[tuple[str, str, str, str]]:
        return list(dict.fromkeys(h.device_ref for h in self.holdings))

    @property
    def ambiguous(self) -> bool:
        return len(self.devices) > 1


async def ask_who_holds(
    ask: Ask,
    spec: str,
    cluster: str | None = None,
    *,
    history: bool = True,
    brief_when_ambiguous: bool = False,
) -> WhoHolds:
    """The holders of the devices `spec` names; `history=False` when the server is known to
    have no history (then `since` is only what the API server says).

    `brief_when_ambiguous` (chat, where only a list of candidates is shown): ask for the
    candidates first, in a light document, and for the details only when one device matched."""
    wanted, where = spec, cluster
    if brief_when_ambiguous:
        data = await ask(WHO_HOLDS_BRIEF, {"device": spec, "cluster": cluster})
        held = [_brief_row(h) for h in data["whoHolds"] if h["claim"] is not None]
        brief = WhoHolds(spec, cluster, held, detailed=False)
        if brief.ambiguous:
            return brief
        if not brief.holdings:
            brief.withheld = await _held_elsewhere(ask, spec, cluster)
            return brief
        where, driver, pool, device = brief.devices[0]
        wanted = f"{driver}/{pool}/{device}"  # exactly the one device, whatever `spec` was
    data = await ask(WHO_HOLDS, {"device": wanted, "cluster": where})
    rows = [_row(h) for h in data["whoHolds"] if h["claim"] is not None]  # null: gone since
    if history and any(r.since is None for r in rows):
        await _since_from_history(ask, wanted, where, rows)
    answer = WhoHolds(spec=spec, cluster=cluster, holdings=rows)
    if len(answer.devices) <= 1:  # one device (or none): say what the asker may not see of it
        answer.withheld = await _held_elsewhere(ask, wanted, where)
    return answer


async def _held_elsewhere(ask: Ask, spec: str, cluster: str | None) -> list[WithheldRow]:
    data = await ask(HELD_ELSEWHERE, {"device": spec, "cluster": cluster})
    return [
        WithheldRow(cluster=d["cluster"], node=d["nodeName"], device=d["name"],
                    driver=d["driver"], pool=d["pool"], uuid=d["uuid"],
                    allocations=d["withheldAllocations"])
        for d in data["devicesNamed"]
        if d["withheldAllocations"]
    ]  # fmt: skip


def _brief_row(h: Mapping[str, Any]) -> HoldingRow:
    d, c = h["device"], h["claim"]
    return HoldingRow(
        cluster=h["cluster"], node=d["nodeName"], device=d["name"], driver=d["driver"],
        pool=d["pool"], uuid=d["uuid"], model=None, claim=f"{c['namespace']}/{c['name']}",
        origin="", state="", pods=[], since=None, idle=False, idle_since=None,
        share_id=h["shareID"],
    )  # fmt: skip


def _row(h: Mapping[str, Any]) -> HoldingRow:
    d, c = h["device"], h["claim"]
    return HoldingRow(
        cluster=h["cluster"],
        node=d["nodeName"],
        device=d["name"],
        driver=d["driver"],
        pool=d["pool"],
        uuid=d["uuid"],
        model=model_of(d["attributes"]),
        claim=f"{c['namespace']}/{c['name']}",
        origin=c["origin"],
        state=c["state"],
        pods=[f"{p['namespace']}/{p['name']} ({p['phase']})" for p in h["pods"]],
        since=h["since"],
        idle=c["idle"],
        idle_since=c["idleSince"],
        share_id=h["shareID"],
    )


async def _since_from_history(
    ask: Ask, spec: str, cluster: str | None, rows: list[HoldingRow]
) -> None:
    """Fill `since` from history where the API server gave no allocationTimestamp (before
    Kubernetes 1.34 it never does). No history configured: `since` stays unknown."""
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        data = await ask(HELD_SINCE, {"device": spec, "cluster": cluster, "at": at})
    except QuestionError:
        return
    seen = {
        (a["cluster"], a["driver"], a["pool"], a["device"], f"{a['namespace']}/{a['claim']}"): a[
            "since"
        ]
        for a in data.get("whoHeld") or []
    }
    for row in rows:
        if row.since is None:
            row.since = seen.get((*row.device_ref, row.claim))


DEVICES_NAMED = """query DevicesNamed($device: String!, $cluster: String) {
  devicesNamed(device: $device, cluster: $cluster) { name }
}"""


async def ask_device_exists(ask: Ask, spec: str, cluster: str | None = None) -> bool:
    """Whether `spec` names any device at all, held or free: what an answer without holdings
    asks next, so it can say "free" or "no such device". Looked up by key, as whoHolds
    resolves it (uuid, node/device, driver/pool/device, name: `service.questions.holders`),
    never by paging through the devices."""
    data = await ask(DEVICES_NAMED, {"device": spec, "cluster": cluster})
    return bool(data["devicesNamed"])
