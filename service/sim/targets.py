"""What a resource request names and carries: path target, body, write options.

`Target` parses `/api/v1/...` and `/apis/resource.k8s.io/<v>/...` remainders into
(resource, namespace, name, subresource) with kube-apiserver's 404s for paths it does not
serve, and converts objects between the served version and storage. The helpers read a
request's body (JSON or YAML), its DeleteOptions, its field manager and dry-run flag, and
check that a body's name and namespace agree with the URL (400 otherwise).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request

from dra_mirror.service.model.kinds import BY_PLURAL, DRA_GROUP, Resource
from dra_mirror.service.sim.convert import to_served, to_storage, tombstones_rule_selectors
from dra_mirror.service.sim.errors import ApiError, bad_request, not_found
from dra_mirror.service.sim.patches import decode_body
from dra_mirror.service.sim.store import ClusterStore, Key, list_item

_JSON = "application/json"


class Target:
    """What a resource path names."""

    def __init__(
        self, group: str, version: str, rest: str, *, kubernetes: int | None = None
    ) -> None:
        """`kubernetes`: the minor of the release served (convert.py: DeviceTaintRules)."""
        segs = [s for s in rest.split("/") if s]
        self.group, self.version, self.kubernetes = group, version, kubernetes
        self.namespace: str | None = None
        self.name: str | None = None
        self.subresource: str | None = None
        core_namespace_status = group == "" and len(segs) == 3 and segs[2] == "status"
        if segs and segs[0] == "namespaces" and len(segs) >= 3 and not core_namespace_status:
            self.namespace, segs = segs[1], segs[2:]
        if not segs or len(segs) > 3:
            raise not_found("", group, rest)
        plural = segs[0]
        res = BY_PLURAL.get(plural)
        if res is None or res.group != group:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if self.namespace is not None and not res.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        self.resource: Resource = res
        if len(segs) >= 2:
            self.name = segs[1]
        if len(segs) == 3:
            if segs[2] != "status" or not res.has_status:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            self.subresource = "status"
        if self.name is not None and res.namespaced and self.namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    @property
    def plural(self) -> str:
        return self.resource.plural

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def served(self, obj: dict) -> dict:
        if self.group == DRA_GROUP:
            return to_served(self.plural, obj, self.version, kubernetes=self.kubernetes)
        if self.group and "apiVersion" in obj:  # another group: one shape at every version
            return {**obj, "apiVersion": self.group_version}
        return obj

    def item_bytes(self, store: ClusterStore, key: Key, obj: dict, current: bool) -> bytes:
        if (self.group and self.group != DRA_GROUP) or (self.group == DRA_GROUP and (
            self.version == "v1beta1"
            or (self.plural == "devicetaintrules" and tombstones_rule_selectors(self.kubernetes))
        )):  # fmt: skip
            return orjson.dumps(list_item(self.served(obj)))
        if current:
            return store.encoded(self.plural, key)
        return orjson.dumps(list_item(obj))


def wants_table(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    first = accept.split(",", 1)[0]
    return "as=Table" in first


async def read_body(request: Request) -> Any:
    body = decode_body(await request.body(), request.headers.get("content-type", _JSON))
    if not isinstance(body, dict):
        raise bad_request("the request body must be an object")
    return body


async def delete_options(request: Request) -> dict[str, Any]:
    """The DeleteOptions body of a DELETE (kubectl sends dryRun and propagationPolicy there).
    propagationPolicy is accepted; dependents are not garbage-collected by the simulator."""
    raw = await request.body()
    if not raw.strip():
        return {}
    options = decode_body(raw, request.headers.get("content-type", _JSON))
    return options if isinstance(options, dict) else {}


def writing(request: Request) -> dict[str, Any]:
    """Field manager and dry-run of a write: `?fieldManager=` or, as kube-apiserver does, the
    User-Agent up to its first "/" (kubectl, OpenAPI-Generator …); `?dryRun=All`."""
    manager = request.query_params.get("fieldManager")
    if not manager:
        manager = request.headers.get("user-agent", "").split("/", 1)[0] or "unknown"
    return {"manager": manager[:128], "dry_run": request.query_params.get("dryRun") == "All"}


def incoming(target: Target, body: Any) -> dict:
    """A request body as a storage-shaped object (400 if it is not a JSON object with an
    object `metadata`, as kube-apiserver's decoder refuses it)."""
    if not isinstance(body, dict):
        raise bad_request("the request body must be an object")
    if body.get("metadata") is None:
        body = {**body, "metadata": {}}
    if not isinstance(body["metadata"], dict):
        raise bad_request("metadata: the object's metadata must be an object")
    if target.group == DRA_GROUP:
        sent = body.get("apiVersion")
        if sent and sent != target.group_version:
            raise bad_request(
                f"the API version in the data ({sent}) does not match the expected API version "
                f"({target.group_version})"
            )
        return to_storage(target.plural, body, target.version)
    if target.group:  # another group: stored as written, under the version written
        return {**body, "apiVersion": target.group_version}
    return body


def check_identity(target: Target, body: dict) -> None:
    meta = body.get("metadata") or {}
    if meta.get("name") and meta["name"] != target.name:
        raise bad_request("the name of the object does not match the name on the URL")
    if target.resource.namespaced:
        if meta.get("namespace") and meta["namespace"] != target.namespace:
            raise bad_request("the namespace of the object does not match the namespace on the URL")
        meta["namespace"] = target.namespace
    meta["name"] = target.name
    body["metadata"] = meta
