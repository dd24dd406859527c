"""The typed per-request context every resolver receives as `info.context`.

`make_context` builds a fresh one per request: the request's access `Scope`, a
`ScopedReader` over the state store, fresh DataLoaders (caches die with the request), the
optional history reader (for `schema.history`), the GraphQL settings (page sizes) and a clock.
Nothing here is global: the app passes the store and settings in, tests build their own.

`Info` is what every resolver takes: strawberry's `Info` bound to this `Context` (and no root
value), so that `info.context.reader` and the loaders are typed wherever a resolver reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from strawberry.types import Info as StrawberryInfo

from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.settings import GraphQLSettings
from dra_mirror.service.stores.protocols import StateReader

from .loaders import Loaders
from .reader import ReadScope, Scope, ScopedReader

if TYPE_CHECKING:  # SQLAlchemy loads only when a history database is configured
    from dra_mirror.service.history.queries import HistoryQueries


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Context:
    reader: ScopedReader
    loaders: Loaders
    settings: GraphQLSettings = field(default_factory=GraphQLSettings)
    history: HistoryQueries | None = None  # when a database is configured (schema.history)
    now: Callable[[], datetime] = utc_now
    request: Any = None  # the Starlette request (or websocket), for extensions that need it
    response: Any = None
    viewer: Any = None  # who asks (`service.access.subjects.Subject`), for `Query.viewer`
    connection_params: Any = None  # a WebSocket's connection_init payload (strawberry sets it)
    utilization: Any = None  # the dcgm readings (`questions.utilization_source`), when configured

    @property
    def scope(self) -> ReadScope:
        return self.reader.scope

    @property
    def asker(self) -> Asker:
        """The request's reader, history and clock, as the questions take them."""
        return Asker(self.reader, self.history, self.now, self.utilization)


# strawberry finds the info parameter by this annotation, so it must exist at run time
Info: TypeAlias = StrawberryInfo[Context, None]


def make_context(
    store: StateReader,
    *,
    scope: ReadScope | None = None,
    settings: GraphQLSettings | None = None,
    history: HistoryQueries | None = None,
    now: Callable[[], datetime] = utc_now,
    request: Any = None,
    response: Any = None,
    viewer: Any = None,
    utilization: Any = None,
) -> Context:
    reader = ScopedReader(store, scope or Scope.everything())
    return Context(
        reader=reader,
        loaders=Loaders(reader),
        settings=settings or GraphQLSettings(),
        history=history,
        now=now,
        request=request,
        response=response,
        viewer=viewer,
        utilization=utilization,
    )
