"""The routes the app mounts for the browser: the screens, their static files, GraphiQL.

    GET /                    -> 307 to /ui/
    GET /ui, /ui/<screen>    the screens' shell (404 for a screen that does not exist)
    GET /ui/static/...       the package's static files (app modules, vendored libraries)
    graphiql_response(req)   what GET /graphql answers a browser (the app's GraphQL view
                             calls it in place of strawberry's CDN-loaded page)

Promises: every byte served comes from the installed package; the pages need nothing but
this server. Screen paths are deep links: the query string (cluster, filters, cursor) is
the screen's state, read by the page, so any view can be bookmarked or pasted.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from .assets import STATIC
from .pages import CONTENT_SECURITY_POLICY, graphiql_page, screens_page

# The screens the shell knows (`static/app/main.js` has the same list).
SCREENS = (
    "",
    "classes",
    "slices",
    "claims",
    "claim",
    "templates",
    "device",
    "contention",
    "utilization",
    "pods",
    "pod",
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


def _prefix(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


async def _screen(request: Request) -> Response:
    screen = request.path_params.get("screen", "").strip("/")
    if screen not in SCREENS:
        return PlainTextResponse(f"no such screen: {screen}\n", status_code=404)
    return HTMLResponse(screens_page(_prefix(request)), headers=HEADERS)


async def _home(request: Request) -> Response:
    return RedirectResponse(f"{_prefix(request)}/ui/")


def graphiql_response(request: Request) -> Response:
    """GraphiQL for a browser's GET /graphql, built from the vendored files."""
    return HTMLResponse(graphiql_page(_prefix(request)), headers=HEADERS)


class _StaticFiles(StaticFiles):
    """The package's static folder, with the headers of the pages (nosniff, no framing)."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


def web_routes() -> list[BaseRoute]:
    """The routes to add to the app (GraphiQL is answered by the GraphQL view itself)."""
    return [
        Route("/", _home, methods=["GET"]),
        Mount("/ui/static", app=_StaticFiles(directory=STATIC), name="web-static"),
        Route("/ui", _screen, methods=["GET"]),
        Route("/ui/{screen:path}", _screen, methods=["GET"]),
    ]
