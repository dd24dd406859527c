"""List and watch one kind of one cluster, forever, as raw JSON decoded into records.

The loop is three small functions (kopf's shape), each owning one concern:

* `watch_once` — one WATCH call from the current resourceVersion, with
  `allowWatchBookmarks=true` and a jittered `timeoutSeconds`; each line is decoded with
  `decode_watch_line`; events, malformed objects and bookmarks move the position forward
  (once emitted: a message the queue did not take is never skipped). A 410 (HTTP status, or
  an ERROR event carrying a `Status` with code 410) raises `Expired`. A stream silent for
  `stall_intervals` bookmark intervals raises `WatchStalled`; one silent past its bookmark
  deadline is reported `Silent` (possibly stale), and every `position_check_interval` of
  silence the kind's current version is compared with the position (see `stalls`).
* `list_then_watch` — a paged LIST (`limit`, `continue`; an expired continue token restarts the
  list; the next page is asked for while one is decoded, `pages.PagedList`) handed on whole as one `Listed`, so the index can diff it against what it holds and
  emit deletes for objects that vanished while nobody watched; then `watch_once` again and
  again from the latest position until `Expired`, when it returns to be relisted.
* `run` — forever: on `Expired` relist at once (after a pause if the watch expired right
  after its list, so a broken server is not listed in a loop); on a stall report it and watch
  again at once, after checking that the kind's current version is not older than the
  position; on any other `ClusterError` keep the position, wait (exponential backoff with full
  jitter, or the server's Retry-After) and resume; on `NotServed` for a resource.k8s.io kind
  rediscover the version (the kind's own, for DeviceTaintRule) and relist; a DeviceTaintRule
  served at none of its versions is asked for again only when discovery's answer ages. The backoff resets only when a watch delivers a line.

Every kind of a cluster shares one `ClusterResets` (see `resets`; the watcher's side of it,
its position, is `positions`): evidence that the
cluster's resourceVersions were reset — "too large resource version", or a version older than
one this kind already served — is reported there, and then every kind drops its position and
relists (a watch in progress is ended; a watcher waiting to retry relists when it retries),
each first saying so with `Failed(VersionsReset)`: the cluster is stale until it relisted.

Everything observed leaves as a `WatchMessage` (`messages`) through `emit` (the reactor's
queue; its bound is the backpressure). Time is injected (`sleep`, `clock`, `rng`) so tests
run backoffs and stalls instantly. Nothing here decides what an event means: that is the
model's job.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import AsyncIterator, Callable

import msgspec

from dra_mirror.service.clusters.backoff import Backoff
from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.errors import (
    BadResponse,
    ClusterError,
    Expired,
    NotServed,
    TooLarge,
    VersionsReset,
    WatchStalled,
    from_status,
)
from dra_mirror.service.clusters.messages import (
    Bookmarked,
    Connected,
    Emit,
    Failed,
    Listed,
    Observed,
    Silent,
    Skipped,
    Sleep,
    WatchMessage,
)
from dra_mirror.service.clusters.pages import PagedList
from dra_mirror.service.clusters.positions import Positions
from dra_mirror.service.clusters.resets import ClusterResets
from dra_mirror.service.clusters.resources import collection_path, discovered
from dra_mirror.service.clusters.settings import WatchSettings as WatchSettings
from dra_mirror.service.clusters.stalls import PositionGone, StallWatch
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.model.decode import decode_list, decode_watch_line
from dra_mirror.service.model.index import Event
from dra_mirror.service.model.records import Record
from dra_mirror.service.model.sharing import SharedValues

log = logging.getLogger(__name__)


class KindWatcher(Positions):
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
        resets: ClusterResets | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kind = kind
        self.api = api
        self.cluster = api.cluster
        self.versions = versions
        self.emit = emit
        self.sleep = sleep
        self.clock = clock
        self.settings = settings or WatchSettings()
        self.rng = rng or random.Random()
        self.resets = resets or ClusterResets(self.cluster)
        self.backoff = Backoff(
            base=self.settings.backoff_base,
            cap=self.settings.backoff_cap,
            retry_after_cap=self.settings.retry_after_cap,
            rng=self.rng,
        )
        self.resource_version: str | None = None  # None: the next step is a (re)list
        self.stalls = 0  # streams ended for silence
        self._received = 0  # lines of the current (or last) watch stream
        self._reset_seen = self.resets.generation  # the last reset this kind relisted after
        self._highest: str | None = None  # newest comparable version this kind served
        self._resetting: str | None = None  # a reset this kind relists for, not said yet
        self._silent_for = 0.0  # the silence of the stream a reset was found on
        self.api_version = "v1"
        self.path = ""
        self._log = {"cluster": self.cluster, "kind": kind}
        self.shared = SharedValues()  # equal values of this kind's records as one object

    async def _resolve_path(self) -> None:
        if discovered(self.kind):
            self.api_version = await self.versions.version_of(self.kind)
            self.path = collection_path(self.kind, self.api_version)
        else:
            self.api_version = "v1"
            self.path = collection_path(self.kind)

    async def run(self) -> None:
        """List and watch until cancelled; never returns, never raises a ClusterError."""
        while True:
            if self.resets.generation > self._reset_seen:
                # Another kind saw this cluster's versions reset: our position may name a
                # moment the server never reached. Relist, and forget what we served.
                self._reset_seen = self.resets.generation
                self._forget_position()
                self._resetting = self.resets.reason or "another kind saw it"
                log.info("relisting after a reset of the cluster's versions", extra=self._log)
            await self._say_resetting()
            try:
                if not await self._until_reset(self.list_then_watch()):
                    self._forget_position()
                    self._resetting = self.resets.reason or "another kind saw it"
                    # the other kinds relist at the same moment: spread the lists a little
                    await self.sleep(self.rng.uniform(0.0, self.settings.backoff_base))
                    continue
                # Expired: the position is gone; relist at once (client-go's reflector does).
                self.resource_version = None
                log.info("watch expired; relisting", extra=self._log)
                continue
            except WatchStalled as error:
                self.stalls += 1
                log.warning("%s; watching again", error, extra=self._log)
                silent = self.settings.stall_after
                await self.emit(Failed(self.kind, error, 0.0, self.backoff.attempt, silent))
                if await self._check_position():
                    self._silent_for = silent
                continue
            except NotServed as error:
                # The version answered 404 (switched off, or the cluster was downgraded):
                # discover again and relist whatever version is served now.
                if discovered(self.kind):
                    self.versions.forget(self.api_version, self.kind)
                self.resource_version = None
                if self.versions.unserved(self.kind):
                    # Served at none of its versions here (too old, or an alpha or beta API
                    # switched off): not a failure of the cluster; ask again when the
                    # discovery answer ages.
                    wait = self.versions.max_age
                    log.info("%s; asking again in %.0fs", error, wait, extra=self._log)
                    await self.emit(Failed(self.kind, error, wait, self.backoff.attempt))
                    await self.sleep(wait)
                    continue
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
            try:
                records, version = await self.list_all()
            except Expired as error:
                self._noticed(error)
                raise
            if not self._served(version):  # a list older than what this kind served
                self._report(f"list at resourceVersion {version} after {self._highest}")
                self._resetting = None  # this kind has just relisted
                self._highest = version
            self.resource_version = version
            # No backoff reset yet: only a watch that delivers proves the position works.
            await self.emit(Listed(self.kind, records, version, self.api_version))
            fresh = True
        while True:
            await self._resolve_path()  # follows a cluster upgraded to a newer DRA version
            try:
                received = await self.watch_once()
            except VersionsReset:
                return  # reported by a position check: relist
            except Expired as error:
                self._noticed(error)
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
            except Expired as error:
                if isinstance(error, TooLarge):
                    raise
                # The continue token outlived the server's window (etcd compaction): the
                # pages read so far are from a snapshot we can no longer finish. Start over.
                restarts += 1
                if restarts > self.settings.list_restarts:
                    raise
                log.info("list continue token expired; restarting the list", extra=self._log)

    async def _page(self, token: str | None) -> bytes:
        params: dict[str, str | int | bool] = {"limit": self.settings.page_size}
        if token:
            params["continue"] = token
        return await self.api.get(self.path, params, time_limit=self.settings.list_time_limit)

    async def _list_pages(self) -> tuple[list[Record], str]:
        records: list[Record] = []
        pages = PagedList(self._page)  # the next page is on its way while one is decoded
        token: str | None = None
        try:
            while True:
                body = await pages.get(token)
                try:
                    page = decode_list(self.kind, body, cluster=self.cluster, shared=self.shared)
                except (ValueError, msgspec.DecodeError) as error:
                    raise BadResponse(
                        f"{self.path}: list body: {error}", cluster=self.cluster
                    ) from error
                records.extend(page.records)
                for malformed in page.malformed:
                    # The object's own resourceVersion: the list's would differ on every relist
                    # and make one object look like many.
                    await self.emit(Skipped(self.kind, malformed, malformed.resource_version))
                if not page.continue_token:
                    return records, page.resource_version
                token = page.continue_token
        finally:
            pages.close()

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
        self._received = 0
        limit = timeout_seconds + self.settings.stream_grace
        stall = StallWatch(
            limit=self.settings.stall_after,
            clock=self.clock,
            sleep=self.sleep,
            quiet_after=self.settings.quiet_after,
            on_quiet=self._quiet,
            check_every=self.settings.position_check_interval,
            check=self._check_position,
        )
        async with self.api.stream(self.path, params, time_limit=limit) as lines:
            await self.emit(Connected(self.kind, self.api_version))
            stall.heard()
            try:
                done = await stall.run(self._read(lines, stall))
            except PositionGone:
                self._silent_for = stall.silent_for()
                raise VersionsReset(
                    f"{self.path}: the current resourceVersion is older than the watch's",
                    cluster=self.cluster,
                ) from None
            if done is None:
                raise WatchStalled(
                    f"{self.path}: watch stalled: no event or bookmark for "
                    f"{self.settings.stall_after:g}s",
                    cluster=self.cluster,
                )
        return self._received

    async def _quiet(self, seconds: float) -> None:
        log.info("no event or bookmark for %.0fs: possibly stale", seconds, extra=self._log)
        await self.emit(Silent(self.kind, seconds))

    async def _read(self, lines: AsyncIterator[bytes], stall: StallWatch) -> int:
        emit, kind, cluster, clock = self.emit, self.kind, self.cluster, self.clock
        async for line in lines:
            stall.last_heard = clock()  # StallWatch.heard, inlined: this runs once per line
            try:
                item = decode_watch_line(kind, line, cluster=cluster, shared=self.shared)
            except (ValueError, msgspec.DecodeError) as error:
                raise BadResponse(f"{self.path}: watch line: {error}", cluster=cluster) from error
            if item.type == "ERROR":
                status = item.error or {}
                raise from_status(
                    int(status.get("code") or 500), status, cluster=cluster, path=self.path
                )
            self._received += 1
            if self._received == 1:
                self.backoff.reset()
            version = item.resource_version
            if version and not self._served(version):
                raise TooLarge(  # handled as the reset it is: reported, and this kind relists
                    f"{self.path}: {item.type} at resourceVersion {version} after {self._highest}",
                    cluster=cluster,
                )
            if item.type == "BOOKMARK":
                message: WatchMessage = Bookmarked(kind, version)
            elif item.malformed is not None:
                message = Skipped(kind, item.malformed, version)
            elif item.record is not None:
                message = Observed(kind, Event(item.type, item.record), version)
            else:
                continue
            stall.hold()  # a full queue is our silence, not the server's
            try:
                await emit(message)
            finally:
                stall.release()
            if version:  # after the emit: what the queue did not take is asked for again
                self.resource_version = version
        return self._received
