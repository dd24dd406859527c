"""Reading raw API objects field by field, whatever version served them.

Plain dicts in, plain values out; nothing of the mirror is imported. Each reader says which
`types.go` comment it follows (kubernetes/api, resource/v1, v1beta2, v1beta1, v1alpha3 and
core/v1 at v0.35, v0.36 and master). The readers are naive on purpose: they walk the object
exactly as the comment describes it, without caches or indexes.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

Raw = dict[str, Any]

# resource.Quantity (apimachinery quantity.go): <signedNumber><suffix>, where suffix is a binary
# SI (Ki Mi Gi Ti Pi Ei), a decimal SI (n u m "" k M G T P E) or an exponent (e3, E-2).
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def quantity(value: Any) -> Fraction:
    """The exact amount a Kubernetes quantity (a string, or a YAML number) stands for."""
    text = str(value).strip()
    found = _QUANTITY.match(text)
    if found is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Fraction(found.group(1)), found.group(2) or ""
    if suffix in _BINARY:
        return number * 1024 ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    if suffix:
        return number * Fraction(10) ** int(suffix[1:])
    return number


def qualified(name: str, driver: str) -> str:
    """QualifiedName (resource/v1 types.go): "Names which do not include the domain prefix are
    assumed to be part of the driver's domain." So `memory` of gpu.nvidia.com is
    `gpu.nvidia.com/memory`, and two spellings of one name compare equal once qualified."""
    return name if "/" in name else f"{driver}/{name}"


def version(obj: Raw) -> str:
    """The version part of apiVersion (`resource.k8s.io/v1beta1` -> `v1beta1`)."""
    return str(obj.get("apiVersion") or "v1").rsplit("/", 1)[-1]


def meta(obj: Raw) -> Raw:
    return obj.get("metadata") or {}


def deleting(obj: Raw) -> bool:
    """ObjectMeta.deletionTimestamp: "set by the server when a graceful deletion is
    requested"; the object stays until its finalizers are removed."""
    return bool(meta(obj).get("deletionTimestamp"))


# --- ResourceSlice ------------------------------------------------------------------------


def pool(slice_: Raw) -> tuple[str, str, int, int]:
    """(driver, pool name, generation, resourceSliceCount) of a slice (ResourcePool)."""
    spec = slice_.get("spec") or {}
    p = spec.get("pool") or {}
    return (
        spec.get("driver") or "",
        p.get("name") or "",
        int(p.get("generation") or 0),
        int(p.get("resourceSliceCount") or 1),
    )


def devices(slice_: Raw) -> list[Raw]:
    """The devices of a slice in the v1 shape. v1beta1 (and v1alpha3) wrap a device's fields
    in `basic` ("Basic defines one device instance", v1beta1 types.go); v1alpha3 writes each
    capacity as a bare Quantity instead of a DeviceCapacity {value}."""
    out = []
    for device in (slice_.get("spec") or {}).get("devices") or []:
        fields = dict(device.get("basic") or {}) if "basic" in device else dict(device)
        fields["name"] = device.get("name") or ""
        capacity = {}
        for name, entry in (fields.get("capacity") or {}).items():
            capacity[name] = entry if isinstance(entry, dict) else {"value": entry}
        fields["capacity"] = capacity
        out.append(fields)
    return out


def shared_counters(slice_: Raw) -> list[Raw]:
    """ResourceSliceSpec.sharedCounters: "a list of counter sets, each of which has a name and
    a list of counters available"; the names are unique in the pool."""
    return list((slice_.get("spec") or {}).get("sharedCounters") or [])


def slice_node(slice_: Raw, device: Raw) -> str | None:
    """The node of a device: the slice's nodeName, or with perDeviceNodeSelection the device's
    own nodeName (resource/v1 ResourceSliceSpec.perDeviceNodeSelection, Device.nodeName)."""
    spec = slice_.get("spec") or {}
    if spec.get("perDeviceNodeSelection"):
        return device.get("nodeName") or None
    return spec.get("nodeName") or None


def attribute_value(device: Raw, name: str, driver: str) -> Any:
    """The value of an attribute named in either spelling (DeviceAttribute: exactly one of
    int, bool, string, version; 1.36+ also ints, bools, strings, versions)."""
    for key, attr in (device.get("attributes") or {}).items():
        if qualified(key, driver) == qualified(name, driver) and isinstance(attr, dict):
            for member in ("string", "int", "bool", "version", "strings", "ints", "bools"):
                if member in attr:
                    return attr[member]
    return None


# --- ResourceClaim ------------------------------------------------------------------------


def allocation(claim: Raw) -> Raw | None:
    """status.allocation: "Allocation is set once the claim has been allocated successfully."""
    return (claim.get("status") or {}).get("allocation")


def results(claim: Raw) -> list[Raw]:
    """status.allocation.devices.results: one DeviceRequestAllocationResult per device; its
    driver, pool and device "identify which device was allocated"."""
    alloc = allocation(claim)
    if not alloc:
        return []
    return list((alloc.get("devices") or {}).get("results") or [])


def reserved_for(claim: Raw) -> list[Raw]:
    """status.reservedFor: "which entities are currently allowed to use the claim"."""
    return list((claim.get("status") or {}).get("reservedFor") or [])


def allocated_node(claim: Raw) -> str | None:
    """The node of a node-local allocation: the scheduler writes allocation.nodeSelector with
    one term `matchFields metadata.name In [node]` (dra-api.md §6)."""
    alloc = allocation(claim) or {}
    terms = (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    if len(terms) != 1:
        return None
    for field in terms[0].get("matchFields") or []:
        values = field.get("values") or []
        if field.get("key") == "metadata.name" and field.get("operator") == "In":
            if len(values) == 1:
                return values[0]
    return None


# --- core/v1 Pod --------------------------------------------------------------------------


def pod_phase(pod: Raw) -> str:
    """PodStatus.phase; "Pending" until the API server has one (the kubelet sets it)."""
    return (pod.get("status") or {}).get("phase") or "Pending"


def pod_claim_names(pod: Raw) -> list[str]:
    """The ResourceClaims a pod uses (k8s.io/dynamic-resource-allocation resourceclaim.Name):
    resourceClaimName as written; for resourceClaimTemplateName the generated name from
    status.resourceClaimStatuses (absent: not created yet); plus the claim the scheduler made
    for its extended resources (status.extendedResourceClaimStatus.resourceClaimName)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    generated = {
        s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []
    }
    names = []
    for entry in spec.get("resourceClaims") or []:
        source = entry.get("source") or {}  # tombstoned (<= 1.30) wrapper
        direct = entry.get("resourceClaimName") or source.get("resourceClaimName")
        template = entry.get("resourceClaimTemplateName") or source.get("resourceClaimTemplateName")
        if direct:
            names.append(direct)
        elif template and generated.get(entry.get("name")):
            names.append(generated[entry.get("name")])
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        names.append(extended)
    return names


def pod_group(pod: Raw) -> str | None:
    """PodSpec.schedulingGroup.podGroupName [1.36+]: "the standalone PodGroup object that
    represents the runtime instance of this group"."""
    return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or None
