"""One cluster's failed attempts, as its log tells them: once per backoff step, with a count.

Every kind of a cluster lists and watches on its own (`watching.KindWatcher`), so a cluster
that cannot be reached fails every kind at once, again at every backoff step: eight kinds
wrote eight WARNING lines per step, a hundred in half a minute, each saying the same thing.
`FailureLog` is shared by the watchers of one cluster (the reactor makes one per cluster,
beside its `ClusterResets`) and writes one WARNING per backoff step and kind of failure:

* a failure is logged when its attempt number is higher than any logged for the same kind of
  failure (its error class and HTTP status) since the cluster last answered every kind, so
  eight kinds failing alike at step 3 write one line, and one kind refused by RBAC while
  the others work still writes each of its own steps (every `backoff_cap` seconds at most,
  once the backoff is capped);
* the line says how many kinds are failing, how many failed attempts there were since the
  line before, and since when the cluster has been failing; the others go to DEBUG;
* when every failing kind has answered again (`recovered`), one INFO line says after how many
  failed attempts and how long.

Promises: no I/O but logging; time is injected (`clock`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from dra_mirror.service.clusters.errors import ClusterError

log = logging.getLogger("dra_mirror.service.clusters.watching")

Signature = tuple[str, int | None]


def signature(failure: ClusterError) -> Signature:
    """What makes two failures alike: the error's class and HTTP status."""
    return type(failure).__name__, failure.code


class FailureLog:
    """See the module docstring."""

    def __init__(self, cluster: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.cluster = cluster
        self.clock = clock
        self.failing: dict[str, int] = {}  # kind -> its attempt, while it fails
        self.logged: dict[Signature, int] = {}  # highest attempt logged, per kind of failure
        self.since: float | None = None  # when the cluster began failing
        self.unreported = 0  # failed attempts since the last WARNING line
        self.total = 0  # failed attempts since the cluster began failing

    def failed(
        self, kind: str, failure: ClusterError, attempt: int, delay: float, position: str
    ) -> bool:
        """Count one failed attempt of `kind`; log it if it is a new step. True: logged."""
        now = self.clock()
        if self.since is None:
            self.since = now
        self.failing[kind] = attempt
        self.total += 1
        self.unreported += 1
        key = signature(failure)
        extra = {"cluster": self.cluster, "kind": kind}
        if attempt <= self.logged.get(key, 0):
            log.debug(
                "%s; attempt %d, retrying in %.2fs from %s", failure, attempt, delay, position,
                extra=extra,
            )  # fmt: skip
            return False
        self.logged[key] = attempt
        kinds = len(self.failing)
        log.warning(
            "%s; attempt %d, retrying in %.2fs from %s (%d failed attempt%s since the last"
            " report; %d kind%s failing for %.0fs)",
            failure,
            attempt,
            delay,
            position,
            self.unreported,
            "" if self.unreported == 1 else "s",
            kinds,
            "" if kinds == 1 else "s",
            now - self.since,
            extra=extra,
        )
        self.unreported = 0
        return True

    def recovered(self, kind: str) -> None:
        """`kind` answers again; once every failing kind does, say so and start afresh."""
        if self.failing.pop(kind, None) is None or self.failing:
            return
        since = self.since if self.since is not None else self.clock()
        log.info(
            "%s: every kind answers again after %d failed attempt%s over %.0fs",
            self.cluster,
            self.total,
            "" if self.total == 1 else "s",
            self.clock() - since,
            extra={"cluster": self.cluster, "kind": kind},
        )
        self.logged.clear()
        self.since = None
        self.unreported = self.total = 0
