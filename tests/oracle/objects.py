"""Raw Kubernetes objects as an API server serves them, built for the oracle tests.

Builders write resource.k8s.io/v1 and core/v1 dicts (camelCase, `apiVersion` and `kind` set,
quantities as strings); `render(obj, version)` rewrites a DRA object into the shape another
served version gives it (v1beta2: the v1 shape; v1beta1: device fields under `basic`,
requests flat instead of under `exactly`), as the API server converts between versions.
"""

from __future__ import annotations

import copy
from typing import Any

Raw = dict[str, Any]
CREATED = "2026-05-01T00:00:00Z"
DRA = "resource.k8s.io"


def _meta(name: str, namespace: str | None = None, uid: str | None = None, **extra: Any) -> Raw:
    m: Raw = {
        "name": name,
        "uid": uid or f"uid-{namespace or ''}-{name}",
        "creationTimestamp": CREATED,
    }
    if namespace is not None:
        m["namespace"] = namespace
    m.update({k: v for k, v in extra.items() if v is not None})
    return m


def node(name: str) -> Raw:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(name, labels={"kubernetes.io/hostname": name}),
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def device_class(name: str, driver: str) -> Raw:
    return {
        "apiVersion": f"{DRA}/v1",
        "kind": "DeviceClass",
        "metadata": _meta(name),
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def device(
    name: str,
    *,
    uuid: str | None = None,
    capacity: dict[str, str] | None = None,
    shareable: bool = False,
    consumes: dict[str, dict[str, str]] | None = None,
    taints: list[tuple[str, str, str]] | None = None,
    groups: list[str] | None = None,
) -> Raw:
    """`groups`: the compatibilityGroups of each counter consumption (KEP-5963)."""
    d: Raw = {"name": name, "attributes": {"type": {"string": "gpu"}}}
    if uuid:
        d["attributes"]["uuid"] = {"string": uuid}
    if capacity:
        d["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    if shareable:
        d["allowMultipleAllocations"] = True
    if consumes:
        d["consumesCounters"] = [
            {"counterSet": cs, "counters": {k: {"value": v} for k, v in counters.items()}}
            | ({"compatibilityGroups": list(groups)} if groups else {})
            for cs, counters in consumes.items()
        ]
    if taints:
        d["taints"] = [{"key": k, "value": v, "effect": e} for k, v, e in taints]
    return d


def slice_(
    name: str,
    driver: str,
    pool: str,
    devices: list[Raw],
    *,
    generation: int = 1,
    count: int = 1,
    node_name: str | None = None,
    counters: dict[str, dict[str, str]] | None = None,
) -> Raw:
    spec: Raw = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
    }
    if node_name:
        spec["nodeName"] = node_name
    else:
        spec["allNodes"] = True
    if devices:
        spec["devices"] = devices
    if counters:
        spec["sharedCounters"] = [
            {"name": cs, "counters": {k: {"value": v} for k, v in c.items()}}
            for cs, c in counters.items()
        ]
    return {
        "apiVersion": f"{DRA}/v1",
        "kind": "ResourceSlice",
        "metadata": _meta(name),
        "spec": spec,
    }


def result(
    request: str,
    driver: str,
    pool: str,
    device_name: str,
    *,
    share_id: str | None = None,
    consumed: dict[str, str] | None = None,
    admin: bool = False,
) -> Raw:
    r: Raw = {"request": request, "driver": driver, "pool": pool, "device": device_name}
    if share_id:
        r["shareID"] = share_id
    if consumed:
        r["consumedCapacity"] = dict(consumed)
    if admin:
        r["adminAccess"] = True
    return r


def claim(
    name: str,
    namespace: str = "team-a",
    *,
    uid: str | None = None,
    device_class_name: str = "gpu",
    results: list[Raw] | None = None,
    node_name: str | None = None,
    reserved: list[tuple[str, str]] | None = None,
    podgroup: str | None = None,
    deleting: bool = False,
    admin: bool = False,
    derived: dict[str, str] | None = None,
) -> Raw:
    """A claim with one request `gpu`; `results` allocates it, `reserved` (pod name, uid)
    reserves it for pods, `podgroup` for a PodGroup, `deleting` sets deletionTimestamp."""
    exactly: Raw = {
        "deviceClassName": device_class_name,
        "allocationMode": "ExactCount",
        "count": 1,
    }
    if admin:
        exactly["adminAccess"] = True
    if derived:  # KEP-6080: name -> CEL expression
        exactly["derivedAttributes"] = [{"name": n, "expression": e} for n, e in derived.items()]
    obj: Raw = {
        "apiVersion": f"{DRA}/v1",
        "kind": "ResourceClaim",
        "metadata": _meta(name, namespace, uid),
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }
    status: Raw = {}
    if results is not None:
        status["allocation"] = {"devices": {"results": results}}
        obj["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        if node_name:
            status["allocation"]["nodeSelector"] = {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            }
    consumers = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved or []]
    if podgroup:
        consumers.append(
            {
                "apiGroup": "scheduling.k8s.io",
                "resource": "podgroups",
                "name": podgroup,
                "uid": f"uid-pg-{podgroup}",
            }
        )
    if consumers:
        status["reservedFor"] = consumers
    if status:
        obj["status"] = status
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-05-01T01:00:00Z"
    return obj


def pod(
    name: str,
    namespace: str = "team-a",
    *,
    uid: str | None = None,
    claims: list[str] = (),  # type: ignore[assignment]
    phase: str = "Pending",
    node_name: str | None = None,
    podgroup: str | None = None,
) -> Raw:
    spec: Raw = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"claims": [{"name": f"c{i}"} for i in range(len(claims))]},
            }
        ],
        "resourceClaims": [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
    }
    if node_name:
        spec["nodeName"] = node_name
    if podgroup:
        spec["schedulingGroup"] = {"podGroupName": podgroup}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, namespace, uid),
        "spec": spec,
        "status": {"phase": phase},
    }


