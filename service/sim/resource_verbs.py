"""The resource verbs of a simulated cluster's API: what kube-apiserver does with a request on
a resource path (`/api/v1/…`, `/apis/resource.k8s.io/{version}/…`).

On a collection: GET lists (paged, label and field selectors, `resourceVersion` semantics,
server-side Tables) or, with `?watch=1`, watches; POST creates; DELETE deletes what matches
(deletecollection). On an object or its `status`: GET, PUT, PATCH (JSON merge, JSON patch,
strategic merge as merge, server-side apply, which creates when absent) and DELETE (with
preconditions, `propagationPolicy` and `dryRun`). Objects are stored in v1 and converted to
the request's version and back (`Target.served`, `incoming`); LIST bodies are assembled from
cached per-object JSON. Failures raise `ApiError`; the app answers them as Status bodies.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from dra_mirror.service.model.kinds import DRA_GROUP
from dra_mirror.service.sim import tables
from dra_mirror.service.sim.errors import ApiError, bad_request, not_found
from dra_mirror.service.sim.faults import StreamFaults
from dra_mirror.service.sim.listing import list_page
from dra_mirror.service.sim.patches import APPLY, JSON_PATCH, decode_body, json_patch, patch_type
from dra_mirror.service.sim.selectors import combine, parse_fields, parse_labels
from dra_mirror.service.sim.served import ServedCluster
from dra_mirror.service.sim.store import list_item, merge_patch
from dra_mirror.service.sim.targets import (
    Target,
    check_identity,
    delete_options,
    incoming,
    read_body,
    wants_table,
    writing,
)
from dra_mirror.service.sim.watching import WatchRequest, watch_stream

__all__ = ["JSON", "ResourceVerbs", "error_response", "json_response"]

JSON = "application/json"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=JSON, headers=headers)


def error_response(error: ApiError) -> Response:
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else None
    return json_response(error.status(), error.code, headers)


class ResourceVerbs:
    """The verbs on one served cluster's resources."""

    def __init__(self, cluster: ServedCluster) -> None:
        self.cluster = cluster
        self.store = cluster.store

    async def objects(self, request: Request, target: Target) -> Response:
        """One request on a resource path: the verb by method, collection or object."""
        method = request.method
        name = target.name
        if name is None:
            if method == "GET":
                if request.query_params.get("watch", "").lower() in ("1", "true"):
                    return self.watch(request, target)
                return self.list_objects(request, target)
            if method == "POST":
                return self.create(target, await read_body(request), request)
            if method == "DELETE":
                return self.delete_collection(request, target)
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on a collection")
        if method == "GET":
            obj = self.store.stored(target.plural, (target.namespace or "", name))
            if obj is None:
                raise not_found(target.plural, target.group, name)
            if wants_table(request):  # `kubectl get KIND NAME`: one row, the list's columns
                return json_response(
                    tables.table(
                        target.plural,
                        [obj],
                        resource_version=str(obj["metadata"].get("resourceVersion") or ""),
                        include_object=request.query_params.get("includeObject") or "Metadata",
                        served=target.served,
                    )
                )
            return json_response(target.served(obj))
        if method == "PUT":
            body = incoming(target, await read_body(request))
            check_identity(target, body)
            return json_response(
                target.served(
                    self.store.update(
                        target.plural, body, subresource=target.subresource, **writing(request)
                    )
                )
            )
        if method == "PATCH":
            return await self.patch(request, target, name)
        if method == "DELETE":
            options = await delete_options(request)
            current = self.store.stored(target.plural, (target.namespace or "", name))
            preconditions = options.get("preconditions") or {}
            if current is not None and any(
                preconditions.get(f) not in (None, current["metadata"].get(f))
                for f in ("uid", "resourceVersion")
            ):
                raise ApiError(
                    409,
                    "Conflict",
                    f"Precondition failed: {preconditions} (current uid "
                    f"{current['metadata'].get('uid')}, resourceVersion "
                    f"{current['metadata'].get('resourceVersion')})",
                )
            policy = request.query_params.get("propagationPolicy") or options.get(
                "propagationPolicy"
            )
            dry = writing(request)["dry_run"] or "All" in (options.get("dryRun") or [])
            if current is not None and policy == "Orphan" and not dry:
                self.cluster.garbage.orphaned.add(current["metadata"].get("uid", ""))
            return json_response(
                target.served(self.store.delete(target.plural, target.namespace, name, dry_run=dry))
            )
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    def create(self, target: Target, body: Any, request: Request) -> Response:
        if target.subresource is not None:
            raise ApiError(405, "MethodNotAllowed", "POST is not supported on a subresource")
        obj = incoming(target, body)
        meta = obj.setdefault("metadata", {})
        if target.resource.namespaced:
            if meta.get("namespace") and meta["namespace"] != target.namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = target.namespace or "default"
        return json_response(
            target.served(self.store.create(target.plural, obj, **writing(request))), 201
        )

    async def patch(self, request: Request, target: Target, name: str) -> Response:
        kind = patch_type(request.headers.get("content-type", ""))
        body = decode_body(await request.body(), kind)
        key = (target.namespace or "", name)
        current = self.store.stored(target.plural, key)
        options = writing(request)
        if kind == APPLY:
            options["operation"] = "Apply"  # server-side apply: recorded as such
            if not isinstance(body, dict):
                raise bad_request("an apply patch must be an object")
            if current is None:
                obj = incoming(target, body)
                obj.setdefault("metadata", {}).update(name=name)
                if target.resource.namespaced:
                    obj["metadata"]["namespace"] = target.namespace
                return json_response(
                    target.served(self.store.create(target.plural, obj, **options)), 201
                )
            body = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
            if isinstance(body.get("metadata"), dict):
                body["metadata"].pop("resourceVersion", None)
        if current is None:
            raise not_found(target.plural, target.group, name)
        if kind == JSON_PATCH:
            patched = json_patch(target.served(current), body)
            obj = incoming(target, patched)
            check_identity(target, obj)
            if not isinstance(body, list) or not any(
                op.get("path") == "/metadata/resourceVersion" for op in body if isinstance(op, dict)
            ):
                obj["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            return json_response(
                target.served(
                    self.store.update(target.plural, obj, subresource=target.subresource, **options)
                )
            )
        if not isinstance(body, dict):
            raise bad_request("a merge patch must be an object")
        if target.group == DRA_GROUP and target.version == "v1beta1":
            # Merge in the client's version, then convert the result back to storage.
            merged = merge_patch(target.served(current), body)
            obj = incoming(target, merged)
            sent = body.get("metadata")
            if not (isinstance(sent, dict) and sent.get("resourceVersion")):
                obj["metadata"].pop("resourceVersion", None)
            return json_response(
                target.served(
                    self.store.update(target.plural, obj, subresource=target.subresource, **options)
                )
            )
        return json_response(
            target.served(
                self.store.patch(
                    target.plural,
                    target.namespace,
                    name,
                    body,
                    subresource=target.subresource,
                    **options,
                )
            )
        )

    def list_objects(self, request: Request, target: Target) -> Response:
        params = request.query_params
        try:
            limit = int(params.get("limit") or 0)
        except ValueError as error:
            raise bad_request("limit must be an integer") from error
        matches = combine(
            parse_labels(params.get("labelSelector")),
            parse_fields(params.get("fieldSelector"), target.plural),
        )
        page = list_page(
            self.store,
            target.plural,
            target.namespace,
            limit=max(limit, 0),
            continue_token=params.get("continue") or "",
            rv=params.get("resourceVersion"),
            rv_match=params.get("resourceVersionMatch"),
            matches=matches,
        )
        if wants_table(request):
            return json_response(
                tables.table(
                    target.plural,
                    [obj for _, obj, _ in page.items],
                    resource_version=str(page.resource_version),
                    continue_token=page.continue_token,
                    remaining=page.remaining,
                    include_object=params.get("includeObject") or "Metadata",
                    served=target.served,
                )
            )
        meta: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            meta["continue"] = page.continue_token
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
        head = orjson.dumps(
            {
                "kind": target.resource.list_kind,
                "apiVersion": target.group_version,
                "metadata": meta,
            }
        )
        items = b",".join(
            target.item_bytes(self.store, key, obj, current) for key, obj, current in page.items
        )
        return Response(head[:-1] + b',"items":[' + items + b"]}", media_type=JSON)

    def delete_collection(self, request: Request, target: Target) -> Response:
        matches = combine(
            parse_labels(request.query_params.get("labelSelector")),
            parse_fields(request.query_params.get("fieldSelector"), target.plural),
        )
        gone = []
        for obj in list(self.store.iter_objects(target.plural, target.namespace)):
            if matches is None or matches(obj):
                meta = obj["metadata"]
                gone.append(
                    target.served(
                        self.store.delete(target.plural, meta.get("namespace"), meta["name"])
                    )
                )
        return json_response(
            {
                "kind": target.resource.list_kind,
                "apiVersion": target.group_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": [list_item(o) for o in gone],
            }
        )

    def watch(self, request: Request, target: Target) -> Response:
        params = dict(request.query_params)
        wreq = WatchRequest(params, self.cluster.default_watch_timeout)
        matches = combine(
            parse_labels(params.get("labelSelector")),
            parse_fields(params.get("fieldSelector"), target.plural),
        )
        stream_faults: StreamFaults | ApiError
        try:
            stream_faults = self.cluster.faults.before_watch()
        except ApiError as error:
            stream_faults = error
        as_table = wants_table(request)
        include_object = params.get("includeObject") or "Metadata"
        rv_now = lambda: str(self.store.resource_version)  # noqa: E731

        def encode(obj: dict) -> Any:
            if as_table:
                return tables.table(
                    target.plural,
                    [obj],
                    resource_version=rv_now(),
                    now=datetime.now(UTC),
                    include_object=include_object,
                    served=target.served,
                )
            return target.served(obj)

        def bookmark(rv: int, initial_end: bool) -> dict:
            meta: dict[str, Any] = {"resourceVersion": str(rv)}
            if initial_end:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            return {
                "kind": target.resource.kind,
                "apiVersion": target.group_version,
                "metadata": meta,
            }

        body = watch_stream(
            self.cluster,
            target.plural,
            target.namespace,
            wreq,
            matches=matches,
            encode=encode,
            bookmark=bookmark,
            stream_faults=stream_faults,
        )
        return StreamingResponse(
            body, media_type=JSON, headers={"Cache-Control": "no-cache, private"}
        )
