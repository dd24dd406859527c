"""Garbage collection by ownerReferences, as kube-controller-manager does it.

When an object is deleted, the objects whose `metadata.ownerReferences` name its uid are
deleted too, shortly after (background propagation): a Node's ResourceSlices, a Pod's
template-generated ResourceClaims. Dependents with finalizers get their deletionTimestamp
first, as with any delete. `DELETE …?propagationPolicy=Orphan` (or in DeleteOptions) leaves
the dependents alone.

The index of owner uid -> dependents is built from the store when serving starts and kept
current through the store's change listener; a dependent is deleted only if it still names
the owner when the collector runs, so a world that already deleted it loses nothing.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator

from dra_mirror.service.model.kinds import BY_PLURAL
from dra_mirror.service.sim.store import ClusterStore, Key, key_of


def owner_uids(obj: dict) -> Iterator[str]:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if isinstance(ref, dict) and isinstance(ref.get("uid"), str):
            yield ref["uid"]


class GarbageCollector:
    """Deletes dependents of deleted owners, `delay` seconds after the owner went."""

    def __init__(self, store: ClusterStore, *, delay: float = 0.1) -> None:
        self.store = store
        self.delay = delay
        self.orphaned: set[str] = set()  # owner uids deleted with propagationPolicy=Orphan
        self._dependents: dict[str, set[tuple[str, Key]]] = defaultdict(set)
        for plural in BY_PLURAL:
            for key in store.sorted_keys(plural):
                self._index(plural, key, store.stored(plural, key) or {"metadata": {}})
        store.add_listener(self._on_change)

    def _index(self, plural: str, key: Key, obj: dict) -> None:
        for uid in owner_uids(obj):
            self._dependents[uid].add((plural, key))

    def _on_change(self, event_type: str, plural: str, obj: dict) -> None:
        meta = obj["metadata"]
        if event_type != "DELETED":
            self._index(plural, key_of(BY_PLURAL[plural], meta.get("namespace"), meta["name"]), obj)
            return
        uid = meta.get("uid")
        if uid not in self._dependents:
            return
        if uid in self.orphaned:
            self.orphaned.discard(uid)
            self._dependents.pop(uid, None)
            return
        try:
            asyncio.get_running_loop().call_later(self.delay, self.collect, uid)
        except RuntimeError:
            self.collect(uid)

    def collect(self, owner_uid: str) -> None:
        """Delete what still names `owner_uid` as an owner."""
        for plural, key in sorted(self._dependents.pop(owner_uid, ())):
            obj = self.store.stored(plural, key)
            if obj is None or owner_uid not in set(owner_uids(obj)):
                continue
            if obj["metadata"].get("deletionTimestamp"):
                continue
            self.store.delete(plural, key[0] or None, key[1])
