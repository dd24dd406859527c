"""What the app's routes share, for as long as the app lives: `AppState`.

`AppState(settings, store, role=..., dra_metrics=..., scope_for=..., now=...)` is built by the
composition root (`service.runtime`) and handed to `create_app`; the routes read it as
`request.app.state.mirror`. The runtime's lifespan fills in what it opens — `access` first,
then `history`, then `reactors` (the watchers) — and records why a start failed
(`note_startup_error`, read by `serve` to say why it stops).

* `readiness()` — whether this process is ready for traffic, and why not
  (`service.http.readiness`, for the app's `role`): `API` (`serve`, embedded, all-in-one or
  `--no-watch`) answers for the state it serves — the statuses the state store holds, every
  cluster its watchers are configured for (else `clusters.contexts`) expected among them;
  `WATCHER` (`watch`) answers for the clusters whose leases it holds now (their reactors'
  statuses). Both need the state store to answer within `readiness.STORE_TIMEOUT`;
* `notes()` — what a ready mirror should still say: each cluster that serves no DRA version
  the mirror reads;
* `metrics` — the app's `/metrics` (`service.http.metrics`; the DRA series unless
  `dra_metrics=False`);
* `scope_for(request)` — each request's access scope (by default the subject the access gate
  stored, `service.http.access.scope_for`); `now()` — the clock of time-derived fields such
  as `pendingSeconds`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.http.access import scope_for as subject_scope
from dra_mirror.service.http.metrics import Metrics
from dra_mirror.service.http.readiness import (
    API,
    STORE_TIMEOUT,
    WATCHER,
    Readiness,
    StoreHealth,
    readiness,
)
from dra_mirror.service.http.watchers import Watchers
from dra_mirror.service.model.kinds import DRA_VERSIONS
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.protocols import ClosableReader, ClusterStatus, StoreUnavailable

if TYPE_CHECKING:  # SQLAlchemy and Alembic load only when a history database is configured
    from dra_mirror.service.history.runtime import History
    from dra_mirror.service.questions.scoped import ReadScope

ScopeFor = Callable[[Any], "ReadScope"]


def utc_now() -> datetime:
    """The clock of time-derived fields (`schema.context`'s, without importing the schema)."""
    return datetime.now(UTC)


class AppState:
    """What the routes share; lives as long as the app (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        store: ClosableReader,
        *,
        role: str = API,
        dra_metrics: bool = True,
        scope_for: ScopeFor | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        if role not in (API, WATCHER):
            raise ValueError(f"role must be {API!r} or {WATCHER!r}, not {role!r}")
        self.now = now or utc_now
        self.role = role
        self.settings = settings
        self.store = store
        self.history: History | None = None  # opened by the lifespan
        self.utilization: Any = None  # dcgm readings (service.utilization), when configured
        self.scope_for = scope_for or subject_scope
        self.reactors: Watchers | None = None  # started by the lifespan
        self.access: AccessControl | None = None  # opened first by the lifespan
        self.metrics = Metrics(self, dra=dra_metrics)
        self.startup_error: BaseException | None = None  # why the lifespan failed to start
        self.started = False

    def note_startup_error(self, _type: Any, error: BaseException | None, _tb: Any) -> bool:
        """An exit callback of the lifespan: keep why the start failed (never swallows it)."""
        if error is not None and not self.started:
            self.startup_error = error
        return False

    async def notes(self) -> list[str]:
        """What a ready mirror should still say: each cluster that serves no DRA version the
        mirror reads (its pods and nodes are mirrored, nothing of DRA is)."""
        try:
            async with asyncio.timeout(STORE_TIMEOUT):
                statuses = await self.store.clusters()
        except (StoreUnavailable, TimeoutError):
            return []
        return [
            f"{s.name}: DRA is not served (resource.k8s.io versions served: "
            f"{', '.join(s.dra_versions) or 'none'}; the mirror reads {', '.join(DRA_VERSIONS)}): "
            "pods and nodes are mirrored"
            for s in statuses
            if s.dra_served is False
        ]

    async def readiness(self) -> Readiness:
        """Whether this process is ready for traffic, and why not (service.http.readiness)."""
        shared: list[ClusterStatus] = []
        try:
            async with asyncio.timeout(STORE_TIMEOUT):
                shared = await self.store.clusters()
            health = StoreHealth(True)
        except StoreUnavailable as error:
            health = StoreHealth(False, str(error))
        except TimeoutError:
            health = StoreHealth(False, f"no answer within {STORE_TIMEOUT:g} s")
        rule = self.settings.readiness.cluster_down
        watchers = self.reactors
        if self.role == WATCHER and watchers is not None:
            held = [reactor.status for reactor in list(watchers.by_name.values())]
            return readiness(store=health, statuses=held, cluster_down=rule)
        expected = watchers.clusters if watchers is not None else self.settings.clusters.contexts
        return readiness(
            store=health,
            statuses=shared,
            cluster_down=rule,
            expected=list(expected) or None,
            need_a_cluster=True,
        )
