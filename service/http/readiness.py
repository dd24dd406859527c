"""The rules of `/readyz`: is this process's answer right enough to be sent traffic?

Pure: given what the caller found out — whether the state store answers, and the statuses of
the clusters this process answers for — `readiness(...)` decides, and says why in words a
person on call can act on. The rules, in order:

1. The state store must answer (a Redis that does not, or does not in time, makes every
   query fail with STATE_STORE_UNAVAILABLE): not ready, "state store unavailable: …".
2. Every cluster this process answers for must have synced — listed every kind once — and a
   cluster expected but without any status yet has not. A process that serves the API needs
   at least one cluster ("no cluster has reported yet"); a watcher does not. A process that
   serves the API (`serve`, with or without watching) answers for the clusters of the state
   it reads: in the split shape the shared statuses the watchers write to Redis, so an API
   replica is not ready while the shared state of a cluster is partial (a watcher that
   crashed mid-sync and whose successor has not relisted yet). A watcher (`watch`) answers
   for the clusters whose leases it holds; a standby holding none is ready.
3. A cluster that synced once but is not connected now (its API server is down, answers
   5xx, or a watch stalled) is served from the last state it sent. `cluster_down` says what
   that means: `serve-stale` — ready, and the body lists the cluster under "stale" (the
   GraphQL `clusters { status { connected lastEventAt } }` say since when); `not-ready` — not
   ready until it is connected again (a replica that watches other clusters too then takes
   no traffic for any of them).

The history database is not a rule: an outage of it delays history writes (nothing is lost,
the outbox holds them) and fails only the history queries, with their own error code.
`/healthz` has no rules at all: it answers while the process's event loop runs, so that a
dependency's outage never gets the pod restarted.

Who calls it: the app's `/readyz` route (`service.http.app`: 200 when ready, 503 otherwise,
`body()` as JSON), with the store's health from a read bounded by `STORE_TIMEOUT`
(`StateReader.clusters()`, which the API role needs anyway for the shared statuses) and the
rule from `Settings.readiness.cluster_down`. `API` and `WATCHER` name the two roles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dra_mirror.service.settings import READINESS_RULES
from dra_mirror.service.stores.protocols import ClusterStatus

SERVE_STALE, NOT_READY = READINESS_RULES
API, WATCHER = "api", "watcher"
STORE_TIMEOUT = 1.0
"""Seconds the state store has to answer a readiness check (a frozen Redis would otherwise hold
it for the client's socket timeout; Kubernetes' probe gives up after its `timeoutSeconds`)."""


class StoreHealth(NamedTuple):
    """Whether the state store answered the caller's probe, and if not why."""

    answers: bool
    detail: str = ""


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reasons: tuple[str, ...] = ()
    """Why not ready, one line each (empty when ready)."""
    stale: tuple[str, ...] = ()
    """Clusters served from their last state while they are not connected."""
    clusters: dict[str, str] = field(default_factory=dict)
    """Each cluster's state for the body: synced, stale, down, syncing, unknown."""

    @property
    def status_code(self) -> int:
        return 200 if self.ready else 503

    def body(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "reasons": list(self.reasons),
            "stale": list(self.stale),
            "clusters": dict(self.clusters),
        }


def readiness(
    *,
    store: StoreHealth,
    statuses: Iterable[ClusterStatus],
    cluster_down: str = SERVE_STALE,
    expected: Sequence[str] | None = None,
    need_a_cluster: bool = False,
) -> Readiness:
    """Ready or not, and why (see the module docstring). `statuses` are those of the clusters
    this process answers for; `expected` names clusters that must be among them (a
    configured cluster without a status has not synced), None: the statuses are all.
    `need_a_cluster`: no cluster at all is not ready (the API role), else ready (a standby)."""
    if cluster_down not in READINESS_RULES:
        raise ValueError(f"cluster_down must be one of {', '.join(READINESS_RULES)}")
    if not store.answers:
        detail = f": {store.detail}" if store.detail else ""
        return Readiness(False, (f"state store unavailable{detail}",))
    by_name = {status.name: status for status in statuses}
    names = sorted(set(by_name) | set(expected or ()))
    if not names and need_a_cluster:
        return Readiness(False, ("no cluster has reported yet",))
    reasons: list[str] = []
    stale: list[str] = []
    clusters: dict[str, str] = {}
    for name in names:
        status = by_name.get(name)
        if status is None:
            clusters[name] = "unknown"
            reasons.append(f"{name}: no status yet (not synced)")
        elif not status.synced:
            clusters[name] = "syncing"
            reasons.append(f"{name}: not synced yet{_because(status)}")
        elif status.connected:
            clusters[name] = "synced"
        elif cluster_down == SERVE_STALE:
            clusters[name] = "stale"
            stale.append(name)
        else:
            clusters[name] = "down"
            newest = max(filter(None, (status.last_event_at, status.last_sync_at)), default=None)
            as_of = f" (state as of {newest})" if newest else ""
            reasons.append(f"{name}: not connected{as_of}{_because(status)}")
    return Readiness(not reasons, tuple(reasons), tuple(stale), clusters)


def _because(status: ClusterStatus) -> str:
    return f"; error: {status.error}" if status.error else ""