def pod_group(
    name: str, namespace: str = "team-a", *, uid: str | None = None, claim: str | None = None,
    template: str | None = None, generated: str | None = None,
) -> Raw:  # fmt: skip
    """A scheduling.k8s.io/v1beta1 PodGroup (KEP-5729) sharing one claim among its pods: named
    (`claim`), or made from `template` (`generated`: the name its status records)."""
    entry: Raw = {"name": "shared"}
    if claim:
        entry["resourceClaimName"] = claim
    if template:
        entry["resourceClaimTemplateName"] = template
    body: Raw = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": _meta(name, namespace, uid),
        "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [entry]},
    }
    if generated:
        body["status"] = {
            "resourceClaimStatuses": [{"name": "shared", "resourceClaimName": generated}]
        }
    return body


def taint_rule(
    name: str, key: str, effect: str, *, driver: str | None = None, pool: str | None = None,
    device_name: str | None = None, version: str = "v1alpha3",
    device_class_name: str | None = None, cel: tuple[str, ...] = (),
) -> Raw:  # fmt: skip
    """`device_class_name` and `cel` (the selectors' expressions): v1alpha3 as 1.33/1.34 serve it."""
    selector: Raw = {
        k: v
        for k, v in (
            ("driver", driver),
            ("pool", pool),
            ("device", device_name),
            ("deviceClassName", device_class_name),
        )
        if v
    }
    if cel:
        selector["selectors"] = [{"cel": {"expression": e}} for e in cel]
    return {
        "apiVersion": f"{DRA}/{version}",
        "kind": "DeviceTaintRule",
        "metadata": _meta(name),
        "spec": {"deviceSelector": selector, "taint": {"key": key, "value": "", "effect": effect}},
    }


def render(obj: Raw, version: str) -> Raw:
    """`obj` (a resource.k8s.io/v1 object) as the API server serves it in `version`."""
    if not obj.get("apiVersion", "").startswith(f"{DRA}/") or obj["kind"] == "DeviceTaintRule":
        return obj
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{DRA}/{version}"
    if version != "v1beta1":
        return out
    if out["kind"] == "ResourceSlice":
        for d in out["spec"].get("devices") or []:
            fields = {k: d.pop(k) for k in list(d) if k != "name"}
            d["basic"] = fields
    if out["kind"] in ("ResourceClaim", "ResourceClaimTemplate"):
        spec = out["spec"] if out["kind"] == "ResourceClaim" else out["spec"]["spec"]
        for request in spec["devices"]["requests"]:
            request.update(request.pop("exactly", {}))
    return out
