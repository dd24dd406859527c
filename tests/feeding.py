"""Feeding a state store the way its cluster's reactor does: through the index it opens.

A store derives nothing: the in-memory store IS the index its writer folds into, the Redis
store writes what each Changes says. Tests that hold records (a fixture world) fold them with
`feed(store, cluster, upserts=..., deletes=...)`: the cluster's index is opened once per store
(`store.open_index`), the records are folded as one batch, and the batch's Changes handed to
`store.apply` (which writes and publishes them, or only publishes its live events).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.records import Record
from dra_mirror.service.stores.protocols import StateWriter

_OPENED: weakref.WeakKeyDictionary[StateWriter, dict[str, ClusterIndex]] = (
    weakref.WeakKeyDictionary()
)


def index_of(store: StateWriter, cluster: str) -> ClusterIndex:
    """The index this store serves for `cluster`, opened the first time it is asked for."""
    opened = _OPENED.setdefault(store, {})
    index = opened.get(cluster)
    if index is None:
        index = opened[cluster] = store.open_index(cluster)
    return index


async def feed(
    store: StateWriter,
    cluster: str,
    *,
    upserts: Iterable[Record] = (),
    deletes: Iterable[Record] = (),
    at: str,
) -> Changes:
    events = [Event("DELETED", r) for r in deletes] + [Event("MODIFIED", r) for r in upserts]
    changes = index_of(store, cluster).apply(events, at=at)
    await store.apply(changes)
    return changes
