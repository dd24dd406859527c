"""List and watch one kind of one cluster, forever, as raw JSON decoded into records.

The loop is three small functions (kopf's shape), each owning one concern:

* `watch_once` — one WATCH call from the current resourceVersion, with
  `allowWatchBookmarks=true` and a jittered `timeoutSeconds`; each line is decoded with
  `decode_watch_line`; events, malformed objects and bookmarks move the position forward.
  A 410 (HTTP status, or an ERROR event carrying a `Status` with code 410) raises `Expired`.
* `list_then_watch` — a paged LIST (`limit`, `continue`; an expired continue token restarts the
  list) handed on whole as one `Listed`, so the index can diff it against what it holds and
  emit deletes for objects that vanished while nobody watched; then `watch_once` again and
  again from the latest position until `Expired`, when it returns to be relisted.
* `run` — forever: on `Expired` relist at once (after a pause if the watch expired right
  after its list, so a broken server is not listed in a loop); on any other `ClusterError`
  keep the position, wait (exponential backoff with full jitter, or the server's Retry-After)
  and resume; on `NotServed` for a resource.k8s.io kind rediscover the version and relist.
  The backoff resets only when a watch delivers a line.

Everything observed leaves as a `WatchMessage` through `emit` (the reactor's queue; its
bound is the backpressure). Time is injected (`sleep`, `rng`) so tests run backoffs instantly.
Nothing here decides what an event means: that is the model's job.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from dra_mirror.service.clusters.backoff import Backoff
from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.errors import (
    BadResponse,
    ClusterError,
    Expired,
    NotServed,
    from_status,
)
from dra_mirror.service.clusters.resources import collection_path, is_dra
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.model.decode import decode_list, decode_watch_line
from dra_mirror.service.model.index import Event
from dra_mirror.service.model.normalize import MalformedObject
from dra_mirror.service.model.records import Record
from dra_mirror.service.model.sharing import SharedValues

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchSettings:
    """How the watchers talk to the API server."""

    page_size: int = 500
    """LIST `limit`: pages of a few hundred objects keep memory and GC work small."""
    watch_timeout: int = 300
    """WATCH `timeoutSeconds`; the server ends the stream then and we re-watch from there."""
    watch_timeout_jitter: float = 0.2
    """Up to this fraction is added to `watch_timeout`, so many watches do not renew at once."""
    stream_grace: float = 30.0
    """Seconds past `timeoutSeconds` before a silent stream counts as stalled (Unreachable)."""
    list_time_limit: float = 120.0
    """Upper bound for one LIST page request, seconds."""
    list_restarts: int = 3
    """How often an expired continue token restarts a LIST before it counts as a failure."""
    backoff_base: float = 0.5
    """First reconnect delay bound, seconds (then doubling, with full jitter)."""
    backoff_cap: float = 30.0
    """Longest computed reconnect delay, seconds."""
    retry_after_cap: float = 300.0
    """Longest Retry-After obeyed, seconds."""


class Listed(NamedTuple):
    """A complete LIST of one kind: the truth at `resource_version`."""

    kind: str
    records: list[Record]
    resource_version: str
    api_version: str


class Observed(NamedTuple):
    """One ADDED/MODIFIED/DELETED event."""

    kind: str
    event: Event
    resource_version: str


class Skipped(NamedTuple):
    """An object that does not decode into a record; the watch goes on without it.
    `resource_version` is the object's ("" when a list could not tell)."""

    kind: str
    malformed: MalformedObject
    resource_version: str


class Bookmarked(NamedTuple):
    """A BOOKMARK: nothing changed for this kind up to `resource_version`."""

    kind: str
    resource_version: str


class Connected(NamedTuple):
    """A watch stream opened (the cluster answers)."""

    kind: str
    api_version: str


class Failed(NamedTuple):
    """A request failed; the watcher retries after `retry_in` seconds (attempt counts up)."""

    kind: str
    error: ClusterError
    retry_in: float
    attempt: int


WatchMessage = Listed | Observed | Skipped | Bookmarked | Connected | Failed
Emit = Callable[[WatchMessage], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]


