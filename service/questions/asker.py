"""Who asks a question in this process: what they may read, their history, their clock.

    asker = Asker.over(store)                                   everything, no history
    asker = Asker(reader=ScopedReader(store, scope), history=queries, now=clock)

Every question of this package takes an `Asker`: `reader` is the store seen through the
asker's scope (`service.questions.scoped.ScopedReader`; the graph's request reader is one),
`history` the history reads (None when no database is configured), `now` the clock that
ages ("waiting 3h") and that history is asked at, `utilization` the dcgm readings (None when
no utilisation source is configured). `known_clusters` and `check_cluster` say
which clusters the asker may ask about, and refuse any other name with `UnknownCluster`; a
question about a cluster that has not synced yet (its first LIST of every kind not done) is
refused with `NotSynced`, and one about every cluster covers the synced ones (`NotSynced` when
none is): a partial state would answer "0 free" for a cluster still being listed.

Promises: nothing here reads or writes but through `reader` and `history`; history outside
the asker's scope (`scope.history` false) is never asked, as if it were not configured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dra_mirror.service.stores.protocols import StateReader

from .asking import HistoryOff, NotSynced, UnknownCluster
from .cluster_state import ScopedState
from .scoped import ReadScope, Scope, ScopedReader
from .utilization_source import UtilizationReads

if TYPE_CHECKING:  # SQLAlchemy loads only when a history database is configured
    from dra_mirror.service.history.queries import HistoryQueries

__all__ = ["Asker", "utc_now"]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Asker:
    reader: ScopedState
    history: HistoryQueries | None = None
    now: Callable[[], datetime] = field(default=utc_now)
    utilization: UtilizationReads | None = None  # dcgm readings (None: not configured)

    @classmethod
    def over(
        cls,
        store: StateReader,
        scope: ReadScope | None = None,
        *,
        history: HistoryQueries | None = None,
        now: Callable[[], datetime] = utc_now,
        utilization: UtilizationReads | None = None,
    ) -> Asker:
        """An asker reading `store` through `scope` (everything when None)."""
        return cls(ScopedReader(store, scope or Scope.everything()), history, now, utilization)

    @property
    def scope(self) -> ReadScope:
        return self.reader.scope  # type: ignore[return-value]

    def history_reads(self) -> HistoryQueries:
        """The history reads, or `HistoryOff` saying why there are none."""
        if not self.scope.history:
            raise HistoryOff("history is not in your access scope", code="FORBIDDEN")
        if self.history is None:
            raise HistoryOff("history is not configured (set DRA_MIRROR_HISTORY_DATABASE_URL)")
        return self.history

    @property
    def sees_history(self) -> bool:
        return self.history is not None and self.scope.history

    async def known_clusters(self) -> list[str]:
        """The clusters the asker may see, by name."""
        return sorted(s.name for s in await self.reader.clusters())

    async def check_cluster(self, cluster: str | None) -> list[str]:
        """The clusters a question covers: `[cluster]`, or every synced one the asker may see;
        `UnknownCluster` for a name that is none of them, `NotSynced` for a cluster (or, asked
        about every cluster, all of them) not synced yet."""
        statuses = {s.name: s for s in await self.reader.clusters()}
        errors = {name: s.error for name, s in statuses.items()}
        if cluster is None:
            synced = sorted(name for name, s in statuses.items() if s.synced)
            if statuses and not synced:
                raise NotSynced(list(statuses), errors)
            return synced
        status = statuses.get(cluster)
        if status is None:
            raise UnknownCluster(cluster, list(statuses))
        if not status.synced:
            raise NotSynced([cluster], errors)
        return [cluster]

    async def unsynced(self) -> list[str]:
        """The clusters the asker may see that have not synced yet (left out of questions
        about every cluster)."""
        return sorted(s.name for s in await self.reader.clusters() if not s.synced)
