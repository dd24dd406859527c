"""Pool status as KEP-5677's ResourcePoolStatusRequest counts it (the 1.37 accounting).

`pool_statuses(slices, claims, rules)` answers, for every (driver, pool) with a slice, what the
kube-controller-manager's resourcepoolstatusrequest controller writes into a PoolStatus
(resource/v1alpha3 types.go, KEP "Partitionable & Consumable Device Accounting"):

* only slices of the highest `pool.generation` count ("ResourceSlices with older pool
  generations are ignored during computation");
* `resourceSliceCount` is read from the first slice of that generation (by name, so every
  reader picks the same one); with fewer slices present the pool is incomplete: the
  `validationError` says so (`PoolIncomplete: …`) and every count is unset;
* `totalDevices`: the devices of those slices;
* `allocatedDevices`: the distinct device names of the pool in allocation results, a shared
  device counted once, built without filtering on generation (a held device no slice
  publishes still counts); AdminAccess results are skipped (observers, not consumers);
* `unavailableDevices`: devices with at least one NoSchedule or NoExecute taint — in the slice,
  or from a DeviceTaintRule selecting the device (`service.model.taint_rules`: pass the
  cluster's DeviceClasses and the CEL matcher for the rules of 1.33/1.34 that name a class or
  carry selectors) — counted over every device of the pool whether allocated or not; unknown
  effects count as None;
* `availableDevices` = max(0, total - allocated - unavailable);
* `nodeName`: set when every slice names the same node.

Pure, O(slices + allocation results); the graph computes it over each cluster it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from msgspec import Struct

from dra_mirror.service.model.records import (
    ClaimRecord,
    Device,
    DeviceClassRecord,
    DeviceKey,
    SliceRecord,
    TaintRuleRecord,
)
from dra_mirror.service.model.taint_rules import (
    UNAVAILABLE_EFFECTS,
    RuleMatching,
    SelectorMatcher,
    rule_taints,
)


class PoolStatus(Struct, frozen=True, gc=False):
    cluster: str
    driver: str
    pool: str
    generation: int
    node_name: str | None
    resource_slice_count: int | None  # None: incomplete
    total: int | None
    allocated: int | None
    available: int | None
    unavailable: int | None
    validation_error: str | None = None


def tainted(device: Device, extra: Iterable[dict[str, Any]] = ()) -> bool:
    """The device carries a taint that makes it unavailable (its own, or `extra` ones)."""
    return any(t.get("effect") in UNAVAILABLE_EFFECTS for t in (*device.taints, *extra))


class _Rules(Struct, frozen=True, gc=False):
    rules: Sequence[TaintRuleRecord]
    matching: RuleMatching


def _ruled(
    rules: _Rules | None, cluster: str, driver: str, pool: str, device: Device
) -> Iterable[dict[str, Any]]:
    if rules is None:
        return ()
    key = DeviceKey(cluster, driver, pool, device.name)
    return (t.taint for t in rule_taints(rules.rules, key, device, rules.matching))


def _classes_of(
    class_of: dict[tuple[str, str], DeviceClassRecord], cluster: str
) -> Callable[[str], DeviceClassRecord | None]:
    return lambda name: class_of.get((cluster, name))


def pool_statuses(
    slices: Iterable[SliceRecord],
    claims: Iterable[ClaimRecord],
    rules: Iterable[TaintRuleRecord] = (),
    *,
    classes: Iterable[DeviceClassRecord] = (),
    selector_matcher: SelectorMatcher | None = None,
) -> list[PoolStatus]:
    """Every pool with a slice, sorted by (cluster, driver, pool); `rules` and `classes`: the
    DeviceTaintRules and DeviceClasses of the same clusters."""
    by_cluster: dict[str, list[TaintRuleRecord]] = {}
    for rule in rules:
        by_cluster.setdefault(rule.meta.cluster, []).append(rule)
    class_of: dict[tuple[str, str], DeviceClassRecord] = {
        (c.meta.cluster, c.meta.name): c for c in classes
    }
    ruled = {
        cluster: _Rules(
            found,
            RuleMatching(_classes_of(class_of, cluster), selector_matcher),
        )
        for cluster, found in by_cluster.items()
    }
    members: dict[tuple[str, str, str], list[SliceRecord]] = {}
    for sl in slices:
        key = (sl.meta.cluster, sl.driver, sl.pool.name)
        present = members.setdefault(key, [])
        if present and present[0].pool.generation > sl.pool.generation:
            continue
        if present and present[0].pool.generation < sl.pool.generation:
            present.clear()
        present.append(sl)
    in_use: dict[tuple[str, str, str], set[str]] = {}
    for claim in claims:
        if claim.allocation is None:
            continue
        for result in claim.allocation.results:
            if not result.admin_access:
                key = (claim.meta.cluster, result.driver, result.pool)
                in_use.setdefault(key, set()).add(result.device)
    return [
        _status(key, members[key], in_use.get(key, set()), ruled.get(key[0]))
        for key in sorted(members)
    ]


def _status(
    key: tuple[str, str, str],
    present: list[SliceRecord],
    used: set[str],
    rules: _Rules | None,
) -> PoolStatus:
    cluster, driver, pool = key
    present = sorted(present, key=lambda sl: sl.meta.name)
    generation = present[0].pool.generation
    expected = present[0].pool.resource_slice_count
    nodes = {sl.node_name or "" for sl in present}
    node = next(iter(nodes)) if len(nodes) == 1 else ""
    if len(present) < expected:
        error = (
            f"PoolIncomplete: pool {driver}/{pool} is incomplete: observed "
            f"{len(present)}/{expected} slices at generation {generation}"
        )
        return PoolStatus(cluster, driver, pool, generation, node or None,
                          None, None, None, None, None, error)  # fmt: skip
    devices = [d for sl in present for d in sl.devices]
    unavailable = sum(1 for d in devices if tainted(d, _ruled(rules, cluster, driver, pool, d)))
    allocated = len(used)
    available = max(0, len(devices) - allocated - unavailable)
    return PoolStatus(cluster, driver, pool, generation, node or None, len(present),
                      len(devices), allocated, available, unavailable)  # fmt: skip
