"""Rules 8 and 9 of `service.model.index`: which batch announces each group of facts complete.

Every index, seeded or fresh, says once which batch carries a group of facts complete
(`Changes.announced`): its first LIST of claims (`CLAIM_FACTS`: holds, reservations),
its first LIST of slices (`DEVICE_FACTS`), and the first batch after which claims are
announced and this index listed pods itself (`IDLE_FACTS`: idleness and waits, which both
need the pods; a fresh index re-announces there every claim idle or waiting by then). From
that batch on the index has observed the cluster (`waiting.Waits.observe`). After a seed, the first LIST of claims and the first of slices
re-announce the opening transitions of everything the index holds, but those the batch's own
diff opened (history takes the re-announcement of an open interval as a no-op).

`Announcements` keeps what was announced; the claim and device trackers say what is open.
Transitions are only built when the batch keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.batch import Batch, identity
from dra_mirror.service.model.claims_index import ClaimTracker
from dra_mirror.service.model.devices_index import DeviceTracker
from dra_mirror.service.model.records import (
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ClaimRecord,
    ObjectKey,
    Record,
)

_ANNOUNCED_KINDS = frozenset({RESOURCE_CLAIM, RESOURCE_SLICE})


class Announcements:
    """What one index has announced (see the module docstring)."""

    def __init__(
        self,
        cluster: str,
        *,
        claims: ClaimTracker,
        devices: DeviceTracker,
        claim_records: Mapping[ObjectKey, Record],
    ) -> None:
        self._cluster = cluster
        self._claims = claims
        self._devices = devices
        self._claim_records = claim_records
        self._unannounced: set[str] = set()  # kinds a seed holds and no LIST re-announced yet
        self._announced: set[str] = set()  # fact groups a batch carried complete
        self._own_lists: set[str] = set()  # kinds this index listed itself (a seed's do not count)

    def seeded(self) -> None:
        """The index starts from a seed holding records: its first LISTs re-announce them."""
        self._unannounced = set(_ANNOUNCED_KINDS)

    def listed(self, kind: str, batch: Batch) -> tuple[str, ...]:
        """`batch` folded a complete LIST of `kind`: re-announce what a seed held of it, and
        return the fact groups the batch makes complete for the first time."""
        if kind in self._unannounced:
            self._unannounced.discard(kind)
            self._announce(kind, batch)
        return self._complete(batch, kind)

    def _complete(self, batch: Batch, listed: str) -> tuple[str, ...]:
        found = []
        self._own_lists.add(listed)
        if listed == RESOURCE_CLAIM and ch.CLAIM_FACTS not in self._announced:
            found.append(ch.CLAIM_FACTS)
        if listed == RESOURCE_SLICE and ch.DEVICE_FACTS not in self._announced:
            found.append(ch.DEVICE_FACTS)
        self._announced.update(found)
        if (
            ch.IDLE_FACTS not in self._announced
            and ch.CLAIM_FACTS in self._announced
            and POD in self._own_lists
        ):
            if batch.keep_transitions:
                seen = {identity(t) for t in batch.transitions}
                scratch = Batch(self._cluster, batch.at)
                self._claims.announce_idle(scratch)
                batch.transitions.extend(t for t in scratch.transitions if identity(t) not in seen)
            self._announced.add(ch.IDLE_FACTS)
            found.append(ch.IDLE_FACTS)
            self._claims.waits.observe()  # what starts from now on, the mirror saw begin
        return tuple(found)

    def _announce(self, kind: str, batch: Batch) -> None:
        if not batch.keep_transitions:
            return
        # What the batch's own diff opened is not said twice.
        seen = {identity(t) for t in batch.transitions}
        scratch = Batch(self._cluster, batch.at)
        if kind == RESOURCE_CLAIM:
            for key, claim in self._claim_records.items():
                assert isinstance(claim, ClaimRecord)
                self._claims.announce(key, claim, scratch)
        else:
            self._devices.announce(scratch)
        batch.transitions.extend(t for t in scratch.transitions if identity(t) not in seen)
