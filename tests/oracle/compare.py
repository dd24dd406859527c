"""The graph's answers beside the oracle's: every disagreement as a `Mismatch`.

`mismatches(truth, answers, store)` reads the documents of `tests.oracle.documents` as a
dashboard would (enum values lowercased, quantities parsed, capacity names qualified with the
driver so that either spelling compares) and lists each field that differs from
`tests.oracle.truth.answer`. A failing document is itself a mismatch (its error messages are
the actual value). `live_mismatches` does the same for what a subscriber has seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.oracle import documents as q
from tests.oracle.reading import qualified, quantity
from tests.oracle.system import Answer, StoreAnswers
from tests.oracle.truth import Truth


@dataclass(frozen=True)
class Mismatch:
    store: str
    area: str  # what was compared, e.g. "device.status"
    key: str  # which object, e.g. "gpu.nvidia.com/n0/gpu-1"
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return f"[{self.store}] {self.area} {self.key}: expected {self.expected!r}, got {self.actual!r}"


def device_name(key: tuple[str, str, str]) -> str:
    return "/".join(key)


class _Diff:
    def __init__(self, store: str) -> None:
        self.store = store
        self.found: list[Mismatch] = []

    def check(self, area: str, key: str, expected: Any, actual: Any) -> None:
        if expected != actual:
            self.found.append(Mismatch(self.store, area, key, expected, actual))

    def data(self, answer: Answer, area: str, root: str) -> Any:
        """The root field's data, or None after noting the document's errors."""
        if answer.errors:
            self.found.append(Mismatch(self.store, area, "*", "an answer", answer.errors))
        value = (answer.data or {}).get(root)
        if isinstance(value, dict) and "nodes" in value:
            return value["nodes"]
        return value


def _remaining(device: dict[str, Any]) -> dict[str, Any]:
    return {
        qualified(c["name"], device["driver"]): quantity(c["value"])
        for c in device["remainingCapacity"]
    }


def _taints(device: dict[str, Any]) -> tuple:
    return tuple(
        sorted(
            (t.get("key") or "", t.get("value") or "", t.get("effect") or "")
            for t in device["taints"]
        )
    )


def _holders(allocations: list[dict[str, Any]], admin: bool = True) -> list[tuple]:
    return sorted(
        (a["claim"]["namespace"], a["claim"]["name"], a["request"], a["shareID"],
         *((bool(a["adminAccess"]),) if admin else ()))
        for a in allocations
    )  # fmt: skip


def mismatches(truth: Truth, answers: StoreAnswers, store: str) -> list[Mismatch]:
    diff = _Diff(store)
    docs = answers.by_document
    published = {k: d for k, d in truth.devices.items() if d.published}

    devices = diff.data(docs[q.DEVICES], "devices", "devices") or []
    seen = {(d["driver"], d["pool"], d["name"]): d for d in devices}
    diff.check(
        "devices.listed", "*", sorted(map(device_name, published)), sorted(map(device_name, seen))
    )
    for key in published.keys() & seen.keys():
        want, got, name = published[key], seen[key], device_name(key)
        diff.check("device.status", name, want.status, got["status"].lower())
        diff.check("device.uuid", name, want.uuid, got["uuid"])
        diff.check("device.node", name, want.node, got["nodeName"])
        diff.check("device.shareable", name, want.shareable, got["shareable"])
        diff.check("device.taints", name, want.taints, _taints(got))
        diff.check("device.holders", name, [(h.namespace, h.claim, h.request, h.share_id, h.admin_access) for h in want.holders], _holders(got["allocations"]))  # fmt: skip
        if want.remaining is not None:
            diff.check("device.remaining", name, want.remaining, _remaining(got))

    counts = diff.data(docs[q.COUNTS], "counts", "cluster") or {}
    diff.check("counts", "*", truth.counts, counts.get("counts"))

    slices = {s["name"]: s for s in diff.data(docs[q.SLICES], "slices", "resourceSlices") or []}
    for name, complete in truth.slice_complete.items():
        diff.check(
            "slice.complete",
            name,
            complete,
            (slices.get(name) or {}).get("pool", {}).get("complete"),
        )

    claims = {(c["namespace"], c["name"]): c for c in diff.data(docs[q.CLAIMS], "claims", "resourceClaims") or []}  # fmt: skip
    diff.check("claims.listed", "*", sorted(truth.claims), sorted(claims))
    for key in truth.claims.keys() & claims.keys():
        want, got, name = truth.claims[key], claims[key], "/".join(key)
        diff.check("claim.state", name, want.state, got["state"].lower())
        diff.check("claim.idle", name, want.idle, got["idle"])
        diff.check("claim.consumers", name, want.consumers, tuple(sorted(p["name"] for p in got["consumers"])))  # fmt: skip
        results = (got.get("allocation") or {}).get("devices") or []
        actual = sorted((r["request"], r["device"]["driver"], r["device"]["pool"], r["device"]["name"], r["shareID"]) for r in results)  # fmt: skip
        diff.check("claim.devices", name, list(want.devices), actual)

    followed = docs[q.CLAIM_SLICES]
    by_claim = {(c["namespace"], c["name"]): c for c in ((followed.data or {}).get("resourceClaims") or {}).get("nodes") or []}  # fmt: skip
    for key, want in truth.claims.items():
        if not want.devices:
            continue
        expected = sorted((d[1], d[2], d[3], truth.devices[d[1:4]].slice) for d in want.devices)
        got = (by_claim.get(key) or {}).get("allocation")
        actual = sorted((r["device"]["driver"], r["device"]["pool"], r["device"]["name"], (r["device"]["slice"] or {}).get("name")) for r in got["devices"]) if got else followed.errors or None  # fmt: skip
        diff.check("claim.slices", "/".join(key), expected, actual)

    pods = {(p["namespace"], p["name"]): p for p in diff.data(docs[q.PODS], "pods", "pods") or []}
    for key, want_devices in truth.pod_devices.items():
        got_devices = (pods.get(key) or {}).get("devices") or []
        diff.check("pod.devices", "/".join(key), [device_name(d) for d in want_devices], sorted(device_name((d["driver"], d["pool"], d["name"])) for d in got_devices))  # fmt: skip

    for name, answer in answers.holds.items():
        key = tuple(name.split("/", 2))
        want = truth.devices.get(key)  # type: ignore[arg-type]
        expected = sorted((h.namespace, h.claim, h.request, h.share_id) for h in want.holders) if want else []  # fmt: skip
        actual = _holders(answer.data["whoHolds"], admin=False) if answer.data and not answer.errors else answer.errors  # fmt: skip
        diff.check("whoHolds", name, expected, actual)

    listed = diff.data(docs[q.PUBLISHED], "device.published", "devices")
    if listed is not None:
        flags = {(d["driver"], d["pool"], d["name"]): d["published"] for d in listed}
        diff.check("device.published", "*", {device_name(k): True for k in published}, {device_name(k): v for k, v in flags.items()})  # fmt: skip
    for name, answer in answers.published.items():
        found = [h["device"] for h in (answer.data or {}).get("whoHolds") or []]
        flags = sorted({d["published"] for d in found if "/".join((d["driver"], d["pool"], d["name"])) == name})  # fmt: skip
        diff.check("device.published", name, [False], flags if not answer.errors else answer.errors)

    _pools(diff, truth, docs[q.POOLS])
    _pod_groups(diff, truth, docs[q.POD_GROUPS], docs[q.CLAIM_GROUPS])
    _carried(diff, truth, docs[q.CARRIED])
    return diff.found


def _carried(diff: _Diff, truth: Truth, answer: Answer) -> None:
    if answer.errors:
        diff.found.append(Mismatch(diff.store, "carried", "*", "an answer", answer.errors))
        return
    data = answer.data or {}
    for c in (data.get("resourceClaims") or {}).get("nodes") or []:
        key = (c["namespace"], c["name"])
        got = sorted(
            [(r["name"], d["name"], d["expression"]) for r in c["requests"] for d in r["derivedAttributes"]]
            + [(f"{r['name']}/{s['name']}", d["name"], d["expression"])
               for r in c["requests"] for s in r["firstAvailable"] for d in s["derivedAttributes"]]
        )  # fmt: skip
        if key in truth.derived:
            diff.check("claim.derivedAttributes", "/".join(key), truth.derived[key], tuple(got))
    for d in (data.get("devices") or {}).get("nodes") or []:
        key = (d["driver"], d["pool"], d["name"])
        got = tuple(sorted((c["counterSet"], tuple(c.get("compatibilityGroups") or ()))
                           for c in d["consumesCounters"] if c.get("compatibilityGroups")))  # fmt: skip
        if key in truth.compatibility:
            diff.check(
                "device.compatibilityGroups", device_name(key), truth.compatibility[key], got
            )


def _pod_groups(diff: _Diff, truth: Truth, groups_answer: Answer, claims_answer: Answer) -> None:
    groups = diff.data(groups_answer, "podGroups", "podGroups")
    if groups is not None:
        seen = {(g["namespace"], g["name"]): g for g in groups}
        diff.check("podGroups.listed", "*", sorted(truth.pod_groups), sorted(seen))
        for key in truth.pod_groups.keys() & seen.keys():
            want, got, name = truth.pod_groups[key], seen[key], "/".join(key)
            diff.check("podGroup.claims", name, want.claims,
                       tuple((c["name"], c["resourceClaimName"]) for c in got["claims"]))  # fmt: skip
            diff.check("podGroup.pods", name, want.pods, tuple(p["name"] for p in got["pods"]))
            diff.check("podGroup.held", name, want.held, tuple(c["name"] for c in got["heldClaims"]))  # fmt: skip
            diff.check("podGroup.idleHeld", name, want.idle_held, got["idleHeld"])
    claims = diff.data(claims_answer, "claim.podGroups", "resourceClaims")
    if claims is not None:
        for c in claims:
            key = (c["namespace"], c["name"])
            if key in truth.claim_groups:
                got = tuple(g["name"] for g in c["podGroups"])
                diff.check("claim.podGroups", "/".join(key), truth.claim_groups[key], got)


_POOL_FIELDS = (
    ("generation", "generation"), ("resourceSliceCount", "resource_slice_count"),
    ("nodeName", "node_name"), ("totalDevices", "total"), ("allocatedDevices", "allocated"),
    ("availableDevices", "available"), ("unavailableDevices", "unavailable"),
)  # fmt: skip


def _pools(diff: _Diff, truth: Truth, answer: Answer) -> None:
    pools = diff.data(answer, "pools", "resourcePools")
    if pools is None:
        return
    seen = {(p["driver"], p["poolName"]): p for p in pools}
    diff.check("pools.listed", "*", sorted(truth.pools), sorted(seen))
    for key in truth.pools.keys() & seen.keys():
        want, got = truth.pools[key], seen[key]
        for graph_name, field in _POOL_FIELDS:
            diff.check(f"pool.{graph_name}", "/".join(key), getattr(want, field), got[graph_name])
        prefix = (got["validationError"] or "").split(":", 1)[0] or None
        diff.check("pool.validationError", "/".join(key), (want.validation_error or "").split(":", 1)[0] or None, prefix)  # fmt: skip


def live_mismatches(truth: Truth, live: list[dict[str, Any]]) -> list[Mismatch]:
    """What a subscriber to claimEvents and deviceEvents (memory store) last saw of each claim
    and device, beside the truth. Events since the last (re)subscription count; a claim or
    device never evented since then is not judged."""
    diff = _Diff("live")
    claims: dict[tuple[str, str], Any] = {}
    devices: dict[tuple[str, str, str], Any] = {}
    for item in live:
        if item.get("resubscribed"):
            claims, devices = {}, {}
            continue
        if item["errors"]:
            diff.found.append(Mismatch("live", "live.errors", "*", [], item["errors"]))
            continue
        data = item["data"] or {}
        if "claimEvents" in data:
            e = data["claimEvents"]
            claims[(e["namespace"], e["name"])] = e["new"]
        elif "deviceEvents" in data:
            e = data["deviceEvents"]
            state = e["new"] or e["old"]
            d = state["device"]
            devices[(d["driver"], d["pool"], d["name"])] = e["new"] and e["new"]["status"]
    for key, new in claims.items():
        want = truth.claims.get(key)
        expected = (want.state, want.idle) if want else None
        actual = (new["state"].lower(), new["idle"]) if new else None
        diff.check("live.claim", "/".join(key), expected, actual)
    for key, status in devices.items():
        device = truth.devices.get(key)
        expected = device.status if device and device.published else None
        diff.check("live.device", device_name(key), expected, status.lower() if status else None)
    return diff.found
