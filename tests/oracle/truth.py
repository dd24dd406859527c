"""The oracle: from the raw objects of one cluster to the answers, read off the API's rules.

`answer(objects)` takes every object the cluster serves (dicts with `apiVersion` and `kind`, as
`kubectl get -o yaml` prints them: DeviceClass, ResourceSlice, ResourceClaim,
ResourceClaimTemplate, Pod, Node, DeviceTaintRule, PodGroup; resource.k8s.io v1, v1beta2,
v1beta1 or v1alpha3, scheduling.k8s.io v1beta1) and returns a `Truth`. It is naive on purpose: every answer is recomputed from
scratch by walking the objects, and every step cites the types.go comment it follows. It
shares no code with the mirror (no `dra_mirror` import), so where they disagree one of them
read the API wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from tests.oracle import reading, selectors
from tests.oracle.carried import Derived, claims_derived, compatibility_groups
from tests.oracle.claims import ClaimTruth, claim_truth, pod_devices
from tests.oracle.pod_groups import GroupTruth, claim_groups, group_truths
from tests.oracle.pools import UNAVAILABLE_EFFECTS, PoolTruth, pool_counts
from tests.oracle.reading import Raw, qualified, quantity

DeviceId = tuple[str, str, str]  # (driver, pool, device): "identify which device"


@dataclass(frozen=True, order=True)
class Holder:
    """One allocation result naming a device (one claim's hold on it)."""

    namespace: str
    claim: str
    request: str
    share_id: str | None
    admin_access: bool


@dataclass(frozen=True)
class DeviceTruth:
    driver: str
    pool: str
    name: str
    published: bool  # a slice of the pool's highest generation lists it
    slice: str | None  # that slice's name
    node: str | None  # from the slice, else from the holding allocation's nodeSelector
    uuid: str | None
    shareable: bool
    status: str  # free | held | shared | blocked
    holders: tuple[Holder, ...]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect): the slice's and the rules'
    tainted: bool  # a NoSchedule or NoExecute taint among them
    remaining: dict[str, Fraction] | None  # shareable devices: qualified capacity -> amount left


@dataclass
class Truth:
    devices: dict[DeviceId, DeviceTruth] = field(default_factory=dict)
    claims: dict[tuple[str, str], ClaimTruth] = field(default_factory=dict)
    pools: dict[tuple[str, str], PoolTruth] = field(default_factory=dict)
    pod_devices: dict[tuple[str, str], tuple[DeviceId, ...]] = field(default_factory=dict)
    slice_complete: dict[str, bool] = field(default_factory=dict)  # slices of highest generations
    counts: dict[str, int] = field(default_factory=dict)  # devices freeDevices claims pendingClaims
    pod_groups: dict[tuple[str, str], GroupTruth] = field(default_factory=dict)
    derived: dict[tuple[str, str], Derived] = field(default_factory=dict)  # per claim (KEP-6080)
    # per published device: (counter set, compatibility groups) it declares (KEP-5963)
    compatibility: dict[DeviceId, tuple[tuple[str, tuple[str, ...]], ...]] = field(
        default_factory=dict
    )
    claim_groups: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)


def _by_kind(objects: Iterable[Raw]) -> dict[str, list[Raw]]:
    kinds: dict[str, list[Raw]] = {}
    for obj in objects:
        kinds.setdefault(obj.get("kind") or "", []).append(obj)
    return kinds


def _taint(t: Raw) -> tuple[str, str, str]:
    return (t.get("key") or "", t.get("value") or "", t.get("effect") or "")


def _rule_taints(
    rules: list[Raw], classes: dict[str, Raw], driver: str, pool: str, name: str, device: Raw | None
) -> list[tuple]:
    """DeviceTaintRuleSpec.deviceSelector: "All selector criteria must be satisfied for a
    device to match. The empty selector matches all devices. Without a selector, no devices are
    matched." `device` is the published device (None: no slice publishes it).

    1.33/1.34 v1alpha3 rules may also carry `deviceClassName` ("the selectors defined there
    must be satisfied by a device to be selected") and `selectors` ("All of these selectors
    must be satisfied"), tombstoned since 1.35. Those are applied to the devices of
    ResourceSlices by the rule tracker of those versions (which skips a rule whose class
    "does not exist" and a device whose expression fails), and the 1.33/1.34 eviction
    controller reads allocated devices' taints from those slices: a rule using either selects
    no device that no slice publishes (`tests.oracle.selectors`)."""
    found = []
    for rule in rules:
        spec = rule.get("spec") or {}
        selector = spec.get("deviceSelector")
        if selector is None:
            continue
        wanted = {"driver": driver, "pool": pool, "device": name}
        if not all(selector.get(k) in (None, v) for k, v in wanted.items()):
            continue
        class_name = selector.get("deviceClassName")
        expressions = selectors.expressions(selector.get("selectors"))
        if class_name is not None or expressions:
            if device is None:
                continue
            if class_name is not None:
                if class_name not in classes:
                    continue
                class_spec = classes[class_name].get("spec") or {}
                expressions = selectors.expressions(class_spec.get("selectors")) + expressions
            if not all(selectors.holds(e, device, driver) for e in expressions):
                continue
        found.append(_taint(spec.get("taint") or {}))
    return found


