"""The entry of a device an allocation names and no slice publishes: held all the same,
keyed by the allocation's (driver, pool, device), on the node its holders' allocation names,
shareable when a hold carries a shareID, with the last UUID seen and the taints rules put on
it. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dra_mirror.service.model.records import (
    AllocationRef,
    ClaimRecord,
    Device,
    DeviceEntry,
    DeviceKey,
)

if TYPE_CHECKING:
    from dra_mirror.service.model.index import ClusterIndex


def unpublished_entry(
    index: ClusterIndex,
    key: DeviceKey,
    holds: Iterable[AllocationRef],
    uuid: str | None,
    rule_taints: Any,
) -> DeviceEntry:
    """The entry for `key`, which no slice publishes, from the claims that hold it."""
    refs = sorted(holds, key=lambda r: (r.claim, r.request, r.share_id or ""))
    node = None
    for ref in refs:
        claim = index.get(ref.claim)
        if isinstance(claim, ClaimRecord) and claim.allocation is not None:
            node = claim.allocation.node_name
            if node:
                break
    # DeviceRequestAllocationResult.shareID: set when the device "supports multiple
    # simultaneous allocations".
    shareable = any(r.share_id for r in refs)
    return DeviceEntry(
        key=key,
        device=Device(name=key.device, shareable=shareable, uuid=uuid),
        slice=None,
        node=node,
        pool_complete=False,
        published=False,
        rule_taints=rule_taints,
    )
