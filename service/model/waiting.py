"""Waiting claims: a claim waits while a pod that exists needs it and it is not allocated.

Rules (the claim side of the index calls `Waits.refresh` for a claim on each of its events,
and for the claims a pod references on each event of the pod that may change them):

* a claim **waits** while it is unallocated and at least one pod the index holds references
  it (the pod's spec names it, by its resolved name, or its status names it as its
  extended-resource claim: `claim_referrers`) and has not finished (phase neither Succeeded
  nor Failed). A claim nobody's pod uses — made by hand and left — is not waiting for
  anything, however long it stays unallocated;
* a wait ends **served** (`wait_ended` reason `allocated`) or **abandoned**: reason `deleted`
  (the claim was deleted) or `unreferenced` (no unfinished pod references it any more: the
  pod was deleted, finished, or its claims changed);
* a wait or a holding that began before the index had observed the cluster — before its
  claims and its pods were both listed once (`observe`) — carries `before_observation`: its
  start is when the mirror first saw it, not when it began, and audits leave it out of
  duration percentiles.

Before Pods are listed a claim's pods are unknown, so no claim waits yet: the first LIST of
pods starts the waits of what is waiting then, flagged `before_observation`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.records import ClaimRecord, ObjectKey, PodRecord
from dra_mirror.service.model.relations import CLAIM_REFERRERS

if TYPE_CHECKING:
    from dra_mirror.service.model.batch import Batch
    from dra_mirror.service.model.index import ClusterIndex

FINISHED = frozenset({"Succeeded", "Failed"})
SERVED = "allocated"
DELETED = "deleted"
UNREFERENCED = "unreferenced"
ABANDONED = frozenset({DELETED, UNREFERENCED})


class Waits:
    """Which claims wait now, and the transitions when that changes (see the docstring)."""

    def __init__(self, index: ClusterIndex) -> None:
        self._index = index
        self.waiting: set[ObjectKey] = set()
        self.observed = False  # claims and pods both listed once by this index

    def observe(self) -> None:
        self.observed = True

    def needed(self, key: ObjectKey) -> bool:
        """Whether an unfinished pod the index holds references the claim."""
        index = self._index
        for pod_key in index.links.get(CLAIM_REFERRERS, key):
            pod = index.get(pod_key)  # type: ignore[arg-type]  # claim_referrers: pod keys
            if isinstance(pod, PodRecord) and pod.phase not in FINISHED:
                return True
        return False

    def wants(self, key: ObjectKey, claim: ClaimRecord | None) -> bool:
        return claim is not None and claim.allocation is None and self.needed(key)

    def refresh(
        self, key: ObjectKey, claim: ClaimRecord | None, batch: Batch, fields: dict[str, Any]
    ) -> None:
        """Start or end the claim's wait as it stands now (`fields`: its transition fields)."""
        now = self.wants(key, claim)
        if now == (key in self.waiting):
            return
        if now:
            self.waiting.add(key)
            batch.transition(ch.WAIT_STARTED, before_observation=not self.observed, **fields)
            return
        self.waiting.discard(key)
        if claim is None:
            reason = DELETED
        elif claim.allocation is not None:
            reason = SERVED
        else:
            reason = UNREFERENCED
        batch.transition(ch.WAIT_ENDED, reason=reason, **fields)
