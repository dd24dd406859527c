"""The GraphQL graph of dra-mirror (strawberry), read-only over the state store.

`build_schema(settings)` returns the one `strawberry.Schema` the app serves: the core `Query`
(`schema.query`; the printed `schema/schema.graphql` is the contract clients read) merged with
the history (`schema.history`, `schema.chargeback`), diagnostics (`schema.diagnostics`), plan (`schema.plan`), the
on-call questions (`schema.questions`) and `viewer` (`schema.viewer`) entry points, the live
`Subscription` (`schema.live`), and the
parser and validation caches on (a repeated query then costs ~0.25 ms of GraphQL overhead
instead of 4 to 6 ms).

`print_sdl()` is the printed SDL; `schema/schema.graphql` is that text, committed, and
`tests/schema/test_sdl.py` fails when it is stale (`dra-mirror schema --write` rewrites it).

This package never imports the watchers, the reactor or the simulator (import-linter). The
folder installs as `dra_mirror.schema`, its only import path (as `schema` it refuses to load).
"""

from __future__ import annotations

if __name__ != "dra_mirror.schema":  # one import path per module (tests/test_import_path.py)
    raise ImportError(
        f"import dra_mirror.schema, not {__name__}: the folder schema/ installs as "
        "dra_mirror.schema (pip install -e .); imported by its folder's name it would load a "
        "second copy of every module"
    )

from pathlib import Path

import strawberry
from strawberry.extensions import ParserCache, ValidationCache
from strawberry.schema.config import StrawberryConfig
from strawberry.tools import merge_types

from dra_mirror.service.settings import GraphQLSettings

from .chargeback import Query as ChargebackQuery
from .diagnostics import Query as DiagnosticsQuery
from .fragmentation import Query as FragmentationQuery
from .guard import DocumentRegistry, guarded_schema_options
from .history import Query as HistoryQuery
from .plan import Query as PlanQuery
from .query import Query as CoreQuery
from .questions import Query as QuestionsQuery
from .resolvers import direct_resolvers
from .scalars import SCALAR_MAP
from .utilization import Query as UtilizationQuery
from .utilization_audit import Query as UtilizationAuditQuery
from .viewer import Query as ViewerQuery

SDL_PATH = Path(__file__).with_name("schema.graphql")

ROOT_QUERIES: tuple[type, ...] = (
    CoreQuery,
    HistoryQuery,
    ChargebackQuery,
    DiagnosticsQuery,
    PlanQuery,
    QuestionsQuery,
    FragmentationQuery,
    UtilizationQuery,
    UtilizationAuditQuery,
    ViewerQuery,
)


def build_schema(
    settings: GraphQLSettings | None = None, *, registry: DocumentRegistry | None = None
) -> strawberry.Schema:
    settings = settings or GraphQLSettings()
    from .live import Subscription  # live events over WebSocket (graphql-transport-ws)

    # The guards (schema.guard): limits, the execution budget, the error policy.
    guards = guarded_schema_options(settings, registry=registry)
    schema = guards["schema_class"](
        query=merge_types("Query", ROOT_QUERIES),
        subscription=Subscription,
        config=StrawberryConfig(
            scalar_map=SCALAR_MAP,
            batching_config={"max_operations": settings.max_batch} if settings.max_batch else None,
        ),
        extensions=[
            *guards["extensions"],
            lambda: ParserCache(maxsize=settings.parser_cache_size),
            lambda: ValidationCache(maxsize=settings.validation_cache_size),
        ],
        execution_context_class=guards["execution_context_class"],
    )
    direct_resolvers(schema)  # method fields without arguments skip strawberry's pipeline
    return schema


def print_sdl(schema: strawberry.Schema | None = None) -> str:
    """The printed SDL, ending with one newline (the content of `schema/schema.graphql`)."""
    return str(schema or build_schema()).rstrip("\n") + "\n"


def write_sdl(path: Path = SDL_PATH) -> Path:
    path.write_text(print_sdl())
    return path
