"""Garbage-collector settings for an initial sync.

An initial sync builds a large, long-lived heap fast (a 5,000-node cluster: ~90,000 records
and their indexes, about a million objects the collector tracks) and almost no cyclic garbage.
CPython's generational GC runs a young collection every 700 allocations and, as survivors
pile up in the older generations, walks them again and again: measured on that cluster, more
than half of the sync time. `SyncGc` raises the thresholds while clusters sync, then moves
what was built to the permanent generation (`gc.freeze()`: it lives as long as the process)
and restores them:

* the youngest generation's to two million objects: a young collection walks every object
  built since the last one, so a sync of 5,000 nodes runs none and a larger one walks what it
  built about once (at 100,000, sixteen young collections took ~0.25-0.35 s of that sync and
  freed nothing); it also bounds the cyclic garbage a sync can hold back;
* the middle one's to 100 young collections, so that what survived once is not walked again
  and again (each middle collection of that sync walked everything built so far: ~0.3 s of
  a 6 s sync).

Process-wide by nature, like the collector itself: whoever starts the watchers decides
(`run_reactors(tune_gc=...)`), and `serve` and `watch` hold one from their start until the app
has started (the imports and the schema build long-lived objects too). Tunings may overlap
(two sets of watchers starting at once); the thresholds seen before the first one are restored
when the last one ends, whatever the order, so a tuning that ends early never leaves the raised
threshold behind. `end_after` ends a tuning when its clusters have synced, or after
`SYNC_GC_LIMIT` seconds without that: a cluster that cannot be reached, or a standby replica
that holds no lease, must not keep the collector held back for good.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable

SYNC_GC_LIMIT = 300.0  # seconds; a 10,000-node sync takes ~6 s in memory, ~15 s into Redis


class SyncGc:
    """Raised GC thresholds from construction until `done()` (idempotent): the youngest
    generation's to `threshold` allocations, the middle one's to `older` young collections."""

    _active = 0
    _saved: tuple[int, ...] = ()

    def __init__(self, threshold: int = 2_000_000, older: int = 100) -> None:
        if SyncGc._active == 0:
            SyncGc._saved = gc.get_threshold()
        SyncGc._active += 1
        self.saved = SyncGc._saved
        young, middle, *oldest = self.saved
        gc.set_threshold(max(threshold, young), max(older, middle), *oldest)
        self.active = True

    def done(self, *, freeze: bool = True) -> None:
        """Restore the thresholds; `freeze` what was built (not when stopped before sync)."""
        if not self.active:
            return
        self.active = False
        if freeze:
            gc.freeze()
        SyncGc._active -= 1
        if SyncGc._active == 0:
            gc.set_threshold(*SyncGc._saved)


async def end_after(
    sync_gc: SyncGc, synced: Awaitable[None], *, limit: float = SYNC_GC_LIMIT
) -> None:
    """End `sync_gc` once `synced` returns (freezing what the sync built), or after `limit`
    seconds without it (nothing frozen); at once and unfrozen when cancelled."""
    try:
        await asyncio.wait_for(synced, limit)
    except TimeoutError:
        sync_gc.done(freeze=False)
        return
    except asyncio.CancelledError:
        sync_gc.done(freeze=False)
        raise
    sync_gc.done()
