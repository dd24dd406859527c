"""The mirror's one lifespan: what a process opens, in which order, and how it closes it.

`MirrorLifespan(state, surfaces, access=..., resources=..., history=..., watchers=...)` is the
Starlette lifespan the composition root hands to `service.http.app.create_app`. Each of
`access`, `history` and `watchers` is an opener (an async function run here, in its turn), or
None. The start, in this order:

1. the access control — `access()`, or, without one, everything served to everyone (the log
   and `/readyz` say so) — before anything else, so that no request is ever answered without
   it;
2. `resources` (async context managers, e.g. the demo's simulator), entered in order;
3. the MCP endpoint's session manager (`service.mcp.http`: started by the first `/mcp`
   request);
4. the state store, to be closed on the way out;
5. the history — `history()`, the database with its writer — which `info.context.history`,
   the CSV exports and the watchers' history sink use;
6. the watchers — `watchers()`, after the resources and the history (the demo's simulator
   serves by then; the history sink follows the state store in every reactor) — and the
   alert engine beside them (the runtime's `mirror_app` starts both);
7. the schema, the view and Slack's commands, when they were left to the lifespan
   (`ApiSurfaces.build_deferred`: in a worker thread, while the first LISTs are on their way).

Then the app serves (`AppState.started`). On shutdown, the reverse: the watchers stop
(flushing what they received), the history drains and closes, the state store closes, the
MCP sessions end, the resources exit in reverse order, the access control closes. A failure
at any step of the start undoes the steps before it and is kept as `AppState.startup_error`
(what `serve` says when it stops).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.applications import Starlette

from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.http.state import AppState
from dra_mirror.service.http.watchers import Watchers
from dra_mirror.service.runtime.api import ApiSurfaces

if TYPE_CHECKING:  # SQLAlchemy and Alembic load only when a history database is configured
    from dra_mirror.service.history.runtime import History

log = logging.getLogger(__name__)

T = TypeVar("T")
Opener = Callable[[], Awaitable[T]]


def opened(value: T) -> Opener[T]:
    """An opener of something already open (a test's store, a started group of watchers)."""

    async def opener() -> T:
        return value

    return opener


async def _closing(close: Callable[[], Awaitable[None]], what: str) -> None:
    try:
        await close()
    except Exception:
        log.exception("closing the %s failed", what)


class MirrorLifespan:
    """See the module docstring."""

    def __init__(
        self,
        state: AppState,
        surfaces: ApiSurfaces,
        *,
        access: Opener[AccessControl] | None = None,
        resources: Sequence[AbstractAsyncContextManager[Any]] = (),
        history: Opener[History] | None = None,
        watchers: Opener[Watchers | None] | None = None,
    ) -> None:
        self.state = state
        self.surfaces = surfaces
        self.access = access
        self.resources = resources
        self.history = history
        self.watchers = watchers

    @contextlib.asynccontextmanager
    async def __call__(self, _app: Starlette) -> AsyncIterator[None]:
        state = self.state
        async with contextlib.AsyncExitStack() as stack:
            stack.push(state.note_startup_error)
            # 1. access, before anything else
            control = await self.access() if self.access else AccessControl.open_access()
            state.access = control
            stack.push_async_callback(control.close)
            log.log(logging.WARNING if control.insecure else logging.INFO, "%s", control.describe())
            # 2. resources (the demo's simulator)
            for resource in self.resources:
                await stack.enter_async_context(resource)
            # 3. MCP sessions
            await stack.enter_async_context(self.surfaces.mcp.running())
            # 4. the state store, closed after the history and the watchers
            stack.push_async_callback(_closing, state.store.close, "state store")
            # 5. history
            if self.history is not None:
                state.history = await self.history()
                stack.push_async_callback(_closing, state.history.close, "history store")
            # 6. watchers (and what runs beside them)
            if self.watchers is not None:
                state.reactors = await self.watchers()
            if state.reactors is not None:
                stack.push_async_callback(state.reactors.stop)
            # 7. the schema, the view and Slack's commands, unless built already
            await self.surfaces.build_deferred()
            state.started = True
            yield
