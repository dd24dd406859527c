"""The HTTP face of one simulated cluster: a Starlette app speaking the Kubernetes API.

`build_app(cluster)` serves discovery (discovery.py), the resource paths

    /api/v1/{plural}[/{name}[/status]]
    /api/v1/namespaces/{ns}/{plural}[/{name}[/status]]
    /apis/resource.k8s.io/{version}/...same shapes...

with GET (one, LIST, WATCH), POST, PUT, PATCH, DELETE, and the admin endpoints
`GET /sim/status`, `GET|POST /sim/faults`. Every failure is a Kubernetes Status body with
the matching HTTP code. Objects are stored in v1 and converted per request (convert.py);
LIST bodies are assembled from cached per-object JSON so that ~90,000 objects page out in
seconds. `Accept: …;as=Table;g=meta.k8s.io;v=v1` gets a server-side Table (tables.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dra_mirror.service.model.kinds import DRA_GROUP
from dra_mirror.service.sim import discovery, openapi, tables
from dra_mirror.service.sim.errors import ApiError, bad_request, not_found
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

log = logging.getLogger(__name__)
_JSON = "application/json"
_WRITE_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=_JSON, headers=headers)


def error_response(error: ApiError) -> Response:
    headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else None
    return json_response(error.status(), error.code, headers)


class _FaultGate:
    """ASGI middleware: injected 5xx/429 answers before anything else runs."""

    def __init__(self, app: ASGIApp, cluster: ServedCluster) -> None:
        self.app, self.cluster = app, cluster

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.cluster.requests += 1
            path = scope["path"]
            if not path.startswith("/sim/"):
                try:
                    self.cluster.faults.before_request(path)
                except ApiError as error:
                    await error_response(error)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def build_app(cluster: ServedCluster) -> ASGIApp:
    """The ASGI app serving `cluster`."""
    store = cluster.store

    def guarded(fn: Callable) -> Callable:
        async def endpoint(request: Request) -> Response:
            try:
                return await fn(request)
            except ApiError as error:
                return error_response(error)
            except Exception as error:  # a simulator bug: answer as kube-apiserver would
                log.exception(
                    "cluster %s: %s %s failed", cluster.name, request.method, request.url.path
                )
                return error_response(
                    ApiError(500, "InternalError", f"Internal error occurred: {error!r}")
                )

        return endpoint

    async def version(request: Request) -> Response:
        return json_response(discovery.version_info())

    async def api(request: Request) -> Response:
        return json_response(discovery.api_versions(f"127.0.0.1:{cluster.port}"))

    async def core_resources(request: Request) -> Response:
        return json_response(discovery.resource_list("", "v1"))

    async def apis(request: Request) -> Response:
        return json_response(discovery.api_group_list(cluster.served_versions()))

    async def dra_group(request: Request) -> Response:
        if not cluster.served_versions():
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return json_response(discovery.api_group(cluster.served_versions()))

    async def dra_resources(request: Request) -> Response:
        version = request.path_params["version"]
        cluster.check_version(version)
        return json_response(discovery.resource_list(DRA_GROUP, version))

    async def core_objects(request: Request) -> Response:
        if not request.path_params["rest"].strip("/"):
            return await core_resources(request)
        return await objects(request, Target("", "v1", request.path_params["rest"]))

    async def dra_objects(request: Request) -> Response:
        version = request.path_params["version"]
        cluster.check_version(version)
        if not request.path_params["rest"].strip("/"):
            return await dra_resources(request)
        return await objects(request, Target(DRA_GROUP, version, request.path_params["rest"]))

    async def objects(request: Request, target: Target) -> Response:
        method = request.method
        if target.name is None:
            if method == "GET":
                if request.query_params.get("watch", "").lower() in ("1", "true"):
                    return watch(request, target)
                return list_objects(request, target)
            if method == "POST":
                return create(target, await read_body(request), request)
            if method == "DELETE":
                return delete_collection(request, target)
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on a collection")
        if method == "GET":
            obj = store.stored(target.plural, (target.namespace or "", target.name))
            if obj is None:
                raise not_found(target.plural, target.group, target.name)
            return json_response(target.served(obj))
        if method == "PUT":
            body = incoming(target, await read_body(request))
            check_identity(target, body)
            return json_response(
                target.served(
                    store.update(
                        target.plural, body, subresource=target.subresource, **writing(request)
                    )
                )
            )
        if method == "PATCH":
            return await patch(request, target)
        if method == "DELETE":
            options = await delete_options(request)
            current = store.stored(target.plural, (target.namespace or "", target.name))
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
                cluster.garbage.orphaned.add(current["metadata"].get("uid", ""))
            return json_response(
                target.served(
                    store.delete(target.plural, target.namespace, target.name, dry_run=dry)
                )
            )
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")

    def create(target: Target, body: Any, request: Request) -> Response:
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
            target.served(store.create(target.plural, obj, **writing(request))), 201
        )

    async def patch(request: Request, target: Target) -> Response:
        kind = patch_type(request.headers.get("content-type", ""))
        body = decode_body(await request.body(), kind)
        key = (target.namespace or "", target.name)
        current = store.stored(target.plural, key)
        options = writing(request)
        if kind == APPLY:
            options["operation"] = "Apply"  # server-side apply: recorded as such
            if not isinstance(body, dict):
                raise bad_request("an apply patch must be an object")
            if current is None:
                obj = incoming(target, body)
                obj.setdefault("metadata", {}).update(name=target.name)
                if target.resource.namespaced:
                    obj["metadata"]["namespace"] = target.namespace
                return json_response(
                    target.served(store.create(target.plural, obj, **options)), 201
                )
            body = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
            if isinstance(body.get("metadata"), dict):
                body["metadata"].pop("resourceVersion", None)
        if current is None:
            raise not_found(target.plural, target.group, target.name)
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
                    store.update(target.plural, obj, subresource=target.subresource, **options)
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
                    store.update(target.plural, obj, subresource=target.subresource, **options)
                )
            )
        return json_response(
            target.served(
                store.patch(
                    target.plural,
                    target.namespace,
                    target.name,
                    body,
                    subresource=target.subresource,
                    **options,
                )
            )
        )

    def list_objects(request: Request, target: Target) -> Response:
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
            store,
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
            target.item_bytes(store, key, obj, current) for key, obj, current in page.items
        )
        return Response(head[:-1] + b',"items":[' + items + b"]}", media_type=_JSON)

    def delete_collection(request: Request, target: Target) -> Response:
        matches = combine(
            parse_labels(request.query_params.get("labelSelector")),
            parse_fields(request.query_params.get("fieldSelector"), target.plural),
        )
        gone = []
        for obj in list(store.iter_objects(target.plural, target.namespace)):
            if matches is None or matches(obj):
                meta = obj["metadata"]
                gone.append(
                    target.served(store.delete(target.plural, meta.get("namespace"), meta["name"]))
                )
        return json_response(
            {
                "kind": target.resource.list_kind,
                "apiVersion": target.group_version,
                "metadata": {"resourceVersion": str(store.resource_version)},
                "items": [list_item(o) for o in gone],
            }
        )

    def watch(request: Request, target: Target) -> Response:
        params = dict(request.query_params)
        wreq = WatchRequest(params, cluster.default_watch_timeout)
        matches = combine(
            parse_labels(params.get("labelSelector")),
            parse_fields(params.get("fieldSelector"), target.plural),
        )
        try:
            stream_faults = cluster.faults.before_watch()
        except ApiError as error:
            stream_faults = error
        as_table = wants_table(request)
        include_object = params.get("includeObject") or "Metadata"
        rv_now = lambda: str(store.resource_version)  # noqa: E731

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
            cluster,
            target.plural,
            target.namespace,
            wreq,
            matches=matches,
            encode=encode,
            bookmark=bookmark,
            stream_faults=stream_faults,
        )
        return StreamingResponse(
            body, media_type=_JSON, headers={"Cache-Control": "no-cache, private"}
        )

    async def sim_status(request: Request) -> Response:
        return json_response(cluster.status())

    async def sim_faults(request: Request) -> Response:
        if request.method == "POST":
            changes = decode_body(await request.body(), request.headers.get("content-type", _JSON))
            if not isinstance(changes, dict):
                raise bad_request("faults must be a JSON object")
            cluster.apply_faults(changes)
        return json_response(cluster.faults.settings)

    async def openapi_index(request: Request) -> Response:
        return json_response(openapi.index(cluster.served_versions()))

    async def openapi_core(request: Request) -> Response:
        return json_response(openapi.document("", "v1"))

    async def openapi_dra(request: Request) -> Response:
        version = request.path_params["version"]
        cluster.check_version(version)
        return json_response(openapi.document(DRA_GROUP, version))

    async def openapi_v2(request: Request) -> Response:
        # kubectl reads /openapi/v2 only as protobuf (openapi_v2.Document) to validate kinds
        # it cannot check through /openapi/v3 (e.g. `kind: List` files). A document with no
        # definitions makes it skip client-side validation, leaving it to the server.
        return Response(openapi.EMPTY_V2_PROTOBUF, media_type=openapi.V2_PROTOBUF)

    async def healthz(request: Request) -> Response:
        return Response(b"ok", media_type="text/plain")

    routes = [
        Route("/version", guarded(version)),
        Route("/api", guarded(api)),
        Route("/api/v1", guarded(core_resources)),
        Route("/apis", guarded(apis)),
        Route("/apis/resource.k8s.io", guarded(dra_group)),
        Route("/apis/resource.k8s.io/{version}", guarded(dra_resources)),
        Route("/api/v1/{rest:path}", guarded(core_objects), methods=_WRITE_METHODS),
        Route(
            "/apis/resource.k8s.io/{version}/{rest:path}",
            guarded(dra_objects),
            methods=_WRITE_METHODS,
        ),
        Route("/sim/status", guarded(sim_status)),
        Route("/sim/faults", guarded(sim_faults), methods=["GET", "POST"]),
        Route("/openapi/v2", guarded(openapi_v2)),
        Route("/openapi/v3", guarded(openapi_index)),
        Route("/openapi/v3/api/v1", guarded(openapi_core)),
        Route("/openapi/v3/apis/resource.k8s.io/{version}", guarded(openapi_dra)),
        Route("/healthz", healthz),
        Route("/readyz", healthz),
        Route("/livez", healthz),
    ]
    return _FaultGate(Starlette(routes=routes), cluster)
