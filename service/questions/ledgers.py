"""The allocation ledger a question reads: what is taken in a cluster, as the model derived it.

`ledger_of(reader, state)` gives the `service.diagnostics.ledger.Ledger` of a `ClusterState`
(cluster_state.py) read whole through `reader`:

* over the cluster's index when the store keeps it in this process (the in-memory store): the
  reactor folds every batch into it, so it is current with nothing to bring up to date, and
  the question reads it in place (the state was read with no `await` since);
* else (a store kept outside this process: Redis) over `Holdings` derived from the very state
  the question read, by the functions the index uses;
* a state a narrowed scope read is refused (ValueError): what a hidden claim holds would read
  as free.

`prepare(store)` compiles and answers every DeviceClass selector of every cluster ahead of the
first question (they are remembered per selector); the app runs it once every cluster has
synced.
"""

from __future__ import annotations

import asyncio

from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.model.holdings import Holdings
from dra_mirror.service.questions.cluster_state import ClusterState, read_cluster
from dra_mirror.service.stores.protocols import StateReader


def ledger_of(reader: StateReader, state: ClusterState) -> Ledger:
    """The ledger of the cluster `state` is of (see the module docstring)."""
    if not state.complete:
        raise ValueError(f"the ledger of {state.cluster} needs the whole cluster's state")
    index = reader.index(state.cluster)
    if index is not None:
        return Ledger(index)
    return Ledger(Holdings.build(state.devices, state.claims.records, slices=state.slices))


async def prepare(store: StateReader) -> int:
    """Answer every DeviceClass selector of every cluster the store holds, now rather than at
    the first question; yields to the event loop between clusters. Returns how many clusters
    it prepared."""
    prepared = 0
    for status in await store.clusters():
        state = await read_cluster(store, status.name)
        for device_class in state.classes.values():
            for expression in device_class.selectors:
                try:
                    compile_selector(expression).select(state.devices)
                except SelectorError:
                    continue  # explainClaim reports it when asked
        prepared += 1
        await asyncio.sleep(0)
    return prepared
