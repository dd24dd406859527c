"""Which devices a request could take: selector matching and the per-device fit checks.

The allocator (`placement`) and the diagnosis (`verdicts`) ask the same two questions of every
device, so both live here:

* **does it match?** — `match(alternative, classes, devices)` evaluates the DeviceClass selectors
  and then the request's own selectors, in order, and keeps the counts explainClaim reports
  (devices the class covers, devices left after each request selector) and every evaluation
  error (Kubernetes fails the scheduling attempt on a CEL runtime error; so does the allocator);
* **can it be given now?** — `fit(...)` checks, against the ledger plus what this allocation
  already picked: exclusivity, a shareable device's remaining capacity after rounding the
  request by the capacity's `requestPolicy` (a request the policy or the device's total can
  never grant is `policy`, not `capacity`), partition counters and compatibility groups
  (KEP-5963: partitions of one counter set co-allocate only where their groups intersect),
  and NoSchedule/NoExecute taints
  (the slice's and the DeviceTaintRules') against the request's tolerations. Admin access skips
  holders, capacity and counters.

Promises: pure; `match` compiles each expression once (via `compile_selector`) and evaluates a
request selector only on devices the class accepted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from math import ceil
from typing import Any

from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector
from dra_mirror.service.diagnostics.compatibility import conflicts
from dra_mirror.service.diagnostics.ledger import CounterSetKey, Ledger
from dra_mirror.service.model.metadata import qualify
from dra_mirror.service.model.quantity import parse_quantity
from dra_mirror.service.model.records import (
    Capacity,
    DerivedAttribute,
    DeviceClassRecord,
    DeviceEntry,
    Request,
)
from dra_mirror.service.model.taint_rules import taints_of, untolerated

# Why a matching device cannot be given now.
HELD = "held"
CAPACITY = "capacity"  # not enough left now (others consume it)
POLICY = "policy"  # never: outside the requestPolicy, or more than the device has
COUNTERS = "counters"
INCOMPATIBLE = "incompatible"  # KEP-5963: its compatibility groups clash on a counter set
TAINTED = "tainted"


@dataclass(frozen=True)
class Alternative:
    """One way to satisfy a request: the request itself, or one of its firstAvailable
    subrequests (`result_name` "req/sub")."""

    result_name: str
    request_name: str
    class_name: str | None
    selectors: tuple[str, ...]
    mode: str
    count: int
    capacity: Mapping[str, str]
    tolerations: tuple[dict[str, Any], ...]
    admin: bool = False
    derived: tuple[DerivedAttribute, ...] = ()  # KEP-6080: names constraints may match on


def alternatives(request: Request) -> list[Alternative]:
    """The ways to satisfy a request, in the order Kubernetes tries them."""
    if request.first_available:
        return [
            Alternative(
                f"{request.name}/{sub.name}",
                request.name,
                sub.device_class_name,
                sub.selectors,
                sub.allocation_mode,
                sub.count,
                sub.capacity,
                sub.tolerations,
                derived=sub.derived_attributes,
            )
            for sub in request.first_available
        ]
    return [
        Alternative(
            request.name,
            request.name,
            request.device_class_name,
            request.selectors,
            request.allocation_mode,
            request.count,
            request.capacity,
            request.tolerations,
            request.admin_access,
            request.derived_attributes,
        )
    ]


@dataclass
class Match:
    """The devices an alternative's class and selectors accept, with the counts on the way."""

    alternative: Alternative
    class_exists: bool
    class_matched: int = 0
    selector_matches: list[tuple[str, int]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    devices: list[DeviceEntry] = field(default_factory=list)


def match(
    alt: Alternative, classes: Mapping[str, DeviceClassRecord], devices: Sequence[DeviceEntry]
) -> Match:
    """Evaluate the class selectors, then each request selector, over `devices`."""
    device_class = classes.get(alt.class_name) if alt.class_name else None
    if device_class is None:
        return Match(alt, class_exists=False)
    result = Match(alt, class_exists=True)
    errors: dict[str, str] = {}
    kept = _filter(device_class.selectors, devices, errors)
    result.class_matched = len(kept)
    for expression in alt.selectors:
        kept = _filter((expression,), kept, errors)
        result.selector_matches.append((expression, len(kept)))
    result.errors = sorted(errors.items())
    result.devices = kept
    return result


def _filter(
    expressions: Sequence[str], devices: Sequence[DeviceEntry], errors: dict[str, str]
) -> list[DeviceEntry]:
    kept = list(devices)
    for expression in expressions:
        try:
            selector = compile_selector(expression)
        except SelectorError as e:
            errors.setdefault(expression, e.message)
            return []
        passing, failed = selector.select(kept)
        if failed:
            entry, error = failed[0]
            errors.setdefault(expression, f"{entry.key.ref()}: {error.message}")
        kept = passing
    return kept


# --- capacity ---------------------------------------------------------------------------------


def consumed_amount(capacity: Capacity, requested: str | None) -> Fraction | None:
    """What one share of a shareable device consumes of one capacity: the request rounded
    by the capacity's requestPolicy; None when the policy does not allow it."""
    policy = capacity.request_policy or {}
    if requested is None:
        default = policy.get("default")
        # No request: the policy's default, or the whole capacity without a default.
        return parse_quantity(default) if default is not None else parse_quantity(capacity.value)
    amount = parse_quantity(requested)
    valid_values = policy.get("validValues")
    if valid_values:
        # Round up to the smallest listed value that is at least the request.
        for value in sorted(parse_quantity(v) for v in valid_values):
            if value >= amount:
                return value
        return None
    valid_range = policy.get("validRange")
    if valid_range:
        low = parse_quantity(valid_range["min"])
        amount = max(amount, low)
        step = valid_range.get("step")
        if step is not None:
            step_q = parse_quantity(step)
            amount = low + ceil((amount - low) / step_q) * step_q
        high = valid_range.get("max")
        if high is not None and amount > parse_quantity(high):
            return None  # above max: not allocatable
    return amount


def requested_capacity(entry: DeviceEntry, alt: Alternative) -> dict[str, str]:
    """The request's `capacity.requests`, keyed as the device's capacities are: a name without
    a domain is in the device's driver's domain (QualifiedName)."""
    driver = entry.key.driver
    return {qualify(name, driver): amount for name, amount in alt.capacity.items()}


def share_consumption(entry: DeviceEntry, alt: Alternative) -> dict[str, Fraction] | None:
    """Every capacity one share would consume (consumedCapacity lists all of them); None when
    the request names a capacity the device lacks or the policy rejects an amount."""
    capacities = entry.device.capacity
    requested = requested_capacity(entry, alt)
    if any(name not in capacities for name in requested):
        return None
    consumed: dict[str, Fraction] = {}
    for name, capacity in capacities.items():
        try:
            amount = consumed_amount(capacity, requested.get(name))
        except (ValueError, KeyError, TypeError):
            return None  # a quantity or policy the API server would have rejected
        if amount is None:
            return None
        consumed[name] = amount
    return consumed


# --- fit --------------------------------------------------------------------------------------


def blocking_taints(entry: DeviceEntry, alt: Alternative) -> list[Mapping[str, Any]]:
    """Taints that keep the request off the device — its slice's and those of the
    DeviceTaintRules selecting it: NoSchedule/NoExecute, untolerated (other and unknown effects
    are ignored, as the scheduler does)."""
    return untolerated(taints_of(entry), alt.tolerations)


def fit(
    entry: DeviceEntry,
    alt: Alternative,
    ledger: Ledger,
    tentative: Mapping[CounterSetKey, Mapping[str, Fraction]] | None = None,
    *,
    pending: Mapping[str, Fraction] | None = None,
    in_claim: bool = False,
    picked: Sequence[DeviceEntry] = (),
) -> tuple[str | None, dict[str, Fraction] | None]:
    """(reason it cannot be given or None, the capacity a share would consume).

    `tentative`: counters this allocation already took; `pending`: capacity of this device
    earlier requests of the same claim already took; `in_claim`: the claim already uses the
    device (a shareable device can serve several requests of one claim; it consumes its
    counters once); `picked`: devices this allocation already took (their compatibility groups
    must agree with the device's on a shared counter set, KEP-5963)."""
    if blocking_taints(entry, alt):
        return TAINTED, None
    if alt.admin:
        return None, None
    consumed = None
    device = entry.device
    if device.shareable:
        consumed = share_consumption(entry, alt)
        if consumed is None:
            return POLICY, None
        for name, amount in consumed.items():
            if amount > _total(device.capacity[name]):
                return POLICY, None
        remaining = ledger.remaining_capacity(entry)
        taken = pending or {}
        if any(
            amount > remaining.get(name, Fraction(0)) - taken.get(name, Fraction(0))
            for name, amount in consumed.items()
        ):
            return CAPACITY, None
    else:
        if ledger.taken(entry.key):
            return HELD, None
        for name, requested in requested_capacity(entry, alt).items():
            capacity = device.capacity.get(name)
            if capacity is None or _amount(requested) > _total(capacity):
                return POLICY, None
    if device.consumes_counters and not in_claim and not ledger.holders(entry.key):
        if not counters_fit(entry, ledger, tentative or {}):
            return COUNTERS, consumed
        if conflicts(entry, ledger, picked):
            return INCOMPATIBLE, consumed
    return None, consumed


@lru_cache(maxsize=4096)
def _amount(text: str) -> Fraction:
    """A requested amount; one that does not parse can never be granted. Remembered: counters
    repeat the same few quantities on every partition of every GPU."""
    try:
        return parse_quantity(text)
    except ValueError:
        return Fraction(2**128)


def _total(capacity: Capacity) -> Fraction:
    try:
        return parse_quantity(capacity.value)
    except ValueError:
        return Fraction(0)


def counters_fit(
    entry: DeviceEntry,
    ledger: Ledger,
    tentative: Mapping[CounterSetKey, Mapping[str, Fraction]],
) -> bool:
    """Whether the device's counter consumption fits what its counter sets have left."""
    for consumption in entry.device.consumes_counters:
        key = CounterSetKey(
            entry.key.cluster, entry.key.driver, entry.key.pool, consumption.counter_set
        )
        free = ledger.counters_free(key)
        if free is None:
            return False  # no slice of the pool publishes the set: not allocatable
        extra = tentative.get(key, {})
        for name, text in consumption.counters.items():
            need = _amount(text)
            if need > free.get(name, Fraction(0)) - extra.get(name, Fraction(0)):
                return False
    return True
