"""A minimal OpenAPI v3 surface, enough for kubectl to trust server-side validation.

Before `kubectl apply/create` sends an object it decides how to validate it: if the
group-version's OpenAPI v3 document shows a PATCH operation for the object's kind
(`x-kubernetes-group-version-kind`) that accepts the `fieldValidation` query parameter,
kubectl leaves validation to the server (`?fieldValidation=Strict`); otherwise it
downloads the full OpenAPI schema to validate client-side and fails without it. So the
simulator publishes `/openapi/v3` (the index) and one small document per group-version
listing the resource paths with that parameter. No schemas are published: kubectl then
falls back to JSON merge patches for `apply` of DRA kinds, which the server supports.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.model.kinds import BY_PLURAL

V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
# openapi_v2.Document with only field 1 (swagger) = "2.0", protobuf wire format.
EMPTY_V2_PROTOBUF = b"\x0a\x032.0"

_PARAMS = [
    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}, "uniqueItems": True},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}, "uniqueItems": True},
    {"name": "dryRun", "in": "query", "schema": {"type": "string"}, "uniqueItems": True},
]


def index(groups: dict[str, list[str]]) -> dict[str, Any]:
    """`/openapi/v3`: where each group-version's document lives (group -> versions)."""
    paths = {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=sim"}}
    for group, versions in groups.items():
        for version in versions:
            gv = f"apis/{group}/{version}"
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash=sim"}
    return {"paths": paths}


def document(group: str, version: str) -> dict[str, Any]:
    """The OpenAPI v3 document of one group-version (paths and operations only)."""
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    paths: dict[str, Any] = {}
    for res in BY_PLURAL.values():
        if res.group != group:
            continue
        gvk = {"group": group, "version": version, "kind": res.kind}
        base = (
            f"{prefix}/namespaces/{{namespace}}/{res.plural}"
            if res.namespaced
            else f"{prefix}/{res.plural}"
        )

        def op(action: str, gvk: dict = gvk) -> dict[str, Any]:
            return {
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": _PARAMS,
                "responses": {"200": {"description": "OK"}},
            }

        paths[base] = {"get": op("list"), "post": op("post")}
        item = {"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}
        paths[f"{base}/{{name}}"] = item
        if res.has_status:
            paths[f"{base}/{{name}}/status"] = {
                "get": op("get"),
                "put": op("put"),
                "patch": op("patch"),
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (dra-mirror simulator)", "version": "v1.35.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }
