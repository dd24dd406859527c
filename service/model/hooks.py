"""What the index derives when an object changes, per kind: the registry's `IndexHook`s.

`hooks(...)` gives, for every registered kind (`service.model.kinds.REGISTRY`), the function
`ClusterIndex` calls with `(key, old, new, batch)` after it has stored the change (`old` None:
created; `new` None: deleted):

* "devices" — a ResourceSlice: its pool's valid generation and devices (`DeviceTracker`), and
  the holds on a device it publishes for the first time weighed again (`ClaimTracker`);
* "claims" — a ResourceClaim: holds, reservations, waits, idleness (`ClaimTracker`);
* "pods" — a Pod: its reverse maps (`service.model.pods`), then the idleness and views of the
  claims it consumes or names;
* "taints" — a DeviceTaintRule, or a DeviceClass rules may name: the rule taints of the
  devices they select;
* "groups" — a PodGroup: the claims it names (`service.model.pod_groups`);
* "none" — a kind the index only keeps (templates, nodes).

Promises: one function per kind, chosen by the registry alone; pure, like the index.
"""

from __future__ import annotations

from collections.abc import Callable

from dra_mirror.service.model.batch import Batch
from dra_mirror.service.model.claims_index import ClaimTracker
from dra_mirror.service.model.devices_index import DeviceTracker
from dra_mirror.service.model.kinds import REGISTRY, IndexHook
from dra_mirror.service.model.links import Links
from dra_mirror.service.model.pod_groups import on_pod_group
from dra_mirror.service.model.pods import on_pod
from dra_mirror.service.model.records import (
    ClaimRecord,
    ObjectKey,
    PodGroupRecord,
    PodRecord,
    Record,
    SliceRecord,
)

Hook = Callable[[ObjectKey, Record | None, Record | None, Batch], None]


def hooks(
    cluster: str, links: Links, devices: DeviceTracker, claims: ClaimTracker
) -> dict[str, Hook]:
    """Kind -> what the index derives of a change of it."""

    def on_slice(key: ObjectKey, old: Record | None, new: Record | None, batch: Batch) -> None:
        assert isinstance(old, SliceRecord | None) and isinstance(new, SliceRecord | None)
        for device in devices.on_slice(key, old, new, batch):
            claims.reweigh(device, batch)  # held before a slice published it

    def on_claim(key: ObjectKey, old: Record | None, new: Record | None, batch: Batch) -> None:
        assert isinstance(old, ClaimRecord | None) and isinstance(new, ClaimRecord | None)
        claims.on_claim(key, old, new, batch)

    def on_pod_change(key: ObjectKey, old: Record | None, new: Record | None, batch: Batch) -> None:
        assert isinstance(old, PodRecord | None) and isinstance(new, PodRecord | None)
        on_pod(cluster, links, key, old, new)
        claims.on_pod(key, old, new, batch)

    def on_taints(key: ObjectKey, old: Record | None, new: Record | None, batch: Batch) -> None:
        devices.on_rule(old, new, batch)

    def on_group(key: ObjectKey, old: Record | None, new: Record | None, batch: Batch) -> None:
        assert isinstance(old, PodGroupRecord | None) and isinstance(new, PodGroupRecord | None)
        on_pod_group(links, key, old, new)

    def kept(key: ObjectKey, old: Record | None, new: Record | None, batch: Batch) -> None:
        return None

    by_hook: dict[IndexHook, Hook] = {
        "devices": on_slice,
        "claims": on_claim,
        "pods": on_pod_change,
        "taints": on_taints,
        "groups": on_group,
        "none": kept,
    }
    return {kind.kind: by_hook[kind.index] for kind in REGISTRY}