RuleTaints = Callable[[str, str, str, "Raw | None"], list[tuple]]


def _published(slices: list[Raw]) -> dict[DeviceId, tuple[Raw, Raw]]:
    """(driver, pool, device) -> (device, slice) for the devices consumers may use.
    ResourcePool.generation: "Consumers of ResourceSlices should only consider resources from
    the pool with the highest generation number." Device.name is "unique ... within the pool";
    should two slices repeat one, the slice with the smaller name is read (the API has no rule
    for invalid data; this one only makes the answer independent of order)."""
    highest: dict[tuple[str, str], int] = {}
    for s in slices:
        driver, pool, generation, _ = reading.pool(s)
        highest[(driver, pool)] = max(highest.get((driver, pool), generation), generation)
    out: dict[DeviceId, tuple[Raw, Raw]] = {}
    for s in sorted(slices, key=lambda s: reading.meta(s).get("name") or ""):
        driver, pool, generation, _ = reading.pool(s)
        if generation != highest[(driver, pool)]:
            continue
        for device in reading.devices(s):
            out.setdefault((driver, pool, device["name"]), (device, s))
    return out


def _counters_left(
    slices: list[Raw], published: dict[DeviceId, tuple[Raw, Raw]], in_use: set[DeviceId]
) -> dict[tuple[str, str], dict[str, dict[str, Fraction]]]:
    """(driver, pool) -> counter set -> counter -> what is left. CounterSet: "When a device is
    allocated, the portion of counters it uses will no longer be available for use by other
    devices." Counter sets are a pool's (names "unique in the ResourcePool"), published by the
    slices of its highest generation."""
    left: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
    pools_seen = {(d, p) for d, p, _ in published}
    highest: dict[tuple[str, str], int] = {}
    for s in slices:
        driver, pool, generation, _ = reading.pool(s)
        highest[(driver, pool)] = max(highest.get((driver, pool), generation), generation)
    for s in slices:
        driver, pool, generation, _ = reading.pool(s)
        if generation != highest[(driver, pool)]:
            continue
        pools_seen.add((driver, pool))
        for counter_set in reading.shared_counters(s):
            counters = left.setdefault((driver, pool), {}).setdefault(counter_set["name"], {})
            for name, counter in (counter_set.get("counters") or {}).items():
                counters[name] = quantity(counter.get("value", 0))
    for key in sorted(in_use):
        if key not in published:
            continue  # an unpublished device consumes counters nobody publishes
        device, _ = published[key]
        for consumption in device.get("consumesCounters") or []:
            counters = left.get(key[:2], {}).get(consumption.get("counterSet") or "")
            if counters is None:
                continue
            for name, counter in (consumption.get("counters") or {}).items():
                if name in counters:
                    counters[name] -= quantity(counter.get("value", 0))
    return left


def _fits(device: Raw, left: dict[str, dict[str, Fraction]]) -> bool:
    """A free device is blocked when a counter it consumes (ConsumesCounters) is no longer
    available in its counter set; a counter set not published (yet) blocks nothing."""
    for consumption in device.get("consumesCounters") or []:
        counters = left.get(consumption.get("counterSet") or "")
        if counters is None:
            continue
        for name, counter in (consumption.get("counters") or {}).items():
            if name in counters and counters[name] < quantity(counter.get("value", 0)):
                return False
    return True


def _remaining(device: Raw, driver: str, holds: list[Raw]) -> dict[str, Fraction]:
    """Device.allowMultipleAllocations: "all of its capacity is consumable";
    DeviceRequestAllocationResult.consumedCapacity: "The total consumed capacity for each
    device must not exceed the DeviceCapacity's Value." Names compare qualified."""
    left = {
        qualified(name, driver): quantity(entry.get("value", 0))
        for name, entry in (device.get("capacity") or {}).items()
    }
    for result in holds:
        for name, amount in (result.get("consumedCapacity") or {}).items():
            key = qualified(name, driver)
            if key in left:
                left[key] -= quantity(amount)
    return {name: max(value, Fraction(0)) for name, value in left.items()}


