"""Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<group>[/<version>]`.

Shapes are the legacy (non-aggregated) discovery of kube-apiserver; kubectl and
kubernetes_asyncio fall back to them when the response is plain `application/json`.
The resource.k8s.io versions listed are the cluster's served versions minus those a
fault has hidden, preferred version first (v1, then v1beta2, then v1beta1, then v1alpha3);
each version's resource list names only the kinds served at it (`serves`): an optional kind
(DeviceTaintRule; PodGroup, in scheduling.k8s.io) has versions of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dra_mirror.service.model.kinds import ALL_DRA_VERSIONS, BY_PLURAL, DRA_GROUP, newest_first

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_STATUS_VERBS = ["get", "patch", "update"]


def version_info(minor: int = 35) -> dict[str, str]:
    return {
        "major": "1",
        "minor": str(minor),
        "emulationMajor": "1",
        "emulationMinor": str(minor),
        "gitVersion": f"v1.{minor}.0-dra-mirror-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def ordered(versions: set[str] | list[str] | tuple[str, ...]) -> list[str]:
    return [v for v in ALL_DRA_VERSIONS if v in versions]


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def resource_list(
    group: str, version: str, serves: Callable[[str, str], bool] | None = None
) -> dict[str, Any]:
    """The APIResourceList of one group version (`serves(plural, version)`: which kinds)."""
    resources: list[dict[str, Any]] = []
    for res in BY_PLURAL.values():
        if res.group != group or (serves is not None and not serves(res.plural, version)):
            continue
        entry: dict[str, Any] = {
            "name": res.plural,
            "singularName": res.singular,
            "namespaced": res.namespaced,
            "kind": res.kind,
            "verbs": _VERBS
            if res.plural != "namespaces"
            else [v for v in _VERBS if v != "deletecollection"],
        }
        if res.short_names:
            entry["shortNames"] = list(res.short_names)
        if res.plural == "pods":
            entry["categories"] = ["all"]
        resources.append(entry)
        if res.has_status:
            resources.append(
                {
                    "name": f"{res.plural}/status",
                    "singularName": "",
                    "namespaced": res.namespaced,
                    "kind": res.kind,
                    "verbs": _STATUS_VERBS,
                }
            )
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def api_group(versions: list[str], name: str = DRA_GROUP) -> dict[str, Any]:
    """The APIGroup document of `name` serving `versions` (newest first)."""
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in newest_first(versions)]
    group: dict[str, Any] = {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": listed,
    }
    if listed:
        group["preferredVersion"] = listed[0]
    return group


def api_group_list(groups: dict[str, list[str]]) -> dict[str, Any]:
    """`/apis`: every group with a served version (group -> versions)."""
    listed = []
    for name, versions in groups.items():
        if versions:
            group = api_group(versions, name)
            listed.append({k: v for k, v in group.items() if k not in ("kind", "apiVersion")})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": listed}
