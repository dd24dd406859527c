"""Object-level rules of the API server: server-set fields and JSON helpers.

Pure functions used by the store (store.py) and the HTTP layer: timestamps as metav1.Time
prints them, fast deep copies, the LIST item shape, RFC 7386 merge patches, the metadata
shape check (422 before anything reads a malformed object), what registry strategies do to
a new object's status (PrepareForCreate), and managedFields entries (FieldsV1 sets).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from dra_mirror.service.model.kinds import Resource
from dra_mirror.service.sim.errors import invalid

MANAGER = "dra-mirror-sim"  # field manager of writes that name none


def timestamp(moment: datetime) -> str:
    """RFC 3339 with second precision, as metav1.Time serialises."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def copy_object(obj: dict) -> dict:
    """A deep copy of a JSON object (orjson round trip is several times faster than deepcopy)."""
    return orjson.loads(orjson.dumps(obj))


def fields_v1(value: Any, depth: int = 0) -> dict:
    """A FieldsV1 set for managedFields: every map key as `f:<key>`, lists as leaves."""
    if not isinstance(value, dict) or depth > 6:
        return {}
    out: dict[str, Any] = {}
    for k, v in value.items():
        out[f"f:{k}"] = fields_v1(v, depth + 1)
    if depth > 0 and out:
        out["."] = {}
    return out


def list_item(obj: dict) -> dict:
    """`obj` without kind and apiVersion: the shape of an item in a LIST body."""
    return {k: v for k, v in obj.items() if k != "apiVersion" and k != "kind"}


def check_shape(res: Resource, obj: Any) -> None:
    """422 for an object whose metadata has the wrong JSON types (before anything reads it)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(obj, dict) and meta is None:
        meta = obj["metadata"] = {}
    problems = []
    if not isinstance(meta, dict):
        problems.append(
            {"reason": "FieldValueInvalid", "message": "must be an object", "field": "metadata"}
        )
    else:
        for field in ("name", "generateName", "namespace", "resourceVersion"):
            if meta.get(field) is not None and not isinstance(meta[field], str):
                problems.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": "must be a string",
                        "field": f"metadata.{field}",
                    }
                )
        for field in ("labels", "annotations"):
            value = meta.get(field)
            if value is not None and not (
                isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
            ):
                problems.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": "must be a map of strings",
                        "field": f"metadata.{field}",
                    }
                )
        if meta.get("finalizers") is not None and not (
            isinstance(meta["finalizers"], list)
            and all(isinstance(f, str) for f in meta["finalizers"])
        ):
            problems.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": "must be a list of strings",
                    "field": "metadata.finalizers",
                }
            )
    if problems:
        name = meta.get("name") if isinstance(meta, dict) else None
        name = name if isinstance(name, str) else ""
        raise invalid(res.kind, res.group, name, problems)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value and leaves both inputs unchanged."""
    if not isinstance(patch, dict):
        return copy_object({"v": patch})["v"] if isinstance(patch, list) else patch
    result = copy_object(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def without_rv(obj: dict) -> dict:
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion",)}
    return {**obj, "metadata": meta}


def prepare_for_create(plural: str, obj: dict) -> None:
    """Status on create, as the registry strategies (PrepareForCreate) set it."""
    if plural == "resourceclaims":
        obj.pop("status", None)
    elif plural == "pods":
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}
    elif plural == "namespaces":
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}


def qos_class(pod: dict) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    has_any = any(
        (c.get("resources") or {}).get("requests") or (c.get("resources") or {}).get("limits")
        for c in containers
    )
    return "Burstable" if has_any else "BestEffort"


def record_manager(
    obj: dict, manager: str, subresource: str | None, now: str, operation: str = "Update"
) -> None:
    """Record `manager`'s write (Update, or Apply for server-side apply) in managedFields, as
    the API server does on every write."""
    meta = obj["metadata"]
    if "managedFields" not in meta:
        return  # an object written without managedFields (bulk load) keeps none
    entry = managed_entry(obj, operation, now, manager, subresource=subresource)
    entries = [
        e
        for e in meta["managedFields"] or []
        if not (
            e.get("manager") == manager
            and e.get("operation") == operation
            and e.get("subresource") == subresource
        )
    ]
    meta["managedFields"] = [*entries, entry]


def managed_entry(
    obj: dict,
    operation: str,
    now: str,
    manager: str = "dra-mirror-sim",
    *,
    subresource: str | None = None,
) -> dict:
    """One managedFields entry: who wrote which fields (labels, annotations, spec…) when."""
    if subresource == "status":
        body = {"status": obj.get("status") or {}}
    else:
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")}
        meta = {
            k: v for k, v in (body.get("metadata") or {}).items() if k in ("labels", "annotations")
        }
        body["metadata"] = meta
        if not meta:
            body.pop("metadata")
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": obj.get("apiVersion", "v1"),
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(body),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def namespace_object(name: str) -> dict:
    """An Active namespace as a cluster starts with (default, kube-system, …)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