def _device(
    key: DeviceId,
    published: dict[DeviceId, tuple[Raw, Raw]],
    holds: list[tuple[Raw, Raw]],
    counters: dict[tuple[str, str], dict[str, dict[str, Fraction]]],
    rule_taints: RuleTaints,
) -> DeviceTruth:
    driver, pool, name = key
    device, slice_ = published.get(key, (None, None))
    holders = tuple(
        sorted(
            Holder(
                reading.meta(claim).get("namespace") or "",
                reading.meta(claim).get("name") or "",
                result.get("request") or "",
                result.get("shareID") or None,
                bool(result.get("adminAccess")),
            )
            for claim, result in holds
        )
    )
    # DeviceRequest.adminAccess: admin-access claims "ignore all ordinary claims to the device
    # with respect to access modes and any resource allocations": they hold without consuming.
    consuming = [result for _, result in holds if not result.get("adminAccess")]
    if device is not None:
        shareable = bool(device.get("allowMultipleAllocations"))
        node = reading.slice_node(slice_, device)
        uuid = reading.attribute_value(device, "uuid", driver)
        taints = [_taint(t) for t in device.get("taints") or []]
    else:
        # Unpublished: what the allocation results say. shareID is set "when the device
        # supports multiple simultaneous allocations".
        shareable = any(r.get("shareID") for _, r in holds)
        node = next(
            (reading.allocated_node(c) for c, _ in holds if reading.allocated_node(c)), None
        )
        uuid, taints = None, []
    taints += rule_taints(driver, pool, name, device)
    if consuming:
        status = "shared" if shareable else "held"
    elif device is not None and not _fits(device, counters.get((driver, pool), {})):
        status = "blocked"
    else:
        status = "free"
    return DeviceTruth(
        driver=driver,
        pool=pool,
        name=name,
        published=device is not None,
        slice=reading.meta(slice_).get("name") if slice_ else None,
        node=node,
        uuid=str(uuid) if uuid is not None else None,
        shareable=shareable,
        status=status,
        holders=holders,
        taints=tuple(sorted(taints)),
        # DeviceTaint.effect: "Consumers must treat unknown effects like None."
        tainted=any(effect in UNAVAILABLE_EFFECTS for _, _, effect in taints),
        remaining=_remaining(device, driver, consuming) if device and shareable else None,
    )


def answer(objects: Iterable[Raw]) -> Truth:
    """Every answer about one cluster, from its raw objects."""
    kinds = _by_kind(objects)
    slices, claims = kinds.get("ResourceSlice", []), kinds.get("ResourceClaim", [])
    pods, rules = kinds.get("Pod", []), kinds.get("DeviceTaintRule", [])
    classes = {reading.meta(c).get("name") or "": c for c in kinds.get("DeviceClass", [])}

    def rule_taints(driver: str, pool: str, name: str, device: Raw | None) -> list[tuple]:
        return _rule_taints(rules, classes, driver, pool, name, device)

    published = _published(slices)
    holds: dict[DeviceId, list[tuple[Raw, Raw]]] = {}
    for claim in claims:
        for result in reading.results(claim):
            key = (result.get("driver") or "", result.get("pool") or "", result.get("device") or "")
            holds.setdefault(key, []).append((claim, result))
    in_use = {k for k, hs in holds.items() if any(not r.get("adminAccess") for _, r in hs)}
    counters = _counters_left(slices, published, in_use)
    truth = Truth()
    for key in sorted(published.keys() | holds.keys()):
        truth.devices[key] = _device(key, published, holds.get(key, []), counters, rule_taints)

    def tainted(driver: str, pool: str, device: Raw) -> bool:
        taints = [_taint(t) for t in device.get("taints") or []]
        taints += rule_taints(driver, pool, device["name"], device)
        return any(effect in UNAVAILABLE_EFFECTS for _, _, effect in taints)

    truth.pools = pool_counts(slices, claims, tainted)
    # A pool is complete for kube-scheduler (k8s.io/dynamic-resource-allocation structured
    # pools.go) when its slices of the highest generation number exactly the
    # resourceSliceCount of the first one (by name here, the lister's order there).
    present: dict[tuple[str, str], list[Raw]] = {}
    for s in sorted(slices, key=lambda s: reading.meta(s).get("name") or ""):
        driver, pool, generation, _ = reading.pool(s)
        if generation == truth.pools[(driver, pool)].generation:
            present.setdefault((driver, pool), []).append(s)
    for members in present.values():
        complete = len(members) == reading.pool(members[0])[3]
        for s in members:
            truth.slice_complete[reading.meta(s).get("name") or ""] = complete
    by_name = {}
    for claim in claims:
        c = claim_truth(claim, pods)
        truth.claims[(c.namespace, c.name)] = c
        by_name[(c.namespace, c.name)] = claim
    for pod in pods:
        m = reading.meta(pod)
        truth.pod_devices[(m.get("namespace") or "", m.get("name") or "")] = pod_devices(
            pod, by_name
        )
    listed = [d for d in truth.devices.values() if d.published]
    truth.counts = {
        "devices": len(listed),
        "freeDevices": sum(1 for d in listed if d.status == "free"),
        "claims": len(truth.claims),
        "pendingClaims": sum(1 for c in truth.claims.values() if c.state == "pending"),
    }
    truth.derived = claims_derived(claims)
    truth.compatibility = {k: compatibility_groups(d) for k, (d, _) in published.items()}
    groups = kinds.get("PodGroup", [])
    truth.pod_groups = group_truths(groups, claims, pods)
    truth.claim_groups = claim_groups(groups, claims)
    return truth
