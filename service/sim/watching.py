"""WATCH streams: JSON lines of `{"type", "object"}`, as kube-apiserver sends them.

Semantics kept from the real server (watch cache):

* `resourceVersion` unset, "" or "0": synthetic ADDED for every current object first,
  then changes. `sendInitialEvents=true` (with `resourceVersionMatch=NotOlderThan`) does the
  same and ends the initial part with a BOOKMARK annotated `k8s.io/initial-events-end`.
* Otherwise the stream starts after that version; a version older than the retained window
  (or newer than the current one, e.g. after a restart) gives an ERROR event carrying a 410
  `Expired` Status, and the stream ends — unless the `futureWatches: wait` fault makes a
  watch from a newer version behave as kube-apiserver's watch cache: accepted, silent (no
  bookmark either) until the counter passes it, then only the events after it.
* Selectors apply to events: an object that leaves the selection is sent as DELETED, one
  that enters it as ADDED.
* BOOKMARK events (only `kind`, `apiVersion`, `metadata.resourceVersion`) are sent when
  `allowWatchBookmarks=true`: every `bookmark_interval` (kube-apiserver: a minute) on the
  dot, however often events of any kind wake the stream, and when the stream ends by
  `timeoutSeconds`.
* A restart of the store ends every open stream, as a crashed apiserver would.

Faults (see faults.py) drop, stall or slow streams.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from dra_mirror.service.sim.errors import ApiError, bad_request, expired
from dra_mirror.service.sim.faults import StreamFaults
from dra_mirror.service.sim.served import ServedCluster

Encoder = Callable[[dict], Any]  # storage object -> what the client sees


class WatchRequest:
    """The parsed query of one watch."""

    def __init__(self, params: dict[str, str], default_timeout: float) -> None:
        self.rv = params.get("resourceVersion") or ""
        self.rv_match = params.get("resourceVersionMatch") or ""
        self.bookmarks = params.get("allowWatchBookmarks", "").lower() in ("1", "true")
        self.initial_events = params.get("sendInitialEvents", "").lower() in ("1", "true")
        if self.initial_events and self.rv_match != "NotOlderThan":
            raise bad_request(
                "sendInitialEvents is forbidden unless resourceVersionMatch is NotOlderThan"
            )
        timeout = params.get("timeoutSeconds")
        try:
            self.timeout = float(timeout) if timeout else default_timeout
        except ValueError as error:
            raise bad_request(f"invalid timeoutSeconds: {timeout!r}") from error
        if self.rv not in ("", "0"):
            try:
                int(self.rv)
            except ValueError as error:
                raise bad_request(f"invalid resource version: {self.rv!r}") from error


def _line(event_type: str, obj: Any) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj}) + b"\n"


async def watch_stream(
    cluster: ServedCluster,
    plural: str,
    namespace: str | None,
    request: WatchRequest,
    *,
    matches: Callable[[dict], bool] | None,
    encode: Encoder,
    bookmark: Callable[[int, bool], dict],
    stream_faults: StreamFaults | ApiError,
) -> AsyncIterator[bytes]:
    """The body of one watch response."""
    store = cluster.store
    epoch = store.epoch
    drops = cluster.drops
    cluster.open_watches += 1
    try:
        if isinstance(stream_faults, ApiError):
            yield _line("ERROR", stream_faults.status())
            return
        faults = stream_faults
        deadline = time.monotonic() + request.timeout
        sent = 0
        if request.rv in ("", "0") or request.initial_events:
            cursor = store.resource_version
            for obj in list(store.iter_objects(plural, namespace)):
                if matches is None or matches(obj):
                    yield _line("ADDED", encode(obj))
            if request.initial_events and request.bookmarks:
                yield _line("BOOKMARK", bookmark(cursor, True))
        else:
            cursor = int(request.rv)
            if cursor > store.resource_version and not faults.future_wait:
                yield _line("ERROR", expired(f"too large resource version: {cursor}").status())
                return
        last_bookmark = time.monotonic()
        while True:
            if faults.stall_after is not None and sent >= faults.stall_after:
                faults.stall_after = None
                await asyncio.sleep(faults.stall_seconds)  # silent: no events, no bookmarks
            if store.epoch != epoch or cluster.closing or cluster.drops != drops:
                return
            waiter = cluster.notifier.waiter()
            try:
                events = store.events_after(cursor)
            except ApiError as error:
                yield _line("ERROR", error.status())
                return
            for ev in events:
                cursor = ev.rv
                if ev.plural != plural or (namespace and ev.key[0] != namespace):
                    continue
                event_type = _filtered_type(ev.type, ev.obj, ev.prev, matches)
                if event_type is None:
                    continue
                if faults.stall_after is not None and sent >= faults.stall_after:
                    faults.stall_after = None
                    await asyncio.sleep(faults.stall_seconds)
                if faults.delay:
                    await asyncio.sleep(faults.delay)
                yield _line(event_type, encode(ev.obj))
                sent += 1
                if faults.drop_after is not None and sent >= faults.drop_after:
                    return
                if store.epoch != epoch or cluster.closing or cluster.drops != drops:
                    return
            now = time.monotonic()
            # a bookmark never names a version the store has not reached (a watch from the
            # future, see futureWatches, hears nothing at all)
            bookmarks = request.bookmarks and cursor <= store.resource_version
            if now >= deadline:
                if bookmarks:
                    yield _line("BOOKMARK", bookmark(cursor, False))
                return
            if bookmarks and now - last_bookmark >= cluster.bookmark_interval:
                yield _line("BOOKMARK", bookmark(cursor, False))
                last_bookmark = now
            # wake up for the next bookmark, due one interval after the last however often
            # events (of any kind) woke the stream meanwhile: kube-apiserver's watch cache
            # keeps one due time per watcher, so a quiet kind hears from it every interval
            due = last_bookmark + cluster.bookmark_interval - now if bookmarks else None
            wait = min(deadline - now, cluster.bookmark_interval if due is None else due)
            try:
                async with asyncio.timeout(max(wait, 0.001)):
                    await waiter.wait()
            except TimeoutError:
                pass
    finally:
        cluster.open_watches -= 1


def _filtered_type(
    event_type: str, obj: dict, prev: dict | None, matches: Callable[[dict], bool] | None
) -> str | None:
    """The event a selecting watcher sees, or None when the change is outside its selection."""
    if matches is None:
        return event_type
    now_in = matches(obj)
    if event_type == "ADDED":
        return "ADDED" if now_in else None
    if event_type == "DELETED":
        return "DELETED" if (prev is not None and matches(prev)) or now_in else None
    was_in = prev is not None and matches(prev)
    if was_in and now_in:
        return "MODIFIED"
    if now_in:
        return "ADDED"
    if was_in:
        return "DELETED"
    return None
