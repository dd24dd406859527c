"""The storage half of a simulated cluster: etcd as kube-apiserver sees it.

`Storage` keeps one cluster's objects in their storage shape (resource.k8s.io/v1, core/v1) as
plain dicts, keyed by `(namespace or "", name)`, and the bounded log of their changes:

* Stored dicts are never changed in place: every write stores a new dict, so a snapshot handed
  to a watcher or a page stays valid. Reads (`get`, `list`) return private copies;
  `iter_objects` and `stored` hand out the stored dicts themselves, read-only.
* One monotonic counter gives every write a new `metadata.resourceVersion`, as etcd revisions
  do. Every write appends one `Event` to the log (the "retained window"); a watch or continue
  token from before the window gets 410 Expired. Events carry the previous state, so a paged
  LIST can serve a consistent snapshot at the resourceVersion of its first page (what etcd
  MVCC gives kube-apiserver).
* Listeners are called synchronously after each change with (type, plural, object); wakers
  after each change and restart (the HTTP layer wakes its watches with them).

What a write does to an object (validation, server-set fields, finalizers) is the registry's,
`service.sim.store.ClusterStore`, built on this class.
"""

from __future__ import annotations

import builtins
import logging
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import orjson

from dra_mirror.service.model.kinds import BY_PLURAL, Resource
from dra_mirror.service.sim.eventlog import Event, EventLog, Key
from dra_mirror.service.sim.objects import copy_object, list_item

__all__ = ["Listener", "Storage", "api_version", "key_of", "utc_now"]

log = logging.getLogger(__name__)
Listener = Callable[[str, str, dict], None]


def utc_now() -> datetime:
    return datetime.now(UTC)


def key_of(res: Resource, namespace: str | None, name: str) -> Key:
    return ((namespace or "") if res.namespaced else "", name)


def api_version(res: Resource) -> str:
    """The storage version of a resource (`resource.k8s.io/v1`, `v1`)."""
    return f"{res.group}/v1" if res.group else "v1"


class Storage:
    """One simulated cluster's objects, their resourceVersions and the log of their changes.

    (`list` is a method here, as in client-go's listers: annotations below it say
    `builtins.list`.)"""

    def __init__(
        self,
        name: str,
        *,
        window: int = 100_000,
        clock: Callable[[], datetime] = utc_now,
        seed: int | None = None,
        base: int = 0,
    ) -> None:
        self.name = name
        self.resource_version = base
        self.epoch = 0  # bumped by restart(); continue tokens from another epoch are expired
        self._clock = clock
        self._rng = random.Random(seed)
        self._objects: dict[str, dict[Key, dict]] = {p: {} for p in BY_PLURAL}
        self._sorted: dict[str, list[Key] | None] = {p: None for p in BY_PLURAL}
        self._raw: dict[str, dict[Key, bytes]] = {p: {} for p in BY_PLURAL}
        self._log = EventLog(window, base)
        self._listeners: list[Listener] = []
        self._wakers: list[Callable[[], None]] = []

    def get(self, plural: str, namespace: str | None, name: str) -> dict | None:
        res = BY_PLURAL[plural]
        obj = self._objects[plural].get(key_of(res, namespace, name))
        return None if obj is None else copy_object(obj)

    def list(self, plural: str, namespace: str | None = None) -> list[dict]:
        return [copy_object(o) for o in self.iter_objects(plural, namespace)]

    def count(self, plural: str) -> int:
        return len(self._objects[plural])

    def iter_objects(self, plural: str, namespace: str | None = None) -> Iterator[dict]:
        """The stored objects in key order, not copied: read-only for the caller."""
        objects = self._objects[plural]
        for key in self.sorted_keys(plural):
            if namespace and key[0] != namespace:
                continue
            yield objects[key]

    def sorted_keys(self, plural: str) -> builtins.list[Key]:
        keys = self._sorted[plural]
        if keys is None:
            keys = self._sorted[plural] = sorted(self._objects[plural])
        return keys

    def stored(self, plural: str, key: Key) -> dict | None:
        """The stored object under `key`, not copied."""
        return self._objects[plural].get(key)

    def encoded(self, plural: str, key: Key) -> bytes:
        """The stored object as a LIST item in JSON (without kind and apiVersion, as
        kube-apiserver sends list items), cached until it changes: serves big lists fast."""
        raw = self._raw[plural].get(key)
        if raw is None:
            raw = self._raw[plural][key] = orjson.dumps(list_item(self._objects[plural][key]))
        return raw

    @property
    def floor(self) -> int:
        """The oldest resourceVersion a watch may start from without 410."""
        return self._log.floor

    def events_after(self, rv: int) -> builtins.list[Event]:
        """Events with resourceVersion > rv; 410 Expired if some have left the window."""
        return self._log.after(rv, self.resource_version)

    def state_at(self, plural: str, rv: int) -> dict[Key, dict | None]:
        """Keys of `plural` changed after `rv`, mapped to their state at `rv` (None = absent)."""
        before: dict[Key, dict | None] = {}
        for ev in self.events_after(rv):
            if ev.plural == plural and ev.key not in before:
                before[ev.key] = ev.prev
        return before

    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def add_waker(self, fn: Callable[[], None]) -> None:
        """`fn()` after every change and restart (the HTTP layer wakes its watches with it)."""
        self._wakers.append(fn)

    def restart(self, base: int = 1) -> None:
        """Simulate an etcd restore: counter restarts at `base`, log cleared, every object gets
        a new resourceVersion (uids kept). Clients must relist; watches are woken to end."""
        self.epoch += 1
        self.resource_version = base
        for plural, objects in self._objects.items():
            for key in self.sorted_keys(plural):
                self.resource_version += 1
                obj = dict(objects[key])
                obj["metadata"] = dict(obj["metadata"], resourceVersion=str(self.resource_version))
                objects[key] = obj
            self._raw[plural].clear()
        self._log.reset(self.resource_version)
        for wake in self._wakers:
            wake()

    # ---- the one write path ----------------------------------------------------------------

    def _write(
        self,
        plural: str,
        key: Key,
        obj: dict,
        kind: str,
        prev: dict | None,
        *,
        dry_run: bool = False,
    ) -> dict:
        if dry_run:
            # ?dryRun=All: everything but the write (kubectl --dry-run=server, kubectl diff).
            out = copy_object(obj)
            if prev is not None:
                out["metadata"]["resourceVersion"] = prev["metadata"]["resourceVersion"]
            return out
        self.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        objects = self._objects[plural]
        if kind == "DELETED":
            del objects[key]
            self._sorted[plural] = None
        else:
            if key not in objects:
                self._sorted[plural] = None
            objects[key] = obj
        self._raw[plural].pop(key, None)
        self._log.append(Event(self.resource_version, kind, plural, key, obj, prev))
        for fn in self._listeners:
            try:
                fn(kind, plural, obj)
            except Exception:
                # A listener's bug must not leave the write half-announced (watches unwoken).
                log.exception(
                    "cluster %s: listener failed on %s %s %s", self.name, kind, plural, key
                )
        for wake in self._wakers:
            wake()
        return copy_object(obj)

    def _force_delete(self, plural: str, key: Key) -> None:
        old = self._objects[plural][key]
        self._write(plural, key, copy_object(old), "DELETED", old)