class KindWatcher:
    """Lists and watches one kind of one cluster; `resource_version` is its position."""

    def __init__(
        self,
        kind: str,
        *,
        api: ClusterApi,
        versions: DraVersions,
        emit: Emit,
        sleep: Sleep,
        settings: WatchSettings | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.kind = kind
        self.api = api
        self.cluster = api.cluster
        self.versions = versions
        self.emit = emit
        self.sleep = sleep
        self.settings = settings or WatchSettings()
        self.rng = rng or random.Random()
        self.backoff = Backoff(
            base=self.settings.backoff_base,
            cap=self.settings.backoff_cap,
            retry_after_cap=self.settings.retry_after_cap,
            rng=self.rng,
        )
        self.resource_version: str | None = None  # None: the next step is a (re)list
        self._received = 0  # lines of the current (or last) watch stream
        self.api_version = "v1"
        self.path = ""
        self._log = {"cluster": self.cluster, "kind": kind}
        self.shared = SharedValues()  # equal values of this kind's records as one object

    async def _resolve_path(self) -> None:
        if is_dra(self.kind):
            self.api_version = await self.versions.version()
            self.path = collection_path(self.kind, self.api_version)
        else:
            self.api_version = "v1"
            self.path = collection_path(self.kind)

    async def run(self) -> None:
        """List and watch until cancelled; never returns, never raises a ClusterError."""
        while True:
            try:
                await self.list_then_watch()
                # Expired: the position is gone; relist at once (client-go's reflector does).
                self.resource_version = None
                log.info("watch expired; relisting", extra=self._log)
                continue
            except NotServed as error:
                # The version answered 404 (switched off, or the cluster was downgraded):
                # discover again and relist whatever version is served now.
                if is_dra(self.kind):
                    self.versions.forget(self.api_version)
                self.resource_version = None
                failure: ClusterError = error
            except Expired as error:  # from a list, or a watch right after its list
                self.resource_version = None
                failure = error
            except ClusterError as error:
                failure = error
            except Exception as error:  # a bug must not end the watch: count it and go on
                log.exception("watch failed unexpectedly", extra=self._log)
                failure = BadResponse(f"{type(error).__name__}: {error}", cluster=self.cluster)
            delay = self.backoff.next_delay(failure.retry_after)
            log.warning(
                "%s; attempt %d, retrying in %.2fs from %s",
                failure,
                self.backoff.attempt,
                delay,
                f"resourceVersion {self.resource_version}" if self.resource_version else "a relist",
                extra=self._log,
            )
            await self.emit(Failed(self.kind, failure, delay, self.backoff.attempt))
            await self.sleep(delay)

    async def list_then_watch(self) -> None:
        """(Re)list if there is no position, then watch until the position expires (returns)."""
        fresh = False  # listed, and no watch line received since
        if self.resource_version is None:
            await self._resolve_path()
            records, version = await self.list_all()
            self.resource_version = version
            # No backoff reset yet: only a watch that delivers proves the position works.
            await self.emit(Listed(self.kind, records, version, self.api_version))
            fresh = True
        while True:
            await self._resolve_path()  # follows a cluster upgraded to a newer DRA version
            try:
                received = await self.watch_once()
            except Expired:
                if fresh and not self._received:
                    raise  # expired at once after a list: back off rather than relist in a loop
                return
            fresh = fresh and not received
            if received == 0:
                # Ended without a line (no bookmark either): do not hammer the server.
                await self.sleep(self.rng.uniform(0.0, self.settings.backoff_base))

    async def list_all(self) -> tuple[list[Record], str]:
        """Every object of the kind, page by page; malformed ones are emitted as `Skipped`."""
        restarts = 0
        while True:
            try:
                return await self._list_pages()
            except Expired:
                # The continue token outlived the server's window (etcd compaction): the
                # pages read so far are from a snapshot we can no longer finish. Start over.
                restarts += 1
                if restarts > self.settings.list_restarts:
                    raise
                log.info("list continue token expired; restarting the list", extra=self._log)

    async def _list_pages(self) -> tuple[list[Record], str]:
        records: list[Record] = []
        token: str | None = None
        while True:
            params: dict[str, str | int | bool] = {"limit": self.settings.page_size}
            if token:
                params["continue"] = token
            body = await self.api.get(self.path, params, time_limit=self.settings.list_time_limit)
            try:
                page = decode_list(self.kind, body, cluster=self.cluster, shared=self.shared)
            except (ValueError, msgspec.DecodeError) as error:
                raise BadResponse(
                    f"{self.path}: list body: {error}", cluster=self.cluster
                ) from error
            records.extend(page.records)
            for malformed in page.malformed:
                # The object's own resourceVersion when the model reports it; the list's
                # version would differ on every relist and make one object look like many.
                version = getattr(malformed, "resource_version", "") or ""
                await self.emit(Skipped(self.kind, malformed, version))
            if not page.continue_token:
                return records, page.resource_version
            token = page.continue_token

    def _timeout_seconds(self) -> int:
        jitter = self.rng.uniform(0.0, self.settings.watch_timeout_jitter)
        return max(1, round(self.settings.watch_timeout * (1.0 + jitter)))

    async def watch_once(self) -> int:
        """One WATCH call from `resource_version`; returns how many lines it carried."""
        timeout_seconds = self._timeout_seconds()
        params: dict[str, str | int | bool] = {
            "watch": True,
            "resourceVersion": self.resource_version or "",
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        received = self._received = 0
        limit = timeout_seconds + self.settings.stream_grace
        async with self.api.stream(self.path, params, time_limit=limit) as lines:
            await self.emit(Connected(self.kind, self.api_version))
            async for line in lines:
                try:
                    item = decode_watch_line(
                        self.kind, line, cluster=self.cluster, shared=self.shared
                    )
                except (ValueError, msgspec.DecodeError) as error:
                    raise BadResponse(
                        f"{self.path}: watch line: {error}", cluster=self.cluster
                    ) from error
                if item.type == "ERROR":
                    status = item.error or {}
                    raise from_status(
                        int(status.get("code") or 500), status, cluster=self.cluster, path=self.path
                    )
                received = self._received = received + 1
                if received == 1:
                    self.backoff.reset()
                if item.resource_version:
                    self.resource_version = item.resource_version
                if item.type == "BOOKMARK":
                    await self.emit(Bookmarked(self.kind, item.resource_version))
                elif item.malformed is not None:
                    await self.emit(Skipped(self.kind, item.malformed, item.resource_version))
                elif item.record is not None:
                    event = Event(item.type, item.record)
                    await self.emit(Observed(self.kind, event, item.resource_version))
        return received
