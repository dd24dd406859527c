"""A pod's devices: the claims a pod uses and the devices allocated to them, from the store.

`pod_devices(asker, namespace, name, cluster=None)` gives, for the pod of that name in
`cluster` (or in every cluster the asker sees that has one), its phase and node, the
ResourceClaims it uses (`claim_names`: its resolved pod claims, then the claim made for its
extended-resource requests) and, per allocation result of those claims, the device (name,
uuid, model, node, status) with the claim and request that took it. A claim not allocated yet
is listed in `pending`; one that does not exist (not created yet, or outside the scope) in
`missing`. A pod outside the asker's scope does not exist: the answer is empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dra_mirror.service.model.physical import entry_product
from dra_mirror.service.model.records import (
    POD,
    RESOURCE_CLAIM,
    ClaimRecord,
    DeviceKey,
    ObjectKey,
    PodRecord,
)

from .asker import Asker
from .holdings import device_statuses

__all__ = ["PodDevice", "PodDevices", "claim_names", "pod_devices"]


def claim_names(pod: PodRecord) -> list[str]:
    """Names of the ResourceClaims the pod uses: its resolved claims and its
    extended-resource claim."""
    names = [c.claim_name for c in pod.claims if c.claim_name]
    if pod.extended_claim_name:
        names.append(pod.extended_claim_name)
    return list(dict.fromkeys(names))


@dataclass
class PodDevice:
    claim: str  # the ResourceClaim's name (in the pod's namespace)
    request: str
    driver: str
    pool: str
    device: str
    node: str | None
    uuid: str | None
    model: str | None
    status: str | None  # FREE, HELD, SHARED, BLOCKED (None: gone)
    share_id: str | None = None


@dataclass
class PodDevices:
    cluster: str
    namespace: str
    pod: str
    phase: str
    node: str | None
    claims: list[str] = field(default_factory=list)
    devices: list[PodDevice] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # claims not allocated yet
    missing: list[str] = field(default_factory=list)  # claims not there (or not visible)


async def pod_devices(
    asker: Asker, namespace: str, name: str, cluster: str | None = None
) -> list[PodDevices]:
    """The pod's claims and devices, one answer per cluster holding such a pod."""
    clusters = await asker.check_cluster(cluster)
    reader = asker.reader
    found = await reader.get([ObjectKey(c, POD, namespace, name) for c in clusters])
    answers = []
    for pod in found:
        if not isinstance(pod, PodRecord):
            continue
        meta = pod.meta
        answer = PodDevices(cluster=meta.cluster, namespace=namespace, pod=name,
                            phase=pod.phase, node=pod.node_name, claims=claim_names(pod))  # fmt: skip
        keys = [ObjectKey(meta.cluster, RESOURCE_CLAIM, namespace, c) for c in answer.claims]
        claims = await reader.get(keys) if keys else []
        results = []
        for claim_name, claim in zip(answer.claims, claims, strict=True):
            if not isinstance(claim, ClaimRecord):
                answer.missing.append(claim_name)
            elif claim.allocation is None:
                answer.pending.append(claim_name)
            else:
                results += [(claim_name, r) for r in claim.allocation.results]
        device_keys = [DeviceKey(meta.cluster, r.driver, r.pool, r.device) for _, r in results]
        entries = await reader.devices(device_keys) if device_keys else []
        statuses = await device_statuses(reader, device_keys, entries)
        for (claim_name, r), entry, status in zip(results, entries, statuses, strict=True):
            answer.devices.append(
                PodDevice(
                    claim=claim_name, request=r.request, driver=r.driver, pool=r.pool,
                    device=r.device, node=entry.node if entry else None,
                    uuid=entry.device.uuid if entry else None,
                    model=entry_product(entry) if entry else None,
                    status=status, share_id=r.share_id,
                )
            )  # fmt: skip
        answers.append(answer)
    return answers
