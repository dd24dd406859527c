"""Devices held by claims the asker may not see: held, with the holder withheld.

A device is cluster-scoped; its holders are namespaced. The request's `ScopedReader` drops
holders outside the scope (they do not exist for the asker), but the device is still held:
its status, its remaining capacity and the free/used counts must stay true. This module reads
the device's holders through the store itself (one batched lookup per request, memoized in the
request's loaders) and answers only counts and capacities from them — never a claim, a
namespace or a pod:

* `withheld(info, key)`: how many of the device's allocation results belong to claims outside
  the scope (`Device.withheldAllocations`);
* `all_holders(loaders, key)`: every holder, for derived state (remaining capacity).
"""

from __future__ import annotations

from typing import Any

from strawberry.dataloader import DataLoader

from dra_mirror.service.model.live import DeviceState
from dra_mirror.service.model.records import AllocationRef, DeviceKey

from .context import Info
from .loaders import Loaders

MEMO_KEY = "withheld:every-holder"


def every_holder(loaders: Loaders) -> DataLoader[DeviceKey, list[AllocationRef]]:
    loader = loaders.memo.get(MEMO_KEY)
    if loader is None:
        reader = loaders.reader

        async def load(keys: list[DeviceKey]) -> list[list[Any]]:
            # The store itself, past the scope: only counts and capacities leave this module.
            return await reader.every_holder(keys)

        loader = loaders.memo[MEMO_KEY] = DataLoader(load)
    return loader


async def all_holders(loaders: Loaders, key: DeviceKey) -> list[AllocationRef]:
    return await every_holder(loaders).load(key)


async def withheld(info: Info, key: DeviceKey, moment: DeviceState | None = None) -> int:
    """`moment`: a live event's side, whose holders are counted instead of the store's now."""
    loaders: Loaders = info.context.loaders
    scope = info.context.reader.scope
    holders = list(moment.holders) if moment is not None else await all_holders(loaders, key)
    return sum(1 for ref in holders if not scope.allows(ref.claim.cluster, ref.claim.namespace))
