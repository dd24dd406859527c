"""The runtime's one lifespan: the order a mirror opens its parts in, and closes them in."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from asgi_lifespan import LifespanManager

from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore


class Recorded:
    """Fakes of every part the lifespan opens, writing what happens to one list."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def access(self) -> AccessControl:
        self.events.append("open access")
        control = AccessControl.open_access()
        close = control.close

        async def closed() -> None:
            self.events.append("close access")
            await close()

        control.close = closed  # type: ignore[method-assign]
        return control

    @contextlib.asynccontextmanager
    async def resource(self, name: str) -> Any:
        self.events.append(f"enter {name}")
        try:
            yield
        finally:
            self.events.append(f"exit {name}")

    async def history(self) -> Any:
        self.events.append("open history")
        events = self.events

        class History:
            async def close(self) -> None:
                events.append("close history")

        return History()

    async def watchers(self) -> Any:
        self.events.append("start watchers")
        events = self.events

        class Watchers:
            ready = True
            clusters = ["east"]
            by_name: dict[str, Any] = {}

            def not_ready(self) -> list[str]:
                return []

            async def stop(self) -> None:
                events.append("stop watchers")

        return Watchers()


class RecordedStore(MemoryStore):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    async def close(self) -> None:
        self.events.append("close state store")
        await super().close()


@pytest.mark.parametrize("late", [False, True], ids=["schema at once", "schema in the lifespan"])
async def test_one_ordered_start_and_the_reverse_stop(late: bool) -> None:
    parts = Recorded()
    app = compose_app(
        Settings(),
        store=RecordedStore(parts.events),
        access=parts.access,
        resources=[parts.resource("simulator"), parts.resource("bus")],
        history=parts.history,
        watchers=parts.watchers,
        graphql_in_lifespan=late,
    )
    state = app.state.mirror
    surfaces_built = []
    original = parts.watchers

    async def watchers_then_look() -> Any:  # is the schema built when the watchers start?
        started = await original()
        surfaces_built.append(app.router.routes[0].endpoint.__class__.__name__)
        return started

    app.router.lifespan_context.watchers = watchers_then_look
    async with LifespanManager(app):
        assert parts.events == [
            "open access",
            "enter simulator",
            "enter bus",
            "open history",
            "start watchers",
        ]
        assert state.started and state.access is not None and state.history is not None
        parts.events.clear()
    assert parts.events == [
        "stop watchers",
        "close history",
        "close state store",
        "exit bus",
        "exit simulator",
        "close access",
    ]
    # built before the app was made, or left to the lifespan and handed over once built
    assert surfaces_built == ["DeferredView" if late else "MirrorGraphQL"]
    assert app.router.lifespan_context.surfaces.view is not None


async def test_a_failed_step_undoes_the_steps_before_it_and_says_why() -> None:
    parts = Recorded()

    async def broken_history() -> Any:
        raise RuntimeError("no database")

    app = compose_app(
        Settings(),
        store=RecordedStore(parts.events),
        access=parts.access,
        resources=[parts.resource("simulator")],
        history=broken_history,
        watchers=parts.watchers,
    )
    with pytest.raises(RuntimeError, match="no database"):
        async with LifespanManager(app):
            pass
    assert parts.events == [
        "open access",
        "enter simulator",
        "close state store",
        "exit simulator",
        "close access",
    ]
    assert str(app.state.mirror.startup_error) == "no database"
