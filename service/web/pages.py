"""The two HTML documents: the screens' shell and GraphiQL. Everything they load is ours.

Both pages carry a Content-Security-Policy that lets the browser load scripts, styles, fonts
and images only from this server (and `data:` URLs, which GraphiQL's stylesheet uses for its
fonts) and connect only back to it (`/graphql` over HTTP and WebSocket): a library that
tried to reach a CDN would be refused by the browser itself. `prefix` is the ASGI root path
when the mirror is served under one (`/dra-mirror/ui/...`).
"""

from __future__ import annotations

import html
import json

from .assets import STATIC, vendor_path

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",  # React's style attributes, GraphiQL's own
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",  # /graphql over fetch and WebSocket
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    )
)

UI = "/ui"
STATIC_PATH = "/ui/static"


def _script(src: str) -> str:
    return f'<script src="{html.escape(src)}"></script>'


def _config(prefix: str) -> str:
    static = f"{prefix}{STATIC_PATH}"
    config = {
        "graphql": f"{prefix}/graphql",
        "base": f"{prefix}{UI}",
        "static": static,
        "chart": f"{static}/{vendor_path('chart.js', 'chart.umd.min.js')}",  # loaded when needed
    }
    # In a <script type="application/json"> nothing runs; "</" is escaped so no text ends it.
    text = json.dumps(config).replace("</", "<\\/")
    return f'<script type="application/json" id="dra-mirror-config">{text}</script>'


def _react(static: str) -> list[str]:
    return [
        _script(f"{static}/{vendor_path('react', 'react.production.min.js')}"),
        _script(f"{static}/{vendor_path('react-dom', 'react-dom.production.min.js')}"),
    ]


def _modules(static: str) -> list[str]:
    """modulepreload links for every module of the app, so the browser fetches them at
    once instead of discovering the imports one level at a time."""
    app = STATIC / "app"
    paths = sorted(p.relative_to(STATIC).as_posix() for p in app.rglob("*.js"))
    paths.append(vendor_path("htm", "htm.module.js"))
    return [
        f'<link rel="modulepreload" href="{html.escape(f"{static}/{p}")}">'
        for p in paths
        if not p.endswith("graphiql.js")
    ]


def screens_page(prefix: str = "") -> str:
    """The shell every screen URL answers; the screen itself renders in the browser."""
    static = f"{prefix}{STATIC_PATH}"
    head = [
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>dra-mirror · Devices</title>",
        '<link rel="icon" href="data:,">',
        f'<link rel="stylesheet" href="{static}/app/style.css">',
        _config(prefix),
        *_react(static),
        _script(f"{static}/{vendor_path('graphql-ws', 'graphql-ws.min.js')}"),
        *_modules(static),
        f'<script type="module" src="{static}/app/main.js"></script>',
    ]
    body = (
        '<div id="app"><p class="booting">Loading the Devices screens…</p></div>'
        "<noscript>These screens need JavaScript; the same data is at /graphql.</noscript>"
    )
    return _document(head, body)


def graphiql_page(prefix: str = "") -> str:
    """GraphiQL on `/graphql`, from the vendored GraphiQL, React and its stylesheet."""
    static = f"{prefix}{STATIC_PATH}"
    head = [
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>dra-mirror · GraphiQL</title>",
        '<link rel="icon" href="data:,">',
        f'<link rel="stylesheet" href="{static}/{vendor_path("graphiql", "graphiql.min.css")}">',
        f'<link rel="stylesheet" href="{static}/app/graphiql.css">',
        _config(prefix),
        *_react(static),
        _script(f"{static}/{vendor_path('graphiql', 'graphiql.min.js')}"),
        f'<script type="module" src="{static}/app/graphiql.js"></script>',
    ]
    return _document(head, '<div id="graphiql">Loading GraphiQL…</div>')


def _document(head: list[str], body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n'
        + "\n".join(head)
        + f"\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
