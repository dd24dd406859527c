"""The GraphQL graph of dra-mirror (strawberry), read-only over the state store.

`build_schema(settings)` returns the one `strawberry.Schema` the app serves: the core `Query`
(`schema.query`, the contract in API.md) merged with the extension modules other areas add
when they are present — `schema.history` and `schema.diagnostics`, each exporting a `Query`
class — and with the parser and validation caches on (a repeated query then costs ~0.25 ms
of GraphQL overhead instead of 4 to 6 ms).

`print_sdl()` is the printed SDL; `schema/schema.graphql` is that text, committed, and
`tests/schema/test_sdl.py` fails when it is stale (`dra-mirror schema --write` rewrites it).

This package never imports the watchers, the reactor or the simulator (import-linter).
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import strawberry
from strawberry.extensions import ParserCache, ValidationCache
from strawberry.schema.config import StrawberryConfig
from strawberry.tools import merge_types

from dra_mirror.service.settings import GraphQLSettings

from .query import Query as CoreQuery
from .resolvers import direct_resolvers
from .scalars import SCALAR_MAP

SDL_PATH = Path(__file__).with_name("schema.graphql")

# Modules other areas own; each exports a strawberry `Query` merged into the root.
EXTENSION_MODULES = ("dra_mirror.schema.history", "dra_mirror.schema.diagnostics")


def extension_queries() -> list[type]:
    found: list[type] = []
    for name in EXTENSION_MODULES:
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        query = getattr(module, "Query", None)
        if query is not None:
            found.append(query)
    return found


def root_query() -> type:
    extensions = extension_queries()
    if not extensions:
        return CoreQuery
    return merge_types("Query", (CoreQuery, *extensions))


def build_schema(settings: GraphQLSettings | None = None) -> strawberry.Schema:
    settings = settings or GraphQLSettings()
    from .live import Subscription  # live events over WebSocket (graphql-transport-ws)

    schema = strawberry.Schema(
        query=root_query(),
        subscription=Subscription,
        config=StrawberryConfig(scalar_map=SCALAR_MAP),
        extensions=[
            lambda: ParserCache(maxsize=settings.parser_cache_size),
            lambda: ValidationCache(maxsize=settings.validation_cache_size),
        ],
    )
    direct_resolvers(schema)  # method fields without arguments skip strawberry's pipeline
    return schema


def print_sdl(schema: strawberry.Schema | None = None) -> str:
    """The printed SDL, ending with one newline (the content of `schema/schema.graphql`)."""
    return str(schema or build_schema()).rstrip("\n") + "\n"


def write_sdl(path: Path = SDL_PATH) -> Path:
    path.write_text(print_sdl())
    return path
