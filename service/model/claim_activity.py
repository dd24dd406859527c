"""Two readings of a claim the claim side of the index makes: whether its consumers keep it
from idleness at a moment (running, or starting within their grace: service.model.activity),
and the transition a hold on a device writes into the batch, with what the hold takes in
GPU-equivalents of its device's type and the model the device publishes
(service.model.physical) — again, `hold_weighed`, once a slice publishes a device held before
(weighed as a lone device, of no model, till then). Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.activity import RUNNING, activity
from dra_mirror.service.model.consumers import is_pod, is_pod_group
from dra_mirror.service.model.holds import holds_of
from dra_mirror.service.model.physical import entry_product, hold_weights
from dra_mirror.service.model.records import (
    POD,
    AllocationRef,
    ClaimRecord,
    Consumer,
    DeviceKey,
    ObjectKey,
    PodRecord,
)
from dra_mirror.service.model.relations import DEVICE_ALLOCATIONS, GROUP_PODS

if TYPE_CHECKING:
    from dra_mirror.service.model.batch import Batch
    from dra_mirror.service.model.index import ClusterIndex


def hold_transition(
    index: ClusterIndex,
    batch: Batch,
    type_: str,
    device: DeviceKey,
    hold: tuple[AllocationRef, Any],
    claim_fields: dict[str, Any],
    observed: bool,
    reason: str = "",
) -> None:
    """Write one hold's transition (allocated, released, ...) into the batch."""
    ref, result = hold
    entry = index.device(device)
    unit = index.unit(device)
    if type_ in (ch.ALLOCATED, ch.HOLD_WEIGHED) and entry is not None:
        # what this hold takes, in GPU-equivalents of its type (service.model.physical)
        equivalents = float(hold_weights(entry, unit, [ref])[0])
    else:
        equivalents = 0.0 if ref.admin_access else float(unit.weight)
    batch.transition(
        type_,
        driver=device.driver,
        pool=device.pool,
        device=device.device,
        uuid=entry.device.uuid if entry is not None else None,
        request=result.request,
        share_id=result.share_id,
        consumed_capacity=dict(result.consumed_capacity),
        reason=reason,
        before_observation=type_ == ch.ALLOCATED and not observed,
        equivalents=equivalents,
        device_type=unit.type,
        device_model=(entry_product(entry) or "") if entry is not None else "",
        **claim_fields,
    )


def weigh_again(
    index: ClusterIndex,
    batch: Batch,
    device: DeviceKey,
    fields_of: Callable[[ObjectKey, ClaimRecord], dict[str, Any]],
    observed: bool,
) -> None:
    """`hold_weighed` for every hold on `device` (history rewrites the open allocations'
    weight: the lone device's was never the truth)."""
    refs = index.links.get(DEVICE_ALLOCATIONS, device)
    for key in sorted({ref.claim for ref in refs.values()} if refs else ()):
        claim = index.get(key)
        if not isinstance(claim, ClaimRecord):
            continue
        for (held, _), hold in holds_of(index.cluster, key, claim).items():
            if held == device:
                fields = fields_of(key, claim)
                hold_transition(index, batch, ch.HOLD_WEIGHED, device, hold, fields, observed)


def consumer_active(
    index: ClusterIndex, claim: ClaimRecord, consumer: Consumer, now: str
) -> tuple[bool, float | None]:
    """Whether the consumer keeps the claim from idleness (running, or starting within its
    grace: service.model.activity), and when that ends without an event."""
    cluster = index.cluster
    namespace = claim.meta.namespace
    if is_pod_group(consumer):
        members: Mapping[Any, None] = index.links.get(
            GROUP_PODS, (cluster, namespace, consumer.name)
        )
        if not members:
            return POD not in index.listed, None  # before the first Pod LIST: unknown
        return any(
            isinstance(pod := index.get(k), PodRecord) and pod.phase == RUNNING for k in members
        ), None
    if not is_pod(consumer):
        return True, None  # a consumer of a kind the mirror does not watch: assume in use
    pod = index.get(ObjectKey(cluster, POD, namespace, consumer.name))
    if not isinstance(pod, PodRecord):
        return POD not in index.listed, None  # before the first Pod LIST: in use
    if consumer.uid and pod.meta.uid and consumer.uid != pod.meta.uid:
        return False, None  # a new pod under the old name is not the consumer
    return activity(pod, index.idle_grace, now)


def idleness(index: ClusterIndex, claim: ClaimRecord | None, now: str) -> tuple[bool, float | None]:
    """Whether the claim is idle-held at `now`, and (when it is not only because consumers
    are starting) when the first of their graces ends."""
    if claim is None or claim.allocation is None:
        return False, None
    deadline: float | None = None
    for consumer in claim.reserved_for:
        active, ends = consumer_active(index, claim, consumer, now)
        if not active:
            continue
        if ends is None:
            return False, None
        deadline = ends if deadline is None else min(deadline, ends)
    return deadline is None, deadline
