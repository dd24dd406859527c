"""Authentication in front of every route: an ASGI middleware asking `AccessControl`.

For each HTTP request and WebSocket handshake, `AccessGate`:

* lets `/healthz`, `/readyz` and `/slack/commands` through (probes; Slack signs its requests
  and is mapped to scopes by the Slack endpoint), and the pages that carry no data: the web
  screens' shell and static files (`/`, `/ui…`) and the GraphiQL page (`GET /graphql` asked
  for HTML without a query) — the data they show is asked of `/graphql` with the browser's
  own credentials, through this gate (a GET of /graphql carrying any of `query`,
  `extensions` — a persisted query's hash —, `operationName` or `variables` is an operation,
  whatever its `Accept`);
* for `/metrics` asks `control.scraper` (a configured `metrics` scope may scrape without a
  token); the scraper's scope decides which series it gets (`service.http.metrics_scope`);
  for everything else `control.subject` with the `Authorization` header;
* when authentication is off (`--insecure-no-auth`), serves only requests whose `Host` names
  this mirror — a loopback name (localhost, 127.0.0.1, ::1), the address the connection came
  in on, or one of `hosts` (`http.allowed_hosts`; `*`: any) — and refuses any other with 421:
  a web page that rebinds its own host name to the mirror's address (DNS rebinding) is not
  answered;
* asks with the client's address, so that unknown tokens are rate-limited per address before
  a remote review (service.access.control);
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
# what makes a GET of /graphql an operation rather than the GraphiQL page
_OPERATION_PARAMS = frozenset({"query", "extensions", "operationName", "variables"})


def is_page(scope: Scope) -> bool:
    """A request for a page that holds no data: the screens' shell, their static files, or the
    GraphiQL page (strawberry serves it for a GET of /graphql asking for HTML, no `query`)."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    path = scope["path"]
    if path in PAGE_PATHS or path.startswith("/ui/"):
        return True
    query = parse_qs((scope.get("query_string") or b"").decode("latin-1"), keep_blank_values=True)
    if path != "/graphql" or _OPERATION_PARAMS & query.keys():
        return False  # an operation by GET (a query, a persisted query's hash) holds data
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


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def host_name(header: str) -> str:
    """The host of a `Host` header: without the port, brackets (IPv6) or a trailing dot."""
    host = header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def host_allowed(scope: Scope, hosts: tuple[str, ...]) -> bool:
    """Whether a request's `Host` names this mirror (see the module docstring)."""
    if "*" in hosts:
        return True
    header = _header(scope, b"host")
    if header is None:
        return True  # HTTP/1.0 without Host: nothing to rebind
    name = host_name(header)
    server = (scope.get("server") or ("",))[0] or ""
    allowed = LOOPBACK_NAMES | {server.lower()} | {h.lower().rstrip(".") for h in hosts}
    return name in allowed


class AccessGate:
    def __init__(
        self,
        app: ASGIApp,
        *,
        control: Callable[[], Any],
        open_paths: tuple[str, ...] = OPEN_PATHS,
        hosts: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.control_of = control  # the app's AccessControl, once its lifespan opened it
        self.open_paths = open_paths
        self.hosts = tuple(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        control = self.control_of()
        if control is not None and control.insecure:
            if not host_allowed(scope, self.hosts):
                await self._misdirected(scope, send)
                return
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
        client = (scope.get("client") or (None,))[0]
        try:
            if scope["path"] == "/metrics":
                subject = await control.scraper(header, client=client)  # its scope: series
            else:
                subject = await control.subject(header, client=client)
        except AccessError as error:
            log.info("refused %s %s from %s: %s", scope.get("method", "WS"), scope["path"],
                     client or "?", error.message)  # fmt: skip
            await self._refuse(scope, receive, send, error)
            return
        state[SUBJECT_KEY] = subject
        await self.app(scope, receive, send)

    async def _misdirected(self, scope: Scope, send: Send) -> None:
        host = _header(scope, b"host") or ""
        log.info("refused %s %s: Host %r is not a name of this mirror (authentication is off)",
                 scope.get("method", "WS"), scope["path"], host[:100])  # fmt: skip
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4421})
            return
        body = orjson.dumps({"errors": [{"message": (
            f"Host {host[:100]!r} is not a name this mirror answers to while authentication is "
            "off (--insecure-no-auth): use localhost or its address, or add the name to "
            "DRA_MIRROR_HTTP_ALLOWED_HOSTS"), "extensions": {"code": "MISDIRECTED"}}]})  # fmt: skip
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": 421, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, error: AccessError) -> None:
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
