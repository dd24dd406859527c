"""Fragmentation: free GPU memory stranded in partition layouts, and the largest partition that
could be placed now, per node and DeviceClass (and per GPU).

`fragmentation(asker, cluster=None, node=None, class_name=None)` answers from the store, for
`cluster` or every synced cluster the asker may see, with
`service.diagnostics.fragmentation.fragmentation` over the whole cluster's state
(`cluster_state.read_whole_cluster`: a partition held by a claim the asker may not see is held)
and what it holds (`ledgers.ledger_of`, the ledger `plan` and `explainClaim` read). Rows name
GPUs, nodes and classes, never holders. A class no cluster in question has is `BadQuestion`.
"""

from __future__ import annotations

from dra_mirror.service.diagnostics.fragmentation import (
    GpuFragments,
    NodeFragmentation,
)
from dra_mirror.service.diagnostics.fragmentation import (
    fragmentation as derive,
)

from .asker import Asker
from .asking import BadQuestion
from .cluster_state import read_whole_cluster
from .ledgers import ledger_of

__all__ = ["GpuFragments", "NodeFragmentation", "fragmentation"]


async def fragmentation(
    asker: Asker,
    cluster: str | None = None,
    *,
    node: str | None = None,
    class_name: str | None = None,
) -> list[NodeFragmentation]:
    """Rows per cluster, node and class, sorted."""
    rows: list[NodeFragmentation] = []
    known: set[str] = set()
    for name in await asker.check_cluster(cluster):
        state = await read_whole_cluster(asker.reader, name)
        if state is None:
            continue
        known.update(state.classes)
        ledger = ledger_of(asker.reader.store, state)
        rows.extend(
            derive(name, state.devices, ledger, state.classes, node=node, class_name=class_name)
        )
    if class_name is not None and class_name not in known:
        where = f"cluster {cluster}" if cluster else "any cluster you may see"
        there = ", ".join(sorted(known)) or "none"
        raise BadQuestion(f"no DeviceClass {class_name} in {where}; there are: {there}")
    return rows
