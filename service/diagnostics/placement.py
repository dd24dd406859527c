"""Allocate a ResourceClaim the way kube-scheduler's structured allocator would.

One module for both users: the simulator places claims with `allocate`, and explainClaim reads
the `Unsatisfiable` it returns to say why a claim stays Pending. Neither keeps a private copy,
so what the simulator places and what explainClaim says cannot disagree.

Rules implemented (resource.k8s.io/v1, as far as the scenarios use them):

* a request is satisfied by its own class + selectors, or by the first of its `firstAvailable`
  subrequests that fits (result request `req/sub`); `ExactCount` takes `count` devices, `All`
  takes every matching device in scope and fails if any of them is unavailable (or none match);
* every device of one claim is on one node, or network-attached (`DeviceEntry.node is None`);
  `node=None` tries nodes in name order, `node="n1"` only devices usable on n1;
* exclusive devices must be unheld and serve one request of one claim; shareable ones
  (`allowMultipleAllocations`) get a `shareID` and a `consumedCapacity` listing every capacity,
  rounded by its `requestPolicy`, per allocation result — several requests of one claim may
  share one device while the capacity lasts (a request never takes the same device twice);
* partition counters, NoSchedule/NoExecute taints and admin access as in `candidates.fit`;
* `constraints`: `matchAttribute` (one value over all chosen devices of the named requests;
  a device without the attribute cannot be chosen) and `distinctAttribute` (all different);
* a CEL evaluation error on a candidate device fails the claim (kube-scheduler aborts the
  attempt): it is reported as a selector error, never as "no match".

The search is a depth-first search with backtracking over candidate devices, bounded by
`SEARCH_BUDGET` device tries per node and `TOTAL_BUDGET` per claim (Kubernetes bounds its
search too); running out reports the claim as unsatisfiable with verdict `search-limit`.

Promises: pure; never mutates the ledger (the caller commits what it writes); deterministic
for the same inputs and `share_id`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from dra_mirror.service.diagnostics.candidates import Alternative, Match, alternatives, fit, match
from dra_mirror.service.diagnostics.compatibility import snapshot
from dra_mirror.service.diagnostics.derived import tagged_value
from dra_mirror.service.diagnostics.ledger import CounterSetKey, Ledger
from dra_mirror.service.diagnostics.verdicts import (
    RequestVerdict,
    Unsatisfiable,
    claim_verdicts,
)
from dra_mirror.service.model.quantity import format_quantity, parse_quantity
from dra_mirror.service.model.records import (
    Allocation,
    AllocationResult,
    ClaimRecord,
    Constraint,
    DeviceClassRecord,
    DeviceEntry,
)

__all__ = ["SEARCH_BUDGET", "TOTAL_BUDGET", "Ledger", "RequestVerdict", "Unsatisfiable", "allocate"]

SEARCH_BUDGET = 20_000  # device tries per node
TOTAL_BUDGET = 200_000  # device tries per claim, over every node


def _new_share_id() -> str:
    return str(uuid.uuid4())


def allocate(
    claim: ClaimRecord,
    *,
    classes: Mapping[str, DeviceClassRecord],
    devices: Sequence[DeviceEntry],
    ledger: Ledger,
    node: str | None = None,
    share_id: Callable[[], str] = _new_share_id,
) -> Allocation | Unsatisfiable:
    """An allocation for the claim, or why none exists. Does not mutate the ledger."""
    if node is not None:
        devices = [d for d in devices if d.node in (node, None)]
    per_request = [
        [match(alt, classes, devices) for alt in alternatives(r)] for r in claim.requests
    ]
    matches = [m for ms in per_request for m in ms]
    if not claim.requests:
        # Nothing to allocate: the scheduler writes an empty allocation usable anywhere.
        return _allocation(claim, [], classes, None, share_id)
    if any(m.errors for m in matches):
        return claim_verdicts(claim, per_request, ledger, node=node)
    if node is not None:
        scopes: list[str | None] = [node]
    else:
        nodes = sorted({e.node for m in matches for e in m.devices if e.node is not None})
        scopes = list(nodes) if nodes else [None]
    # Candidates per match by node, once: each node's search then reads only its own devices.
    by_node = [[_by_node(m.devices) for m in ms] for ms in per_request]
    search_limited = False
    left = TOTAL_BUDGET
    for scope in scopes:
        if left <= 0:
            search_limited = True
            break
        search = _Search(
            claim, per_request, by_node, ledger, scope, budget=min(SEARCH_BUDGET, left)
        )
        try:
            picks = search.run()
        except _BudgetExhausted:
            search_limited = True
            picks = None
        left -= search.tries
        if picks is not None:
            return _allocation(claim, picks, classes, scope, share_id)
    return claim_verdicts(claim, per_request, ledger, node=node, search_limited=search_limited)


class _BudgetExhausted(Exception):
    pass


class _Search:
    """Depth-first search for one node scope (`None`: network-attached devices only)."""

    def __init__(
        self,
        claim: ClaimRecord,
        per_request: list[list[Match]],
        by_node: list[list[dict[str | None, list[DeviceEntry]]]],
        ledger: Ledger,
        scope: str | None,
        *,
        budget: int = SEARCH_BUDGET,
    ) -> None:
        self.ledger = ledger
        self.taken = ledger.taken
        self.constraints = claim.constraints
        self.options = [
            [
                (m.alternative, _in_scope(groups, scope))
                for m, groups in zip(ms, node_groups, strict=True)
            ]
            for ms, node_groups in zip(per_request, by_node, strict=True)
        ]
        self.picks: list[tuple[Alternative, DeviceEntry, dict[str, Fraction] | None]] = []
        self.uses: dict[Any, int] = {}  # device -> picks of it in this claim
        self.pending: dict[Any, dict[str, Fraction]] = {}  # device -> capacity picks took
        self.tentative: dict[CounterSetKey, dict[str, Fraction]] = {}
        self.budget = budget
        self.tries = 0

    def run(self) -> list[tuple[Alternative, DeviceEntry, dict[str, Fraction] | None]] | None:
        # Quick rejection: a request with no candidate at all on this node.
        if any(not any(cands for _, cands in opts) for opts in self.options):
            return None
        return list(self.picks) if self._request(0) else None

    def _request(self, i: int) -> bool:
        if i == len(self.options):
            return True
        for alt, candidates in self.options[i]:
            if alt.mode not in ("ExactCount", "All") or alt.count < 0:
                continue  # clients must refuse allocation modes they do not know
            if alt.mode == "All":
                if candidates and self._take_all(alt, candidates, i):
                    return True
            elif self._choose(alt, candidates, 0, alt.count, i):
                return True
        return False

    def _take_all(self, alt: Alternative, candidates: list[DeviceEntry], i: int) -> bool:
        taken = 0
        for entry in candidates:
            if not self._push(alt, entry):
                break
            taken += 1
        else:
            if self._request(i + 1):
                return True
        for _ in range(taken):
            self._pop()
        return False

    def _choose(
        self, alt: Alternative, candidates: list[DeviceEntry], start: int, left: int, i: int
    ) -> bool:
        if left == 0:
            return self._request(i + 1)
        for j in range(start, len(candidates) - left + 1):
            if self._push(alt, candidates[j]):
                if self._choose(alt, candidates, j + 1, left - 1, i):
                    return True
                self._pop()
        return False

    def _push(self, alt: Alternative, entry: DeviceEntry) -> bool:
        self.tries += 1
        if self.tries > self.budget:
            raise _BudgetExhausted
        key = entry.key
        uses = self.uses.get(key, 0)
        if not entry.device.shareable and (uses or (not alt.admin and self.taken(key))):
            return False  # the common case on a busy cluster, answered before `fit`
        reason, consumed = fit(
            entry,
            alt,
            self.ledger,
            self.tentative,
            pending=self.pending.get(key),
            in_claim=uses > 0,
            picked=[e for _, e, _ in self.picks] if entry.device.consumes_counters else (),
        )
        if reason is not None or not self._constraints_hold(alt, entry):
            return False
        self.picks.append((alt, entry, consumed))
        self.uses[key] = uses + 1
        if consumed:
            taken = self.pending.setdefault(key, {})
            for name, amount in consumed.items():
                taken[name] = taken.get(name, Fraction(0)) + amount
        if uses == 0 and not alt.admin and not self.ledger.holders(key):
            self._count(entry, +1)
        return True

    def _pop(self) -> None:
        alt, entry, consumed = self.picks.pop()
        key = entry.key
        self.uses[key] -= 1
        if consumed:
            taken = self.pending[key]
            for name, amount in consumed.items():
                taken[name] -= amount
        if self.uses[key] == 0:
            del self.uses[key]
            self.pending.pop(key, None)
            if not alt.admin and not self.ledger.holders(key):
                self._count(entry, -1)

    def _count(self, entry: DeviceEntry, sign: int) -> None:
        for consumption in entry.device.consumes_counters:
            key = CounterSetKey(
                entry.key.cluster, entry.key.driver, entry.key.pool, consumption.counter_set
            )
            used = self.tentative.setdefault(key, {})
            for name, text in consumption.counters.items():
                try:
                    amount = parse_quantity(text)
                except ValueError:
                    continue  # counters_fit refused such a device already
                used[name] = used.get(name, Fraction(0)) + sign * amount

    def _constraints_hold(self, alt: Alternative, entry: DeviceEntry) -> bool:
        for constraint in self.constraints:
            if not _applies(constraint, alt):
                continue
            attribute = constraint.match_attribute or constraint.distinct_attribute
            if attribute is None:
                continue
            value = _attribute(entry, attribute, alt)
            if value is None:
                return False
            others = [
                _attribute(e, attribute, a) for a, e, _ in self.picks if _applies(constraint, a)
            ]
            if constraint.match_attribute and any(v != value for v in others):
                return False
            if constraint.distinct_attribute and value in others:
                return False
        return True


def _by_node(devices: list[DeviceEntry]) -> dict[str | None, list[DeviceEntry]]:
    groups: dict[str | None, list[DeviceEntry]] = {}
    for entry in devices:
        groups.setdefault(entry.node, []).append(entry)
    return groups


def _in_scope(groups: dict[str | None, list[DeviceEntry]], scope: str | None) -> list[DeviceEntry]:
    """Devices usable on the node: its own, then network-attached ones (device order kept)."""
    local = groups.get(scope, []) if scope is not None else []
    return local + groups.get(None, [])


def _applies(constraint: Constraint, alt: Alternative) -> bool:
    names = constraint.requests
    return not names or alt.request_name in names or alt.result_name in names


def _attribute(entry: DeviceEntry, name: str, alt: Alternative | None = None) -> Any:
    # KEP-6080: a derived attribute of the request shadows the device's own of that name.
    for derived in alt.derived if alt is not None else ():
        if derived.name == name:
            return tagged_value(derived, entry)
    attribute = entry.device.attributes.get(name)
    if attribute is None:
        return None
    value = attribute.value
    return (attribute.type, tuple(value) if isinstance(value, list) else value)


def _allocation(
    claim: ClaimRecord,
    picks: list[tuple[Alternative, DeviceEntry, dict[str, Fraction] | None]],
    classes: Mapping[str, DeviceClassRecord],
    scope: str | None,
    share_id: Callable[[], str],
) -> Allocation:
    results = []
    for alt, entry, consumed in picks:
        shared = entry.device.shareable and consumed is not None
        results.append(
            AllocationResult(
                request=alt.result_name,
                driver=entry.key.driver,
                pool=entry.key.pool,
                device=entry.key.device,
                share_id=share_id() if shared else None,
                # consumedCapacity names each capacity as the device's slice writes it.
                consumed_capacity=(
                    {
                        entry.device.written(name): format_quantity(
                            amount, like=entry.device.capacity[name].value
                        )
                        for name, amount in consumed.items()
                    }
                    if shared and consumed is not None
                    else {}
                ),
                admin_access=alt.admin,
                compatibility_groups=snapshot(entry),
            )
        )
    node_local = scope if any(e.node is not None for _, e, _ in picks) else None
    return Allocation(
        results=tuple(results),
        node_name=node_local,
        node_selector=(
            {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_local]}
                        ]
                    }
                ]
            }
            if node_local
            else None
        ),
        allocated_at=None,
        config=_config(claim, picks, classes),
    )


def _config(
    claim: ClaimRecord,
    picks: list[tuple[Alternative, DeviceEntry, dict[str, Fraction] | None]],
    classes: Mapping[str, DeviceClassRecord],
) -> tuple[dict[str, Any], ...]:
    """Class configuration (FromClass, per request that used the class), then the claim's."""
    config: list[dict[str, Any]] = []
    seen: set[str] = set()
    for alt, _, _ in picks:
        if alt.result_name in seen or alt.class_name is None:
            continue
        seen.add(alt.result_name)
        for entry in classes[alt.class_name].config:
            config.append({"source": "FromClass", "requests": [alt.result_name], **entry})
    for entry in claim.config:
        config.append({"source": "FromClaim", **entry})
    return tuple(config)
