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
from collections.abc import Callable
from typing import Any, Literal, overload

import msgspec

from dra_mirror.service.model import api, api_core, taint_rules
from dra_mirror.service.model.claims import claim_record, template_record
from dra_mirror.service.model.metadata import MalformedObject, object_ref
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
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
from dra_mirror.service.model.slices import device_class_record, slice_record
from dra_mirror.service.model.workloads import node_record, pod_record

__all__ = ["WIRE_TYPES", "MalformedObject", "normalize", "record_of"]

# kind -> the wire Struct its objects decode into
WIRE_TYPES: dict[str, type] = {
    DEVICE_CLASS: api.DeviceClass,
    RESOURCE_SLICE: api.ResourceSlice,
    RESOURCE_CLAIM: api.ResourceClaim,
    RESOURCE_CLAIM_TEMPLATE: api.ResourceClaimTemplate,
    POD: api_core.Pod,
    NODE: api_core.Node,
    DEVICE_TAINT_RULE: taint_rules.DeviceTaintRule,
}

_CONVERTERS: dict[str, Callable[..., Record]] = {
    DEVICE_CLASS: device_class_record,
    RESOURCE_SLICE: slice_record,
    RESOURCE_CLAIM: claim_record,
    RESOURCE_CLAIM_TEMPLATE: template_record,
    POD: pod_record,
    NODE: node_record,
}


def record_of(kind: str, wire: Any, *, cluster: str, shared: SharedValues | None = None) -> Record:
    """The record of a decoded wire Struct; MalformedObject if its content is wrong. Records
    converted with the same `shared` share their equal values (`SharedValues`; a fresh one by
    default)."""
    try:
        if kind == DEVICE_TAINT_RULE:
            return taint_rules.taint_rule_record(wire, cluster=cluster)
        return _CONVERTERS[kind](wire, cluster=cluster, shared=shared or SharedValues())
    except MalformedObject:
        raise
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        raise MalformedObject(object_ref(cluster, kind, wire.metadata), str(error)) from error


def _name_of(kind: str, raw: Any, cluster: str) -> str:
    metadata: Any = raw.get("metadata") if isinstance(raw, dict) else None
    try:
        meta = msgspec.convert(metadata, api.ObjectMeta) if isinstance(metadata, dict) else None
    except msgspec.ValidationError:
        meta = api.ObjectMeta(
            name=str(metadata.get("name") or ""), namespace=str(metadata.get("namespace") or "")
        )
    return object_ref(cluster, kind, meta)


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
