"""A claim's holds on devices and the DeviceClasses it names, as the index keys them.

* `holds_of(cluster, key, claim)` — every result of the claim's allocation as
  `(device key, hold id) -> (AllocationRef, AllocationResult)`; a hold id is
  `(claim key, request, shareID or "")`, the value of the `device_allocations` relation, so a
  device shared by several allocations of one claim (distinct shareIDs) is held once per share;
  `allocation_holds(cluster, key, allocation)` the same for an allocation alone;
  `device_holds(cluster, key, claim)` as (device key, AllocationRef) pairs;
* `class_names(claim)` — every DeviceClass its requests (and subrequests) name, in order, once
  (the `class_claims` relation).

Pure functions over records.
"""

from __future__ import annotations

from dra_mirror.service.model.records import (
    Allocation,
    AllocationRef,
    AllocationResult,
    ClaimRecord,
    DeviceKey,
    ObjectKey,
    Record,
)

HoldId = tuple[ObjectKey, str, str]  # (claim, request, shareID or "")
Hold = tuple[AllocationRef, AllocationResult]


def class_names(claim: ClaimRecord | None) -> tuple[str, ...]:
    """Every DeviceClass a claim's requests (and subrequests) name, in order, once."""
    if claim is None:
        return ()
    names: dict[str, None] = {}
    for request in claim.requests:
        if request.device_class_name:
            names[request.device_class_name] = None
        for sub in request.first_available:
            if sub.device_class_name:
                names[sub.device_class_name] = None
    return tuple(names)


def holds_of(
    cluster: str, key: ObjectKey, claim: ClaimRecord | None
) -> dict[tuple[DeviceKey, HoldId], Hold]:
    """(device key, hold id) -> (AllocationRef, AllocationResult) of a claim's allocation."""
    if claim is None or claim.allocation is None:
        return {}
    return allocation_holds(cluster, key, claim.allocation)


def device_holds(
    cluster: str, key: ObjectKey, claim: Record | None
) -> list[tuple[DeviceKey, AllocationRef]]:
    """The devices a claim's allocation holds, with its hold on each (none for a record that
    is not a claim)."""
    if not isinstance(claim, ClaimRecord):
        return []
    return [(device, ref) for (device, _), (ref, _) in holds_of(cluster, key, claim).items()]


def allocation_holds(
    cluster: str, key: ObjectKey, allocation: Allocation
) -> dict[tuple[DeviceKey, HoldId], Hold]:
    """`holds_of` for an allocation of the claim `key` (one that is only imagined, too)."""
    holds = {}
    for result in allocation.results:
        device = DeviceKey(cluster, result.driver, result.pool, result.device)
        hold_id = (key, result.request, result.share_id or "")
        ref = AllocationRef(  # positional: a 40,000-claim LIST makes one per result
            key, result.request, result.share_id, result.consumed_capacity, result.admin_access,
            result.compatibility_groups,
        )  # fmt: skip
        holds[(device, hold_id)] = (ref, result)
    return holds
