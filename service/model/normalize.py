"""Raw API objects (dicts) of any served version into normalized records.

`normalize(kind, raw, *, cluster)` accepts a DeviceClass, ResourceSlice, ResourceClaim or
ResourceClaimTemplate of resource.k8s.io v1, v1beta2 or v1beta1 (v1alpha3 capacities too), a
DeviceTaintRule of v1alpha3, v1beta2 or v1 (one shape: `service.model.taint_rules`), or a core
v1 Pod or Node, as a dict (YAML manifests, kubectl output, test data), and returns the
one record shape of `service.model.records`. The hot path reads API bytes instead
(`service.model.decode`); both go through the same wire Structs (`service.model.api`) and the
same conversion (`record_of`), so they always agree.

Promises: managedFields dropped, unknown fields tolerated, and anything structurally wrong
raises `MalformedObject` — never another exception type.
"""

from __future__ import annotations

import datetime
from typing import Any, Literal, overload

import msgspec

from dra_mirror.service.model import api
from dra_mirror.service.model.kinds import REGISTERED
from dra_mirror.service.model.metadata import MalformedObject, object_meta, object_ref
from dra_mirror.service.model.records import (
    ClaimRecord,
    DeviceClassRecord,
    NodeRecord,
    PodRecord,
    Record,
    SliceRecord,
    TaintRuleRecord,
    TemplateRecord,
)
from dra_mirror.service.model.sharing import SharedValues

__all__ = ["WIRE_TYPES", "MalformedObject", "normalize", "record_of"]

# kind -> the wire Struct its objects decode into (the registry's)
WIRE_TYPES: dict[str, type] = {kind: entry.wire for kind, entry in REGISTERED.items()}


def record_of(kind: str, wire: Any, *, cluster: str, shared: SharedValues | None = None) -> Record:
    """The record of a decoded wire Struct; MalformedObject if its content is wrong. Records
    converted with the same `shared` share their equal values (`SharedValues`; a fresh one by
    default)."""
    entry = REGISTERED[kind]
    shared = shared or SharedValues()
    try:
        meta = object_meta(
            kind, wire.metadata, namespaced=entry.namespaced, cluster=cluster, shared=shared
        )
        return entry.convert(wire, meta, shared)
    except MalformedObject:
        raise
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        ref = object_ref(cluster, kind, wire.metadata, namespaced=entry.namespaced)
        raise MalformedObject(ref, str(error)) from error


def _name_of(kind: str, raw: Any, cluster: str) -> str:
    metadata: Any = raw.get("metadata") if isinstance(raw, dict) else None
    try:
        meta = msgspec.convert(metadata, api.ObjectMeta) if isinstance(metadata, dict) else None
    except msgspec.ValidationError:
        meta = api.ObjectMeta(
            name=str(metadata.get("name") or ""), namespace=str(metadata.get("namespace") or "")
        )
    entry = REGISTERED.get(kind)
    return object_ref(cluster, kind, meta, namespaced=entry is None or entry.namespaced)


@overload
def normalize(
    kind: Literal["DeviceClass"], raw: dict[str, Any], *, cluster: str
) -> DeviceClassRecord: ...
@overload
def normalize(
    kind: Literal["ResourceSlice"], raw: dict[str, Any], *, cluster: str
) -> SliceRecord: ...
@overload
def normalize(
    kind: Literal["ResourceClaim"], raw: dict[str, Any], *, cluster: str
) -> ClaimRecord: ...
@overload
def normalize(
    kind: Literal["ResourceClaimTemplate"], raw: dict[str, Any], *, cluster: str
) -> TemplateRecord: ...
@overload
def normalize(kind: Literal["Pod"], raw: dict[str, Any], *, cluster: str) -> PodRecord: ...
@overload
def normalize(kind: Literal["Node"], raw: dict[str, Any], *, cluster: str) -> NodeRecord: ...
@overload
def normalize(
    kind: Literal["DeviceTaintRule"], raw: dict[str, Any], *, cluster: str
) -> TaintRuleRecord: ...
@overload
def normalize(kind: str, raw: dict[str, Any], *, cluster: str) -> Record: ...


def normalize(kind: str, raw: dict[str, Any], *, cluster: str) -> Record:
    """One raw object (a dict) of `kind` into its record; MalformedObject when it is wrong."""
    wire_type = WIRE_TYPES.get(kind)
    if wire_type is None:
        raise MalformedObject(f"{cluster}/{kind}/?", f"not a mirrored kind: {kind}")
    if not isinstance(raw, dict):
        raise MalformedObject(f"{cluster}/{kind}/?", "not an object")
    try:
        wire: Any = msgspec.convert(raw, wire_type)
    except msgspec.ValidationError as error:
        # YAML loaders turn unquoted timestamps into datetimes; the API writes RFC 3339 text.
        retyped = _times_as_text(raw)
        if retyped is raw:
            raise MalformedObject(_name_of(kind, raw, cluster), str(error)) from error
        return normalize(kind, retyped, cluster=cluster)
    return record_of(kind, wire, cluster=cluster)


def _times_as_text(value: Any) -> Any:
    """`value` with every date/datetime as RFC 3339 text; the same object when it had none."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, dict):
        items = {k: _times_as_text(v) for k, v in value.items()}
        return value if all(items[k] is value[k] for k in value) else items
    if isinstance(value, list):
        members = [_times_as_text(v) for v in value]
        return value if all(a is b for a, b in zip(members, value, strict=True)) else members
    return value
