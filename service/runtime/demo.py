"""The demo's mirror: the simulator's scenario and the mirror watching it, one app.

What `dra-mirror demo` runs, on embedded defaults (in-memory state, history in a SQLite file
in `workdir` unless a database is configured, no Redis): the app's lifespan starts the
simulated clusters first (`simulated_world`: on free loopback ports, their kubeconfig written
to `workdir`, the scenario's world moving), then the mirror, which watches them through the
real Kubernetes client exactly as it would watch real clusters. On shutdown the watchers stop,
then the simulator.

* `demo_app(settings, workdir=...)` — the `Demo`: its app (`mirror_app`), its store, its
  kubeconfig, and the simulator while the lifespan runs; `ready` once every cluster synced.
  `/slack/commands` answers with `slack` (the `SlackSettings` of DRA_MIRROR_SLACK_*);
  `access`, an access configuration (`service.access.config.AccessConfig`), is for the browser
  tests of sign-in — the demo itself serves open;
* `demo_alerts(port)` — the alerts it runs when DRA_MIRROR_ALERTS_CONFIG names none.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_mirror.service.alerts.config import AlertsConfig
from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore

DEMO_HOST = "127.0.0.1"
"""The demo serves without authentication: it listens on this machine only."""


def demo_alerts(port: int) -> AlertsConfig:
    """The demo's alerts when DRA_MIRROR_ALERTS_CONFIG names none: every rule, at once, as
    Prometheus series only (no Slack), with links to the demo's own screens."""
    from dra_mirror.service.alerts.config import parse

    rules = {
        "pending-behind-idle": {"minutes": 0},
        "idle-holder": {"minutes": 0},
        "gpu-node-without-slices": {"minutes": 0},
        "pool-incomplete": {"minutes": 0},
        "tainted-while-held": {"minutes": 0},
    }
    return parse(
        {"interval": 5, "webUrl": f"http://{DEMO_HOST}:{port}", "rules": rules}, where="demo"
    )


@dataclass
class Demo:
    """The demo as an ASGI app; `simulator` is set while the app's lifespan runs."""

    app: Any
    store: MemoryStore
    kubeconfig: Path
    simulator: Simulator | None = None

    @property
    def ready(self) -> bool:
        watchers = self.app.state.mirror.reactors
        return watchers is not None and watchers.ready


@contextlib.asynccontextmanager
async def simulated_world(demo: Demo, scenario: str) -> AsyncIterator[Simulator]:
    """Serve the scenario's clusters and run its world (churn, delayed starts)."""
    world = build_world(load_scenario(scenario))
    async with Simulator(world.specs, kubeconfig_path=demo.kubeconfig) as sim:
        movement = asyncio.create_task(world.run(), name="demo-world")
        demo.simulator = sim
        try:
            yield sim
        finally:
            demo.simulator = None
            movement.cancel()
            await asyncio.gather(movement, return_exceptions=True)


def demo_app(
    settings: Settings,
    *,
    workdir: Path,
    scenario: str = "demo",
    alerts: AlertsConfig | None = None,
    access: Any = None,
    slack: Any = None,
) -> Demo:
    """See the module docstring."""
    if not settings.history.database_url:
        history = dataclasses.replace(settings.history, database_url=str(workdir / "history.db"))
        settings = dataclasses.replace(settings, history=history)
    store = MemoryStore()  # in memory, live events on its in-process bus
    demo = Demo(app=None, store=store, kubeconfig=workdir / "demo.kubeconfig")
    demo.app = mirror_app(
        settings,
        store=store,
        kubeconfig=lambda: str(demo.kubeconfig),
        resources=[simulated_world(demo, scenario)],
        alerts=alerts,
        access=access,
        slack=slack,
    )
    return demo
