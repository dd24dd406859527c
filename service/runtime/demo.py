"""The demo's mirror: the simulator's scenario and the mirror watching it, one app.

What `dra-mirror demo` runs, on embedded defaults (in-memory state, history in a SQLite file
in `workdir` unless a database is configured, no Redis): the app's lifespan starts the
simulated clusters first (`simulated_world`: on free loopback ports, their kubeconfig
written, the scenario's world moving), then the mirror, which watches them through the real
Kubernetes client exactly as it would watch real clusters. On shutdown the watchers stop,
then the simulator.

* `demo_app(settings, workdir=..., kubeconfig=None)` — the `Demo`: its app (`mirror_app`), its
  store, its kubeconfig (`kubeconfig`, where `kubectl` users find it: written once the
  simulated clusters listen, removed when they stop; None: `workdir/demo.kubeconfig`), and
  the simulator while the lifespan runs; `ready` once every cluster synced.
  `/slack/commands` answers with `slack` (the `SlackSettings` of DRA_MIRROR_SLACK_*);
  `access`, an access configuration (`service.access.config.AccessConfig`), is for the browser
  tests of sign-in — the demo itself serves open; `utilization`, a utilisation configuration
  (DRA_MIRROR_UTILIZATION_CONFIG), else Prometheus scraping the simulator's dcgm-exporters
  when it is installed (`service.runtime.demo_prometheus`);
* `demo_alerts(port)` — the alerts it runs when DRA_MIRROR_ALERTS_CONFIG names none;
* `DEMO_PRICES` — the chargeback's price table it writes to `workdir/prices.yaml` and uses
  when DRA_MIRROR_HISTORY_PRICES names none (made-up prices; teams for its namespaces).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dra_mirror.service.alerts.config import AlertsConfig
from dra_mirror.service.runtime.demo_prometheus import DemoPrometheus
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
        "held-not-busy": {"minutes": 0},
    }
    return parse(
        {"interval": 5, "webUrl": f"http://{DEMO_HOST}:{port}", "rules": rules}, where="demo"
    )


DEMO_PRICES: dict[str, Any] = {
    "currency": "EUR",
    "default": 1.0,
    "models": {"NVIDIA H200": 4.0, "NVIDIA H100 80GB HBM3": 3.5, "NVIDIA A100 80GB PCIe": 2.0},
    "teamLabel": "team",
    "namespaceLabels": {"research": {"team": "research"}, "training": {"team": "ml-platform"},
                        "inference": {"team": "ml-platform"}, "batch": {"team": "data"}},
}  # fmt: skip


@dataclass
class Demo:
    """The demo as an ASGI app; `simulator` is set while the app's lifespan runs."""

    app: Any
    store: MemoryStore
    kubeconfig: Path
    simulator: Simulator | None = None
    remove_kubeconfig: bool = False  # a kubeconfig outside the workdir goes with the clusters

    @property
    def ready(self) -> bool:
        watchers = self.app.state.mirror.reactors
        return watchers is not None and watchers.ready


@contextlib.asynccontextmanager
async def simulated_world(demo: Demo, scenario: str) -> AsyncIterator[Simulator]:
    """Serve the scenario's clusters and run its world (churn, delayed starts)."""
    world = build_world(load_scenario(scenario))
    async with Simulator(
        world.specs, kubeconfig_path=demo.kubeconfig, remove_kubeconfig=demo.remove_kubeconfig
    ) as sim:
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
    kubeconfig: Path | None = None,
    utilization: Any = None,
) -> Demo:
    """See the module docstring."""
    if not settings.history.database_url:
        history = dataclasses.replace(settings.history, database_url=str(workdir / "history.db"))
        settings = dataclasses.replace(settings, history=history)
    if not settings.history.prices:
        workdir.mkdir(parents=True, exist_ok=True)
        prices = workdir / "prices.yaml"
        prices.write_text(yaml.safe_dump(DEMO_PRICES, sort_keys=False))
        history = dataclasses.replace(settings.history, prices=str(prices))
        settings = dataclasses.replace(settings, history=history)
    store = MemoryStore()  # in memory, live events on its in-process bus
    demo = Demo(
        app=None,
        store=store,
        kubeconfig=kubeconfig or workdir / "demo.kubeconfig",
        remove_kubeconfig=kubeconfig is not None,
    )
    resources: list[Any] = [simulated_world(demo, scenario)]
    prometheus = None
    if utilization is None:  # Prometheus scraping the simulator's exporters, when installed
        prometheus = DemoPrometheus(demo, workdir)
        resources.append(prometheus)
    demo.app = mirror_app(
        settings,
        store=store,
        kubeconfig=lambda: str(demo.kubeconfig),
        resources=resources,
        alerts=alerts,
        access=access,
        slack=slack,
        utilization=utilization,
        utilization_source=prometheus,
    )
    return demo
