"""Who asks a question in this process: what they may read, their history, their clock.

    asker = Asker.over(store)                                   everything, no history
    asker = Asker(reader=ScopedReader(store, scope), history=queries, now=clock)

Every question of this package takes an `Asker`: `reader` is the store seen through the
asker's scope (`service.questions.scoped.ScopedReader`; the graph's request reader is one),
`history` the history reads (None when no database is configured), `now` the clock that
ages ("waiting 3h") and that history is asked at. `known_clusters` and `check_cluster` say
which clusters the asker may ask about, and refuse any other name with `UnknownCluster`.

Promises: nothing here reads or writes but through `reader` and `history`; history outside
the asker's scope (`scope.history` false) is never asked, as if it were not configured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from dra_mirror.service.stores.protocols import StateReader

from .asking import HistoryOff, UnknownCluster
from .cluster_state import ScopedState
from .scoped import ReadScope, Scope, ScopedReader

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

    @classmethod
    def over(
        cls,
        store: StateReader,
        scope: ReadScope | None = None,
        *,
        history: HistoryQueries | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> Asker:
        """An asker reading `store` through `scope` (everything when None)."""
        return cls(ScopedReader(store, scope or Scope.everything()), history, now)

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
        """The clusters a question covers: `[cluster]`, or every one the asker may see;
        `UnknownCluster` for a name that is none of them."""
        known = await self.known_clusters()
        if cluster is None:
            return known
        if cluster not in known:
            raise UnknownCluster(cluster, known)
        return [cluster]
