"""What the command line serves or checks without an app, built here as the app builds it.

* `serve_mcp_stdio(questions_for)` — the MCP tools on stdin and stdout (`dra-mirror mcp`), the same
  tools as the server's `/mcp` (`service.mcp.server.build_server`);
* `print_sdl()`, `write_sdl(path)` — the SDL of the schema the server serves (`dra-mirror
  schema`);
* `check_documents(settings)`, `registered_documents(settings, paths, own=...)` — the registered
  documents read and checked against the schema and its limits as the app checks them when it
  is built (the start's checks, `dra-mirror persisted-queries`); a document that cannot be
  served raises `DocumentsProblem`, saying which and why.

Each loads what it needs when called (the MCP SDK, strawberry and the schema), so the commands
that do not call them start without them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dra_mirror.service.settings import Settings

if TYPE_CHECKING:
    from dra_mirror.service.http.registered import RegisteredDocument


async def serve_mcp_stdio(questions_for: Callable[[Any], Awaitable[Any]]) -> None:
    """The MCP tools on stdin and stdout (`dra-mirror mcp`) until the client closes them;
    each tool call asks the `Questions` `questions_for(ctx)` gives
    (`service.mcp.server.build_server`)."""
    from dra_mirror.service.mcp.server import build_server  # the MCP SDK

    await build_server(questions_for).run_stdio_async()


def print_sdl() -> str:
    """The GraphQL SDL of the schema the server serves."""
    from dra_mirror import schema

    return schema.print_sdl()


def write_sdl(path: Path | None = None) -> Path:
    """Write the SDL to `path` (default: the committed `schema/schema.graphql`)."""
    from dra_mirror import schema

    return schema.write_sdl(path) if path is not None else schema.write_sdl()


class DocumentsProblem(Exception):
    """A registered document that cannot be served: its source and what is wrong."""


def check_documents(settings: Settings) -> None:
    """The registered documents the settings name (DRA_MIRROR_GRAPHQL_PERSISTED_DOCUMENTS),
    read and checked against the schema and its limits as `build()` checks them; raises
    `DocumentsProblem`."""
    from dra_mirror.service.http.registered import RegisteredDocumentsError, read_documents

    graphql = settings.graphql
    try:
        paths = [graphql.persisted_documents] if graphql.persisted_documents else []
        _checked(settings, read_documents(paths))
    except RegisteredDocumentsError as error:
        raise DocumentsProblem(str(error)) from None


def registered_documents(
    settings: Settings, paths: Sequence[str | Path], *, own: bool
) -> list[RegisteredDocument]:
    """The documents of `paths` (and, with `own`, the mirror's own: the screens' and the
    command line's), checked against the schema and the limits of `settings`; raises
    `DocumentsProblem`."""
    from dra_mirror.service.http.registered import (
        RegisteredDocumentsError,
        own_documents,
        read_documents,
    )

    try:
        found = read_documents(paths) + (own_documents() if own else [])
        return _checked(settings, found)
    except RegisteredDocumentsError as error:
        raise DocumentsProblem(str(error)) from None


def _checked(settings: Settings, documents: list[RegisteredDocument]) -> list[RegisteredDocument]:
    """`documents` checked against the schema these settings build and its limits (raises
    `RegisteredDocumentsError`): the schema is built here, as `ApiSurfaces.build` builds it."""
    from dra_mirror.schema import build_schema
    from dra_mirror.service.http.registered import check

    return check(build_schema(settings.graphql)._schema, documents, settings.graphql)
