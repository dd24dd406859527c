"""The HTTP face of the simulated dcgm-exporters (`service.sim.dcgm`) on a cluster's server.

    GET /sim/dcgm/targets                 Prometheus HTTP service discovery (JSON target groups)
    GET /sim/dcgm/nodes/<node>/metrics    that node's exporter, text format 0.0.4

A node without an exporter (no GPU driver slices, or labelled
`nvidia.com/gpu.deploy.dcgm-exporter=false`) answers 404, as a scrape of a node where the
DaemonSet does not run fails.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dra_mirror.service.sim.dcgm import Exporters
from dra_mirror.service.sim.served import ServedCluster

TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


def dcgm_routes(cluster: ServedCluster, guarded: Callable) -> list[Route]:
    """The exporters' routes for `cluster`; `guarded` turns errors into Status answers."""
    exporters = Exporters(cluster.store)

    async def targets(request: Request) -> Response:
        address = f"{request.url.hostname or '127.0.0.1'}:{cluster.port}"
        body = orjson.dumps(exporters.targets(address, cluster.name))
        return Response(body, media_type="application/json")

    async def metrics(request: Request) -> Response:
        text = exporters.metrics(request.path_params["node"])
        if text is None:
            return Response(b"no dcgm-exporter on this node\n", 404, media_type="text/plain")
        return Response(text.encode(), media_type=TEXT_FORMAT)

    return [
        Route("/sim/dcgm/targets", guarded(targets)),
        Route("/sim/dcgm/nodes/{node}/metrics", guarded(metrics)),
    ]
