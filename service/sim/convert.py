"""Conversion between the storage shape (resource.k8s.io/v1) and the served versions.

kube-apiserver stores one version and converts on the way in and out; so does the
simulator. `v1beta2` has the v1 shape (only `apiVersion` differs). `v1beta1` differs in two
places (k8s.io/api resource/v1beta1 types.go):

* ResourceSlice devices wrap everything but the name in `basic`:
  v1 `{name, attributes, …}`  <->  v1beta1 `{name, basic: {attributes, …}}`.
* ResourceClaim (and the claim spec inside a ResourceClaimTemplate) requests are flat:
  v1 `{name, exactly: {deviceClassName, …}}`  <->  v1beta1 `{name, deviceClassName, …}`;
  `firstAvailable` stays at the request level in both.

DeviceTaintRules differ by Kubernetes release, not by version: 1.33 and 1.34 serve
`spec.deviceSelector.deviceClassName` and `selectors` in v1alpha3, tombstoned in 1.35
(kubernetes/api resource/v1alpha3/types.go). A 1.35+ server decodes a rule into a type without
them, so `to_served(..., kubernetes=35)` (and later releases, or none given) drops them,
whatever was written.

`to_served` and `to_storage` return new dicts and never change their input. Core objects
and DeviceClasses pass through with only `apiVersion` set.
"""

from __future__ import annotations

from collections.abc import Callable

from dra_mirror.service.model.kinds import DRA_GROUP

# Fields of v1 ExactDeviceRequest that v1beta1 has at the request level.
_EXACT_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


# DeviceTaintSelector fields of 1.33/1.34 only.
_TOMBSTONED_SELECTOR = ("deviceClassName", "selectors")
TOMBSTONED_IN = 35


def to_served(plural: str, obj: dict, version: str, *, kubernetes: int | None = None) -> dict:
    """The storage object `obj` as clients of `resource.k8s.io/<version>` of Kubernetes
    1.<kubernetes> see it."""
    out = dict(obj)
    if "apiVersion" in out:
        out["apiVersion"] = f"{DRA_GROUP}/{version}"
    if plural == "devicetaintrules" and tombstones_rule_selectors(kubernetes):
        return _without_tombstoned(out)
    if version != "v1beta1":
        return out
    if plural == "resourceslices" and "spec" in obj:
        spec = dict(obj["spec"])
        if "devices" in spec:
            spec["devices"] = [_device_to_v1beta1(d) for d in spec["devices"] or []]
        out["spec"] = spec
    elif plural == "resourceclaims" and "spec" in obj:
        out["spec"] = _claim_spec(obj["spec"], _request_to_v1beta1)
    elif plural == "resourceclaimtemplates" and "spec" in obj:
        template = dict(obj["spec"])
        if "spec" in template:
            template["spec"] = _claim_spec(template["spec"], _request_to_v1beta1)
        out["spec"] = template
    return out


def to_storage(plural: str, obj: dict, version: str) -> dict:
    """An object written as `resource.k8s.io/<version>`, in the v1 storage shape."""
    out = dict(obj)
    out["apiVersion"] = f"{DRA_GROUP}/v1"
    if version != "v1beta1":
        return out
    if plural == "resourceslices" and isinstance(obj.get("spec"), dict):
        spec = dict(obj["spec"])
        if "devices" in spec:
            spec["devices"] = [_device_to_v1(d) for d in spec["devices"] or []]
        # v1beta1's nodeName and allNodes are not pointers: "" and false mean unset.
        if spec.get("nodeName") == "":
            spec.pop("nodeName")
        if spec.get("allNodes") is False:
            spec.pop("allNodes")
        out["spec"] = spec
    elif plural == "resourceclaims" and isinstance(obj.get("spec"), dict):
        out["spec"] = _claim_spec(obj["spec"], _request_to_v1)
    elif plural == "resourceclaimtemplates" and isinstance(obj.get("spec"), dict):
        template = dict(obj["spec"])
        if isinstance(template.get("spec"), dict):
            template["spec"] = _claim_spec(template["spec"], _request_to_v1)
        out["spec"] = template
    return out


def tombstones_rule_selectors(kubernetes: int | None) -> bool:
    """Whether 1.<kubernetes> no longer serves a rule's deviceClassName and selectors."""
    return kubernetes is None or kubernetes >= TOMBSTONED_IN


def _without_tombstoned(rule: dict) -> dict:
    spec = rule.get("spec")
    if not isinstance(spec, dict):
        return rule
    selector = spec.get("deviceSelector")
    if not isinstance(selector, dict) or not any(f in selector for f in _TOMBSTONED_SELECTOR):
        return rule
    kept = {k: v for k, v in selector.items() if k not in _TOMBSTONED_SELECTOR}
    return {**rule, "spec": {**spec, "deviceSelector": kept}}


def _device_to_v1beta1(device: dict) -> dict:
    basic = {k: v for k, v in device.items() if k != "name"}
    out = {"name": device.get("name")} if "name" in device else {}
    out["basic"] = basic
    return out


def _device_to_v1(device: dict) -> dict:
    if not isinstance(device, dict):
        return device
    out = {k: v for k, v in device.items() if k != "basic"}
    basic = device.get("basic")
    if isinstance(basic, dict):
        out.update(basic)
    return out


def _claim_spec(spec: dict, convert_request: Callable[[dict], dict]) -> dict:
    out = dict(spec)
    devices = spec.get("devices")
    if isinstance(devices, dict) and isinstance(devices.get("requests"), list):
        out["devices"] = dict(devices, requests=[convert_request(r) for r in devices["requests"]])
    return out


def _request_to_v1beta1(request: dict) -> dict:
    out = {k: v for k, v in request.items() if k != "exactly"}
    exact = request.get("exactly")
    if isinstance(exact, dict):
        for field in _EXACT_FIELDS:
            if field in exact:
                out[field] = exact[field]
    return out


def _request_to_v1(request: dict) -> dict:
    if not isinstance(request, dict):
        return request
    out = {k: v for k, v in request.items() if k not in _EXACT_FIELDS}
    # v1beta1's deviceClassName is not a pointer: "" means unset (as with firstAvailable).
    exact = {k: request[k] for k in _EXACT_FIELDS if k in request and request[k] != ""}
    if exact:
        out["exactly"] = exact
    return out
