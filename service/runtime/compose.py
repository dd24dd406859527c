"""One app from parts: the state the routes share, the API surfaces, the lifespan, the routes.

`compose_app(settings, store=..., ...)` is where every app is put together — the commands'
(`mirror_app` builds their parts from the settings, then calls this) and any embedding's (the
tests and benchmarks hand in a loaded store, a started group of watchers, a clock). It builds:

1. the state the routes share (`service.http.state.AppState`: `role` — what `/readyz`
   answers for, `API` or `WATCHER`; `dra_metrics` — whether `/metrics` carries the DRA
   series; `scope_for` — each request's access scope, by default the subject the access gate
   stored; `now` — the clock of time-derived fields);
2. the API surfaces (`service.runtime.api.ApiSurfaces`: the schema, `/graphql`'s view, Slack's
   commands with `slack`, the MCP endpoint) — at once, or with `graphql_in_lifespan` by the
   lifespan once the watchers started;
3. the lifespan (`service.runtime.lifespan.MirrorLifespan`) over the openers `access`,
   `history` and `watchers` (`opened(x)` for one already open) and the `resources`;

and hands the three to `service.http.app.create_app`, which only routes and adds middleware.
A registered document that does not check (`RegisteredDocumentsError`) stops here when the
surfaces are built at once, else in the lifespan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette

from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.http.app import create_app
from dra_mirror.service.http.readiness import API
from dra_mirror.service.http.state import AppState, ScopeFor
from dra_mirror.service.http.watchers import Watchers
from dra_mirror.service.runtime.api import ApiSurfaces
from dra_mirror.service.runtime.lifespan import MirrorLifespan, Opener
from dra_mirror.service.settings import Settings
from dra_mirror.service.slack import SlackSettings
from dra_mirror.service.stores.protocols import ClosableReader

if TYPE_CHECKING:  # SQLAlchemy and Alembic load only when a history database is configured
    from dra_mirror.service.history.runtime import History


def compose_app(
    settings: Settings,
    *,
    store: ClosableReader,
    history: Opener[History] | None = None,
    watchers: Opener[Watchers | None] | None = None,
    access: Opener[AccessControl] | None = None,
    resources: Sequence[AbstractAsyncContextManager[Any]] = (),
    slack: SlackSettings | None = None,
    role: str = API,
    dra_metrics: bool = True,
    graphql_in_lifespan: bool = False,
    scope_for: ScopeFor | None = None,
    now: Callable[[], datetime] | None = None,
    utilization: Any = None,
) -> Starlette:
    """See the module docstring."""
    state = AppState(
        settings, store, role=role, dra_metrics=dra_metrics, scope_for=scope_for, now=now
    )
    state.utilization = utilization
    surfaces = ApiSurfaces(settings, state, slack=slack)
    if not graphql_in_lifespan:
        surfaces.build()
    lifespan = MirrorLifespan(
        state, surfaces, access=access, resources=resources, history=history, watchers=watchers
    )
    return create_app(state, surfaces.endpoints(), lifespan)
