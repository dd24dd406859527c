"""The whole mirror as one Starlette app: what `serve`, `watch` and `demo` run.

`mirror_app(settings, store=None, kubeconfig=None, resources=(), watch=True, slack=None,
access=None, role=API)`:

* `role` is what `/readyz` answers for (service.http.readiness): `API` — `serve`, whatever
  the shape — the state it serves; `WATCHER` — `watch` — the clusters whose leases it holds;

* `access` is the checked access configuration (`service.access.config.AccessConfig`): the
  app opens its authenticators first in its lifespan (Kubernetes reviews through the same
  kubeconfig; Slack user groups through Slack's Web API when `slack` has a bot token,
  `service.slack.directory`); None serves everything to everyone (the demo, tests);

* the state store is `store`, or the one the settings ask for (`stores.open_state_store`);
* with `history.database_url`, the history database is opened inside the app's lifespan
  (migrated by the watching process; `watch=False`, an API replica, neither migrates nor
  watches) and its sink follows the state store in every reactor;
* with `watch=True`, the clusters of the kubeconfig (`kubeconfig()`, asked inside the
  lifespan: the demo's simulator writes it at start; else `clusters.kubeconfig`) are watched
  into the store (`watching.watch_clusters`), every batch timed into `/metrics`;
* with `alerts` (`service.alerts.config`), the alert engine runs beside the reactors over
  their own indexes (with leased watchers: the clusters whose lease this replica holds), woken
  by every batch, its series in `/metrics` (`held-not-busy` asks the utilisation source);
* with a history and a utilisation source, the watching process records five-minute
  utilisation buckets of the clusters it has synced into the history
  (`utilization_recorder`, `service.history.utilization_recorder`);
* with `graphql_in_lifespan` (`serve`, `watch`), the schema and the GraphQL view are built in
  the lifespan once the watchers started, in a worker thread, while the first LISTs are on
  their way (`service.runtime.api`); the app serves once they are built;
* once every cluster synced: the heap built so far is moved out of the garbage collector's
  sight (`freeze_heap`), and for an in-process store the diagnostics' allocation ledgers are
  built (`diagnosis.prepare`) rather than by the first `explainClaim`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette

from dra_mirror.service.access.config import AccessConfig
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.alerts.config import AlertsConfig
from dra_mirror.service.alerts.engine import AlertEngine
from dra_mirror.service.alerts.metrics import AlertsCollector
from dra_mirror.service.alerts.rules import HELD_NOT_BUSY
from dra_mirror.service.http.readiness import API
from dra_mirror.service.http.state import AppState
from dra_mirror.service.http.watchers import Watchers
from dra_mirror.service.questions import diagnosis
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.runtime.stores import (
    StateStores,
    lease_settings,
    open_history,
    open_state_store,
)
from dra_mirror.service.runtime.watching import (
    WatchedClusters,
    reactor_settings,
    watch_clusters,
)
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack import SlackSettings
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import ChangeSink

if TYPE_CHECKING:  # SQLAlchemy and Alembic load only when a history database is configured
    from dra_mirror.service.history.runtime import History
    from dra_mirror.service.history.utilization_recorder import UtilizationRecorder
    from dra_mirror.service.utilization.config import UtilizationConfig

log = logging.getLogger(__name__)


def mirror_app(
    settings: Settings,
    *,
    store: StateStores | None = None,
    kubeconfig: Callable[[], str | None] | None = None,
    resources: Sequence[AbstractAsyncContextManager[Any]] = (),
    watch: bool = True,
    slack: SlackSettings | None = None,
    access: AccessConfig | None = None,
    alerts: AlertsConfig | None = None,
    utilization: UtilizationConfig | None = None,
    utilization_source: Any = None,
    role: str = API,
    graphql_in_lifespan: bool = False,
) -> Starlette:
    """See the module docstring."""
    state_store = store if store is not None else open_state_store(settings)
    source = utilization_source  # the demo's own (runtime.demo_prometheus), else the file's
    if (
        source is None and utilization is not None
    ):  # httpx's client loads only with a utilisation source
        from dra_mirror.service.utilization.source import PrometheusSource

        source = PrometheusSource(utilization)
        resources = [*resources, source]  # closed by the lifespan

    async def open_access() -> AccessControl:
        assert access is not None
        path = kubeconfig() if kubeconfig is not None else settings.clusters.kubeconfig
        directory = None
        if slack is not None:  # slack_sdk's web client loads only with Slack's settings
            from dra_mirror.service.slack.directory import SlackDirectory

            directory = SlackDirectory.from_settings(slack)
        if access.slack.user_groups and directory is None:
            log.warning("the access file maps Slack user groups, but no Slack bot token is "
                        "set (DRA_MIRROR_SLACK_BOT_TOKEN): those mappings match nobody")  # fmt: skip
        return await AccessControl.open(access, kubeconfig=path, slack_directory=directory)

    async def history() -> History:
        return await open_history(settings, upgrade=watch)

    async def start_watching() -> Watchers:
        mirror: AppState = app.state.mirror
        path = kubeconfig() if kubeconfig is not None else settings.clusters.kubeconfig
        sinks: list[ChangeSink] = []
        if mirror.history is not None:
            sinks.append(mirror.metrics.timed_sink(mirror.history.sink))
        engine = None
        watching: list[WatchedClusters] = []  # set below; the engine reads it when it runs
        if alerts is not None:  # beside the reactors: the clusters this process watches
            engine = alerting(alerts, lambda: synced_indexes(watching), store=state_store,
                              utilization=source)  # fmt: skip
            mirror.metrics.registry.register(AlertsCollector(engine))
            sinks.append(engine)  # each batch of changes wakes the evaluation
        watched = await watch_clusters(
            path,
            settings.clusters.contexts,
            store=state_store,
            writer=mirror.metrics.timed_store(state_store),
            sinks=sinks,
            lease=None if isinstance(state_store, MemoryStore) else lease_settings(settings),
            transitions=mirror.history is not None,  # history is what reads them
            settings=reactor_settings(settings),
        )
        watching.append(watched)
        watched.after_sync = _after_sync(watched, state_store)
        if mirror.history is not None and source is not None:
            recorder = utilization_recorder(mirror.history.engine, source, state_store,
                                            lambda: synced_indexes(watching))  # fmt: skip
            recorder.start()
            watched.also_stop.append(recorder.stop)
        if engine is not None:
            engine.start()
            watched.also_stop.append(engine.stop)
        return watched

    app = compose_app(
        settings,
        store=state_store,
        history=history if settings.history.database_url else None,
        watchers=start_watching if watch else None,
        access=open_access if access is not None else None,
        resources=resources,
        slack=slack,
        role=role,
        dra_metrics=watch,  # API replicas leave the DRA series to the watchers (no duplicates)
        graphql_in_lifespan=graphql_in_lifespan,
        utilization=source,
    )
    return app


def synced_indexes(watching: Sequence[WatchedClusters]) -> dict[str, Any]:
    """The index of every cluster watched here that has synced (every kind listed once).

    A cluster still listing is left out: between its claims and its pods, every allocated
    claim looks idle, and rules over such a half-read cluster would fire and resolve alerts
    for conditions that never held."""
    return {
        name: reactor.index
        for watched in watching
        for name, reactor in watched.by_name.items()
        if reactor.synced.is_set()
    }


def alerting(
    config: AlertsConfig, sources: Any, *, store: Any = None, utilization: Any = None
) -> AlertEngine:
    """The alert engine over `sources` (cluster -> index), posting to Slack when configured;
    with a Redis `store`, what it announced is kept in that Redis (its alert ledger), so a
    restart or a takeover neither repeats an announcement nor leaves one unresolved; with a
    `utilization` source, `held-not-busy` asks it (`not_busy_feed`)."""
    notifier = ledger = None
    if config.slack:
        from dra_mirror.service.alerts.slack import SlackNotifier  # slack_sdk's web client

        notifier = SlackNotifier(config.slack, web_url=config.web_url)
        if store is not None and not isinstance(store, MemoryStore):
            from dra_mirror.service.alerts.ledger import RedisAlertLedger

            ledger = RedisAlertLedger(store.redis, prefix=store.prefix)
    feed = None
    if utilization is not None and store is not None and HELD_NOT_BUSY in config.rules:
        feed = not_busy_feed(store, utilization, config.rules[HELD_NOT_BUSY])
    return AlertEngine(config, sources=sources, notifier=notifier, ledger=ledger, not_busy=feed)


def not_busy_feed(store: Any, source: Any, duration: float) -> Callable[[str], Any]:
    """A cluster's claims held, not busy (`questions.utilization.held_not_busy`), over a
    window long enough for a run below the threshold to reach `duration` seconds."""
    from dra_mirror.service.questions.asker import Asker
    from dra_mirror.service.questions.utilization import held_not_busy

    window = max(3600.0, 2 * source.not_busy_after, duration + 600.0)

    async def ask(cluster: str) -> Any:
        asker = Asker.over(store, utilization=source)
        return (await held_not_busy(asker, cluster, window=window, limit=100_000)).claims

    return ask


def utilization_recorder(
    engine: Any, source: Any, store: StateStores, clusters: Callable[[], Any]
) -> UtilizationRecorder:
    """The recorder of five-minute utilisation buckets into the history
    (`service.history.utilization_recorder`), over the synced clusters' GPU devices."""
    from dra_mirror.service.history.utilization_recorder import UtilizationRecorder
    from dra_mirror.service.model.utilization import GPU_DOMAIN

    async def devices(cluster: str) -> Any:
        return await store.list_devices(cluster=cluster, driver=GPU_DOMAIN, published=None)

    return UtilizationRecorder(engine, source, devices=devices, clusters=clusters)


def freeze_heap() -> None:
    """Move every object alive now out of the garbage collector's sight (`gc.freeze`).

    After the initial sync the state store holds millions of long-lived objects; without this,
    each full collection walks all of them and blocks the event loop for seconds (seen as
    multi-second p99 request latencies on the 5,000-node scenario). Objects created later are
    collected as usual."""
    gc.freeze()


def _after_sync(watched: WatchedClusters, store: StateStores) -> asyncio.Task[None]:
    async def settle() -> None:
        await watched.wait_synced()
        freeze_heap()
        log.info("every cluster synced once; initial state moved out of the GC's generations")
        if not isinstance(store, MemoryStore):
            # A shared store (Redis) is read by API replicas, which build the diagnostics'
            # ledgers at their first question; a watcher would only read the whole store back.
            return
        try:  # the allocation ledgers, built now rather than by the first explainClaim
            await diagnosis.prepare(store)
        except Exception:
            log.exception("preparing the diagnostics failed; they build on first use")

    return asyncio.create_task(settle(), name="after first sync")
