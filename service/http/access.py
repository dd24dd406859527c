"""Authentication in front of every route: an ASGI middleware asking `AccessControl`.

For each HTTP request and WebSocket handshake, `AccessGate`:

* lets `/healthz`, `/readyz` and `/slack/commands` through (probes; Slack signs its requests
  and is mapped to scopes by the Slack endpoint), and the pages that carry no data: the web
  screens' shell and static files (`/`, `/ui…`) and the GraphiQL page (`GET /graphql` asked
  for HTML without a query) — the data they show is asked of `/graphql` with the browser's
  own credentials, through this gate;
* for `/metrics` asks `control.scraper` (a configured `metrics` scope may scrape without a
  token); the scraper's scope decides which series it gets (`service.http.metrics_scope`);
  for everything else `control.subject` with the `Authorization` header;
* stores the `Subject` in the ASGI state (`SUBJECT_KEY`); `scope_for(request)` reads its scope
  (the app's `AppState.scope_for`): a request without one sees nothing;
* refuses with the access error's status — 401 (with `WWW-Authenticate: Bearer`), 403, 429
  (with `Retry-After`), 503 when the reviewing API is down — as a GraphQL-shaped JSON body
  (`{"errors": [{"message", "extensions": {"code"}}]}`) and logs it at INFO, one line;
* a WebSocket without an `Authorization` header is let through unauthenticated: it must send
  its token in `connection_init` (`graphql_http.GraphQLOverHttp.on_ws_connect`); one with a
  bad header is refused before the handshake completes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from dra_mirror.service.access.errors import AccessError, ReviewUnavailable, Throttled
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.access.subjects import ANONYMOUS, Subject

log = logging.getLogger(__name__)

SUBJECT_KEY = "dra_mirror.subject"
OPEN_PATHS = ("/healthz", "/readyz", "/slack/commands")
PAGE_PATHS = ("/", "/ui")  # the web screens' shell and, below /ui/, its static files


def is_page(scope: Scope) -> bool:
    """A request for a page that holds no data: the screens' shell, their static files, or the
    GraphiQL page (strawberry serves it for a GET of /graphql asking for HTML, no `query`)."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    path = scope["path"]
    if path in PAGE_PATHS or path.startswith("/ui/"):
        return True
    query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
    if path != "/graphql" or "query" in query:
        return False
    accept = _header(scope, b"accept") or ""
    return "text/html" in accept


def subject_of(request: Any) -> Subject | None:
    """Who sent a request the gate let through (None when it did not, or not yet)."""
    state = getattr(request, "scope", {}).get("state") or {}
    return state.get(SUBJECT_KEY)


def scope_for(request: Any) -> AccessScope:
    """The access scope of a request the gate let through (nothing when it did not)."""
    subject = subject_of(request)
    return subject.scope if subject is not None else AccessScope.nothing()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1")
    return None


def error_body(error: AccessError) -> bytes:
    return orjson.dumps({"errors": [{"message": error.message,
                                     "extensions": {"code": error.code}}]})  # fmt: skip


class AccessGate:
    def __init__(
        self,
        app: ASGIApp,
        *,
        control: Callable[[], Any],
        open_paths: tuple[str, ...] = OPEN_PATHS,
    ) -> None:
        self.app = app
        self.control_of = control  # the app's AccessControl, once its lifespan opened it
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        control = self.control_of()
        if control is not None and control.insecure:
            state[SUBJECT_KEY] = ANONYMOUS  # no authentication: everyone sees everything
            await self.app(scope, receive, send)
            return
        if scope["path"] in self.open_paths or is_page(scope):
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"authorization")
        if control is None:
            await self._refuse(scope, receive, send, ReviewUnavailable("starting up"))
            return
        if scope["type"] == "websocket" and header is None:
            await self.app(scope, receive, send)  # authenticates at connection_init
            return
        try:
            if scope["path"] == "/metrics":
                subject = await control.scraper(header)  # its scope filters the series
            else:
                subject = await control.subject(header)
        except AccessError as error:
            client = (scope.get("client") or ("?",))[0]
            log.info("refused %s %s from %s: %s", scope.get("method", "WS"), scope["path"],
                     client, error.message)  # fmt: skip
            await self._refuse(scope, receive, send, error)
            return
        state[SUBJECT_KEY] = subject
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, error: AccessError):
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4000 + error.status})
            return
        headers = [(b"content-type", b"application/json")]
        if error.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="dra-mirror"'))
        if isinstance(error, Throttled):
            headers.append((b"retry-after", str(max(1, round(error.retry_after))).encode()))
        body = error_body(error)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": error.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
