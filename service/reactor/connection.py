"""What a cluster's reactor says of its connection: connected, stale, synced, and the gaps.

`ClusterConnectionState` is the part of the `Reactor` (service.reactor.cluster) that keeps
the cluster's `ClusterStatus` connection fields from what the watchers report: a kind is up
once its stream or LIST answered, failing while its last request failed (not an error for an
optional kind the cluster does not serve), silent while its stream is past its bookmark
deadline. The cluster is `connected` while every kind is up and none is silent (else it is
served as `stale`, the first failure or silence as `error`); it is a GAP in history only
while a kind failed — from when that stream was last heard to when every kind is up again,
and a gap of no length is none. Synced once every kind was listed (or is known not to be
served). A mixin: the attributes it reads are the reactor's.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.resources import is_dra
from dra_mirror.service.model.kinds import OPTIONAL
from dra_mirror.service.reactor.clock import Clock, rfc3339
from dra_mirror.service.stores.protocols import ClusterStatus

log = logging.getLogger(__name__)


class ClusterConnectionState:
    """The connection part of a reactor's status (see the module docstring)."""

    status: ClusterStatus
    versions: DraVersions
    clock: Clock
    kinds: tuple[str, ...]
    listed: set[str]
    synced: asyncio.Event
    _unserved: set[str]
    _failing: dict[str, str]
    _up: set[str]
    _silent: dict[str, float]
    _watching: bool
    _disconnected_at: str | None
    _gaps: list[tuple[str, str]]
    _status_due: bool
    _status_pushed_at: float
    _log: dict[str, str]

    def _at(self) -> str:
        return rfc3339(self.clock())

    def _dra(self, *, served: bool) -> None:
        versions = list(self.versions.listed)  # what discovery lists, served or not
        if (served, versions) != (self.status.dra_served, self.status.dra_versions):
            self.status.dra_served, self.status.dra_versions = served, versions
            self._status_due = True

    def _served_at(self, kind: str, version: str) -> None:
        if kind in OPTIONAL:
            self._optional_version(kind, version)
        elif is_dra(kind):
            self._status_due |= self.status.api_version != version
            self.status.api_version = version
            self._dra(served=True)

    def _optional_version(self, kind: str, version: str | None) -> None:
        if kind not in self.status.optional or self.status.optional[kind] != version:
            self.status.optional = {**self.status.optional, kind: version}
            self._status_due = True

    def _mark_up(self, kind: str) -> None:
        if kind in self._up and kind not in self._failing and kind not in self._silent:
            return
        self._up.add(kind)
        self._failing.pop(kind, None)
        self._silent.pop(kind, None)
        self._refresh_connection()

    def _refresh_connection(self, *, silent_for: float = 0.0) -> None:
        failures = [*self._failing.values()]
        failures += [f"{kind}: no event or bookmark for {seconds:.0f}s (possibly stale)"
                     for kind, seconds in sorted(self._silent.items())]  # fmt: skip
        errors = sorted(set(failures))
        watching = bool(self._up) and self._failing.keys() <= self._unserved | OPTIONAL
        # served as `stale`, not `synced`, while a stream is silent past its bookmark deadline
        connected = watching and not self._silent
        # One failure is enough to say what is wrong; the log has every attempt.
        error = (
            errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
            if errors
            else None
        )
        if self._watching and not watching:
            self._disconnected_at = rfc3339(self.clock() - timedelta(seconds=silent_for))
        elif watching and not self._watching and self._disconnected_at is not None:
            # Events may have been missed (or arrive late) in between: history marks the gap,
            # unless no time passed at all (a zero-length gap is no gap).
            start, end = self._disconnected_at, self._at()
            if start < end:
                self._gaps.append((start, end))
            self._disconnected_at = None
        self._watching = watching
        if (connected, error) != (self.status.connected, self.status.error):
            self.status.connected = connected
            self.status.error = error
            self._status_pushed_at = float("-inf")  # push state changes at once
        self._status_due = True

    def _check_synced(self) -> None:
        if self.synced.is_set():
            return
        tried = self.listed | self._unserved | (OPTIONAL & self._failing.keys())
        if tried.issuperset(self.kinds):  # an optional kind is not waited for once it failed
            self.status.synced = True
            self.synced.set()
            self._status_pushed_at = float("-inf")
            self._status_due = True
            log.info("synced: every kind listed once", extra=self._log)
