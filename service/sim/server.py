"""The HTTP face of one simulated cluster: a Starlette app speaking the Kubernetes API.

`build_app(cluster)` serves discovery (discovery.py), the resource paths

    /api/v1/{plural}[/{name}[/status]]
    /api/v1/namespaces/{ns}/{plural}[/{name}[/status]]
    /apis/{group}/{version}/...same shapes... (resource.k8s.io; scheduling.k8s.io's PodGroups)

with GET (one, LIST, WATCH), POST, PUT, PATCH, DELETE (`resource_verbs.py`), OpenAPI v2/v3
for kubectl, the health probes, the review APIs (TokenReview, SubjectAccessReview and the self
reviews, answered from the scenario's RBAC: reviews.py; a bearer token the cluster does not
know is a 401 everywhere), and the admin endpoints `GET /sim/status`,
`GET|POST /sim/faults`, and each node's dcgm-exporter (`/sim/dcgm/…`, dcgm_routes.py). Injected faults (faults.py) answer before anything else runs. Every
failure is a Kubernetes Status body with the matching HTTP code; an unexpected exception is a
500 InternalError, logged with the request. Objects are stored in v1 and converted per request
(convert.py); LIST bodies are assembled from cached per-object JSON so that ~90,000 objects page
out in seconds. `Accept: …;as=Table;g=meta.k8s.io;v=v1` gets a server-side Table (tables.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dra_mirror.service.sim import discovery, openapi
from dra_mirror.service.sim.dcgm_routes import dcgm_routes
from dra_mirror.service.sim.errors import ApiError, bad_request
from dra_mirror.service.sim.patches import decode_body
from dra_mirror.service.sim.resource_verbs import (
    JSON,
    ResourceVerbs,
    error_response,
    json_response,
)
from dra_mirror.service.sim.reviews import review_routes
from dra_mirror.service.sim.served import ServedCluster
from dra_mirror.service.sim.targets import Target

log = logging.getLogger(__name__)
_WRITE_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


class _FaultGate:
    """ASGI middleware: injected 5xx/429 answers before anything else runs."""

    def __init__(self, app: ASGIApp, cluster: ServedCluster) -> None:
        self.app, self.cluster = app, cluster

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.cluster.requests += 1
            path = scope["path"]
            if self.cluster.access.tokens and not self._known_token(scope):
                # kube-apiserver answers 401 to a bearer token no authenticator accepts
                error = ApiError(401, "Unauthorized", "Unauthorized")
                await error_response(error)(scope, receive, send)
                return
            if not path.startswith("/sim/"):
                try:
                    self.cluster.faults.before_request(path)
                except ApiError as error:
                    await error_response(error)(scope, receive, send)
                    return
        await self.app(scope, receive, send)

    def _known_token(self, scope: Scope) -> bool:
        for name, value in scope.get("headers") or ():
            if name == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                return scheme.lower() == "bearer" and token.strip() in self.cluster.access.tokens
        return True  # no credentials: system:anonymous, as the rest of the simulator serves


def build_app(cluster: ServedCluster) -> ASGIApp:
    """The ASGI app serving `cluster`."""
    verbs = ResourceVerbs(cluster)

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
        return json_response(discovery.version_info(cluster.kubernetes or 35))

    async def api(request: Request) -> Response:
        return json_response(discovery.api_versions(f"127.0.0.1:{cluster.port}"))

    async def core_resources(request: Request) -> Response:
        return json_response(discovery.resource_list("", "v1"))

    async def apis(request: Request) -> Response:
        return json_response(discovery.api_group_list(cluster.served_groups()))

    async def group_document(request: Request) -> Response:
        group = request.path_params["group"]
        if not cluster.served_versions(group):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return json_response(discovery.api_group(cluster.served_versions(group), group))

    async def group_resources(request: Request) -> Response:
        group, version = request.path_params["group"], request.path_params["version"]
        cluster.check_version(version, group)
        return json_response(discovery.resource_list(group, version, cluster.serves))

    async def core_objects(request: Request) -> Response:
        if not request.path_params["rest"].strip("/"):
            return await core_resources(request)
        return await verbs.objects(request, Target("", "v1", request.path_params["rest"]))

    async def group_objects(request: Request) -> Response:
        group, version = request.path_params["group"], request.path_params["version"]
        cluster.check_version(version, group)
        if not request.path_params["rest"].strip("/"):
            return await group_resources(request)
        target = Target(group, version, request.path_params["rest"], kubernetes=cluster.kubernetes)
        if not cluster.serves(target.plural, version):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return await verbs.objects(request, target)

    async def sim_status(request: Request) -> Response:
        return json_response(cluster.status())

    async def sim_faults(request: Request) -> Response:
        if request.method == "POST":
            changes = decode_body(await request.body(), request.headers.get("content-type", JSON))
            if not isinstance(changes, dict):
                raise bad_request("faults must be a JSON object")
            cluster.apply_faults(changes)
        return json_response(cluster.faults.settings)

    async def openapi_index(request: Request) -> Response:
        return json_response(openapi.index(cluster.served_groups()))

    async def openapi_core(request: Request) -> Response:
        return json_response(openapi.document("", "v1"))

    async def openapi_group(request: Request) -> Response:
        group, version = request.path_params["group"], request.path_params["version"]
        cluster.check_version(version, group)
        return json_response(openapi.document(group, version))

    async def openapi_v2(request: Request) -> Response:
        # kubectl reads /openapi/v2 only as protobuf (openapi_v2.Document) to validate kinds
        # it cannot check through /openapi/v3 (e.g. `kind: List` files). A document with no
        # definitions makes it skip client-side validation, leaving it to the server.
        return Response(openapi.EMPTY_V2_PROTOBUF, media_type=openapi.V2_PROTOBUF)

    async def healthz(request: Request) -> Response:
        return Response(b"ok", media_type="text/plain")

    routes = [
        *review_routes(lambda: cluster.access, guarded),
        Route("/version", guarded(version)),
        Route("/api", guarded(api)),
        Route("/api/v1", guarded(core_resources)),
        Route("/apis", guarded(apis)),
        Route("/apis/{group}", guarded(group_document)),
        Route("/apis/{group}/{version}", guarded(group_resources)),
        Route("/api/v1/{rest:path}", guarded(core_objects), methods=_WRITE_METHODS),
        Route(
            "/apis/{group}/{version}/{rest:path}", guarded(group_objects), methods=_WRITE_METHODS
        ),
        Route("/sim/status", guarded(sim_status)),
        Route("/sim/faults", guarded(sim_faults), methods=["GET", "POST"]),
        *dcgm_routes(cluster, guarded),
        Route("/openapi/v2", guarded(openapi_v2)),
        Route("/openapi/v3", guarded(openapi_index)),
        Route("/openapi/v3/api/v1", guarded(openapi_core)),
        Route("/openapi/v3/apis/{group}/{version}", guarded(openapi_group)),
        Route("/healthz", healthz),
        Route("/readyz", healthz),
        Route("/livez", healthz),
    ]
    return _FaultGate(Starlette(routes=routes), cluster)
