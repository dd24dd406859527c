"""What a kind's watcher knows of the cluster's resourceVersions: its position and resets.

`Positions` is the part of `KindWatcher` (service.clusters.watching) that keeps the watch's
position and the newest comparable version the kind served, reports evidence of a reset of
the cluster's versions to the cluster's `ClusterResets` (service.clusters.resets), says so
before relisting for one (`Failed(VersionsReset)`: the cluster is stale until the kind has
relisted), and checks a silent stream's position against the kind's current version (a
LIST of one object). A mixin: the attributes it reads are the watcher's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

import msgspec

from dra_mirror.service.clusters.backoff import Backoff
from dra_mirror.service.clusters.errors import ClusterError, Expired, TooLarge, VersionsReset
from dra_mirror.service.clusters.messages import Emit, Failed
from dra_mirror.service.clusters.resets import ClusterResets
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.model.decode import decode_list

log = logging.getLogger(__name__)


class Positions:
    """A watcher's position and the resets it takes part in (see the module docstring)."""

    kind: str
    cluster: str
    api: ClusterApi
    path: str
    emit: Emit
    backoff: Backoff
    resets: ClusterResets
    resource_version: str | None
    _reset_seen: int
    _highest: str | None
    _resetting: str | None
    _silent_for: float
    _log: dict[str, str]

    async def _until_reset(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run `work`; False (it is cancelled) when a reset of the cluster is reported first by
        another kind. Its errors propagate."""
        task = asyncio.ensure_future(work)
        reset = asyncio.ensure_future(self.resets.wait_beyond(lambda: self._reset_seen))
        try:
            await asyncio.wait({task, reset}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (task, reset):
                if not pending.done():
                    pending.cancel()
            await asyncio.gather(task, reset, return_exceptions=True)
        if task.cancelled():
            self._reset_seen = self.resets.generation
            return False
        task.result()
        return True

    def _forget_position(self) -> None:
        self.resource_version = None
        self._highest = None  # the versions served before a reset compare with nothing now

    def _report(self, evidence: str) -> None:
        self._reset_seen = self.resets.report(self.kind, evidence, seen=self._reset_seen)
        self._resetting = evidence

    async def _say_resetting(self) -> None:
        """Before relisting for a reset: the kind is stale until its LIST arrives."""
        if self._resetting is None:
            return
        error = VersionsReset(
            f"resourceVersions reset ({self._resetting}): relisting", cluster=self.cluster
        )
        silent, self._resetting, self._silent_for = self._silent_for, None, 0.0
        await self.emit(Failed(self.kind, error, 0.0, self.backoff.attempt, silent))

    def _noticed(self, error: Expired) -> None:
        """A 410 or "too large": the latter is evidence that the cluster's versions reset."""
        if isinstance(error, TooLarge):
            self._report(error.detail())
            self._forget_position()

    def _served(self, version: str) -> bool:
        """Note a version this kind served; False when it is older than one it served before,
        which only a reset of the cluster's versions explains (the caller reports it).
        `resets.comparable` and `older`, inlined: this runs once per watch event."""
        if not version or not (version.isascii() and version.isdigit()) or version[0] == "0":
            return True  # not comparable: never evidence
        highest = self._highest  # comparable, or None
        if highest is not None and (
            len(version) < len(highest) or (len(version) == len(highest) and version < highest)
        ):
            return False
        self._highest = version
        return True

    async def _check_position(self) -> bool:
        """On a silent stream, and after a stall: a kube-apiserver watching from a position it
        never reached (its versions went back) is silent, so ask for the kind's current
        version (a LIST of one object) and relist if it is older than the position (True:
        reported, the position forgotten)."""
        if self.resource_version is None:
            return False
        try:
            body = await self.api.get(self.path, {"limit": 1}, time_limit=30.0)
            current = decode_list(self.kind, body, cluster=self.cluster).resource_version
        except (ClusterError, ValueError, msgspec.DecodeError) as error:
            log.info("could not check the current version: %s", error, extra=self._log)
            return False
        if not self._served(current):
            self._report(f"current resourceVersion {current} is older than {self._highest}")
            self._forget_position()
            return True
        return False
