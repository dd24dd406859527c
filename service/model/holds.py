"""A claim's holds on devices and the DeviceClasses it names, as the index keys them.

* `holds_of(cluster, key, claim)` — every result of the claim's allocation as
  `(device key, hold id) -> (AllocationRef, AllocationResult)`; a hold id is
  `(claim key, request, shareID or "")`, the value of the `device_allocations` relation, so a
  device shared by several allocations of one claim (distinct shareIDs) is held once per share;
* `class_names(claim)` — every DeviceClass its requests (and subrequests) name, in order, once
  (the `class_claims` relation).

Pure functions over records.
"""

from __future__ import annotations

from dra_mirror.service.model.records import (
    AllocationRef,
    AllocationResult,
    ClaimRecord,
    DeviceKey,
    ObjectKey,
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
    holds = {}
    for result in claim.allocation.results:
        device = DeviceKey(cluster, result.driver, result.pool, result.device)
        hold_id = (key, result.request, result.share_id or "")
        ref = AllocationRef(
            claim=key,
            request=result.request,
            share_id=result.share_id,
            consumed_capacity=result.consumed_capacity,
            admin_access=result.admin_access,
        )
        holds[(device, hold_id)] = (ref, result)
    return holds
