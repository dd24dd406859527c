"""All objects of one simulated cluster, written as kube-apiserver's generic registry writes
them; the storage and its event log (etcd's part) are `service.sim.storage.Storage`.

* Server-set fields follow Kubernetes: uid, creationTimestamp, generation (bumped when the
  spec changes), managedFields, deletionTimestamp with finalizers; `generateName` gets five
  random characters from Kubernetes' own alphabet.
* `validate=True` (the default, and what the HTTP layer uses) treats the call like a client
  request: validation, namespace must exist, and the status of a new object is reset as the
  registry strategies do. `validate=False` is the world's own write path: stored as given.
* An update through the `status` subresource changes status only; the main resource ignores
  status changes of kinds that have the subresource. A no-op update writes nothing.
* Deleting an object with finalizers sets its deletionTimestamp; it goes when the last
  finalizer does. Deleting a namespace turns it Terminating; `purge_namespace` (the namespace
  controller's work) removes its content, then the namespace.

Returned objects from `get`/`list` are private copies; the world half may change them freely.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime

from dra_mirror.service.model.kinds import BY_PLURAL, Resource
from dra_mirror.service.sim import validation
from dra_mirror.service.sim.errors import ApiError, already_exists, conflict, invalid, not_found
from dra_mirror.service.sim.eventlog import Event, Key
from dra_mirror.service.sim.objects import (
    MANAGER,
    check_shape,
    copy_object,
    list_item,
    managed_entry,
    merge_patch,
    namespace_object,
    prepare_for_create,
    record_manager,
    timestamp,
    without_rv,
)
from dra_mirror.service.sim.storage import Storage, api_version, key_of, utc_now

__all__ = [
    "ApiError",
    "ClusterStore",
    "Event",
    "Key",
    "copy_object",
    "key_of",
    "list_item",
    "merge_patch",
    "timestamp",
]

# utilrand's alphabet: no vowels, no easily confused characters (k8s.io/apimachinery).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class ClusterStore(Storage):
    """All objects of one simulated cluster, stored in their v1 shape (resource.k8s.io/v1, core v1),
    written as kube-apiserver's registry writes them."""

    def __init__(
        self,
        name: str,
        *,
        window: int = 100_000,
        clock: Callable[[], datetime] = utc_now,
        seed: int | None = None,
        base: int = 0,
        default_namespaces: Iterable[str] = _DEFAULT_NAMESPACES,
    ) -> None:
        super().__init__(name, window=window, clock=clock, seed=seed, base=base)
        self.bulk_load("namespaces", (namespace_object(ns) for ns in default_namespaces))

    # ---- writing, as the registry does ----------------------------------------------------

    # ---- writing -------------------------------------------------------------------------

    def create(
        self,
        plural: str,
        obj: dict,
        *,
        validate: bool = True,
        manager: str = MANAGER,
        operation: str = "Update",
        dry_run: bool = False,
    ) -> dict:
        res = BY_PLURAL[plural]
        obj = copy_object(obj)
        check_shape(res, obj)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generated_name(res, meta)
        name = meta.get("name") or ""
        if res.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        obj = {"apiVersion": api_version(res), "kind": res.kind, "metadata": meta} | {
            k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")
        }
        if validate:
            validation.default(plural, obj)
            causes = validation.validate(plural, obj)
            if causes:
                raise invalid(res.kind, res.group, name, causes)
            if res.namespaced:
                ns = self._objects["namespaces"].get(("", meta["namespace"]))
                if ns is None:
                    raise not_found("namespaces", "", meta["namespace"])
                if ns["metadata"].get("deletionTimestamp"):
                    raise ApiError(
                        403,
                        "Forbidden",
                        f'{plural} "{name}" is forbidden: unable to create new content in '
                        f"namespace {meta['namespace']} because it is being terminated",
                        {"name": name, "group": res.group, "kind": plural},
                    )
            prepare_for_create(plural, obj)
        key = key_of(res, meta.get("namespace"), name)
        if key in self._objects[plural]:
            raise already_exists(plural, res.group, name)
        now = timestamp(self._clock())
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = now
        meta.pop("deletionTimestamp", None)
        meta["generation"] = 1
        if "managedFields" not in meta:
            meta["managedFields"] = [managed_entry(obj, operation, now, manager)]
        return self._write(plural, key, obj, "ADDED", None, dry_run=dry_run)

    def update(
        self,
        plural: str,
        obj: dict,
        *,
        subresource: str | None = None,
        manager: str = MANAGER,
        operation: str = "Update",
        dry_run: bool = False,
    ) -> dict:
        res = BY_PLURAL[plural]
        check_shape(res, obj)
        meta = obj["metadata"]
        key = key_of(res, meta.get("namespace"), meta.get("name") or "")
        old = self._objects[plural].get(key)
        if old is None:
            raise not_found(plural, res.group, key[1])
        want_rv = meta.get("resourceVersion")
        if want_rv and str(want_rv) != old["metadata"]["resourceVersion"]:
            raise conflict(plural, res.group, key[1])
        new = self._merge_for_update(
            res, old, validation.default(plural, copy_object(obj)), subresource
        )
        causes = validation.validate(plural, new) + validation.validate_update(plural, old, new)
        if causes:
            raise invalid(res.kind, res.group, key[1], causes)
        if without_rv(new) == without_rv(old):
            return copy_object(old)  # a no-op update writes nothing, as kube-apiserver
        record_manager(new, manager, subresource, timestamp(self._clock()), operation)
        if old["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # The last finalizer is gone from an object being deleted: remove it now.
            return self._write(plural, key, new, "DELETED", old, dry_run=dry_run)
        return self._write(plural, key, new, "MODIFIED", old, dry_run=dry_run)

    def patch(
        self,
        plural: str,
        namespace: str | None,
        name: str,
        patch: dict,
        *,
        subresource: str | None = None,
        manager: str = MANAGER,
        operation: str = "Update",
        dry_run: bool = False,
    ) -> dict:
        res = BY_PLURAL[plural]
        old = self._objects[plural].get(key_of(res, namespace, name))
        if old is None:
            raise not_found(plural, res.group, name)
        merged = merge_patch(old, patch)
        check_shape(res, merged)
        meta = merged["metadata"]
        meta["name"] = name
        if res.namespaced:
            meta["namespace"] = old["metadata"]["namespace"]
        if "resourceVersion" not in (patch.get("metadata") or {}):
            meta.pop("resourceVersion", None)  # a patch is unconditional unless it says otherwise
        return self.update(
            plural,
            merged,
            subresource=subresource,
            manager=manager,
            operation=operation,
            dry_run=dry_run,
        )

    def delete(
        self, plural: str, namespace: str | None, name: str, *, dry_run: bool = False
    ) -> dict:
        res = BY_PLURAL[plural]
        key = key_of(res, namespace, name)
        old = self._objects[plural].get(key)
        if old is None:
            raise not_found(plural, res.group, name)
        if dry_run:
            return copy_object(old)
        if plural == "namespaces":
            if (old.get("spec") or {}).get("finalizers"):
                # Namespace deletion is asynchronous: the namespace turns Terminating and the
                # namespace controller (purge_namespace) removes its content, then the namespace.
                if old["metadata"].get("deletionTimestamp"):
                    return copy_object(old)
                new = copy_object(old)
                new["metadata"]["deletionTimestamp"] = timestamp(self._clock())
                new["status"] = {"phase": "Terminating"}
                return self._write(plural, key, new, "MODIFIED", old)
            self._purge_content(name)
        if old["metadata"].get("finalizers"):
            if old["metadata"].get("deletionTimestamp"):
                return copy_object(old)
            new = copy_object(old)
            new["metadata"]["deletionTimestamp"] = timestamp(self._clock())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._write(plural, key, new, "MODIFIED", old)
        return self._write(plural, key, copy_object(old), "DELETED", old)

    def purge_namespace(self, name: str) -> None:
        """The namespace controller's work for a Terminating namespace: delete everything in
        it, then the namespace itself."""
        key = ("", name)
        old = self._objects["namespaces"].get(key)
        if old is None or not old["metadata"].get("deletionTimestamp"):
            return
        self._purge_content(name)
        self._force_delete("namespaces", key)

    def _purge_content(self, namespace: str) -> None:
        for dependent in [p for p, r in BY_PLURAL.items() if r.namespaced]:
            for dep_key in [k for k in self._objects[dependent] if k[0] == namespace]:
                self._force_delete(dependent, dep_key)

    def bulk_load(self, plural: str, objs: Iterable[dict]) -> None:
        res = BY_PLURAL[plural]
        objects = self._objects[plural]
        raw = self._raw[plural]
        now = timestamp(self._clock())
        rng = self._rng
        stored_version = api_version(res)
        for obj in objs:
            meta = obj.setdefault("metadata", {})
            obj.setdefault("apiVersion", stored_version)
            obj.setdefault("kind", res.kind)
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generated_name(res, meta)
            if res.namespaced:
                meta.setdefault("namespace", "default")
            meta.setdefault("uid", str(uuid.UUID(int=rng.getrandbits(128), version=4)))
            meta.setdefault("creationTimestamp", now)
            meta.setdefault("generation", 1)
            self.resource_version += 1
            meta["resourceVersion"] = str(self.resource_version)
            key = key_of(res, meta.get("namespace"), meta["name"])
            objects[key] = obj
            raw.pop(key, None)
        self._sorted[plural] = None
        self._log.reset(self.resource_version)  # nothing of the load is in the log

    # ---- internals -----------------------------------------------------------------------

    def _generated_name(self, res: Resource, meta: dict) -> str:
        # names.SimpleNameGenerator: base truncated to 58 chars, plus 5 random characters.
        base = meta["generateName"][:58]
        objects = self._objects[res.plural]
        while True:
            name = base + "".join(self._rng.choice(_NAME_ALPHABET) for _ in range(5))
            if key_of(res, meta.get("namespace"), name) not in objects:
                return name

    def _merge_for_update(
        self, res: Resource, old: dict, new: dict, subresource: str | None
    ) -> dict:
        old_meta = old["metadata"]
        if subresource == "status":
            # The status subresource changes status only; the rest is kept from storage.
            merged = {k: v for k, v in old.items() if k != "status"}
            if "status" in new:
                merged["status"] = new["status"]
            merged["metadata"] = dict(old_meta)
            return merged
        if subresource is not None:
            raise ApiError(404, "NotFound", f"subresource {subresource!r} is not served")
        meta = new.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        if "deletionGracePeriodSeconds" in old_meta:
            meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
        if "managedFields" not in meta and "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]
        if res.namespaced:
            meta["namespace"] = old_meta["namespace"]
        new["apiVersion"] = old["apiVersion"]
        new["kind"] = old["kind"]
        if res.has_status:
            # With a status subresource the main resource ignores status changes.
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if new.get("spec") != old.get("spec"):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        return new
