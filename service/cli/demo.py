"""`dra-mirror demo`: the simulator's two-cluster `demo` scenario and the mirror, one process.

What a newcomer gets from one command, on embedded defaults (in-memory state, history in a
SQLite file, no Redis): the simulated clusters serve on free loopback ports with a kubeconfig in a temporary
directory, the mirror watches them through the real Kubernetes client exactly as it would
watch real clusters, and the GraphQL API listens on 127.0.0.1:8000 (or `--port`). Once every
cluster has synced, it prints the GraphiQL URL, the Devices screens' URL and three queries to
paste. The demo serves without authentication, so it binds 127.0.0.1 whatever
DRA_MIRROR_HTTP_HOST says, and says so.

Everything runs inside the app's lifespan (simulator first, then the watchers), so Ctrl-C
stops the watchers, then the simulator, and removes the temporary kubeconfig.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from dra_mirror.service.alerts.config import AlertsConfig
from dra_mirror.service.cli.deadline import ShutdownDeadline
from dra_mirror.service.cli.server import DeadlineServer
from dra_mirror.service.runtime.http_protocol import protocol_class
from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.scenario import build_world, load_scenario
from dra_mirror.service.stores.memory import MemoryStore

DEMO_HOST = "127.0.0.1"

EXAMPLE_QUERIES = (
    (
        "Every cluster, how it syncs, and what is free",
        "{ clusters { name status { connected synced apiVersion }"
        " counts { devices freeDevices claims pendingClaims } } }",
    ),
    (
        "Who holds the first GPU of the demo (by uuid), and which pods use it",
        '{ whoHolds(device: "GPU-21f6a090-a7a1-f57a-27f8-e0da547eb43a") { cluster request shareID'
        " device { name node { name } } claim { namespace name state origin }"
        " pods { namespace name phase } } }",
    ),
    (
        "Claims waiting or idle, with what they ask for",
        "{ resourceClaims(first: 50) { totalCount edges { node { cluster namespace name state"
        " idle idleSince pendingSeconds requests { name deviceClassName count }"
        " consumers { name phase } } } } }",
    ),
)


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


def banner(url: str, *, slack: bool = False) -> str:
    base = url.removesuffix("/graphql")
    lines = [
        f"dra-mirror demo: GraphiQL at {url}",
        f"Devices screens at {base}/ui/",
        "open: no authentication (a demo), so it listens on 127.0.0.1 only",
        f"Slack commands at {base}/slack/commands (signed with DRA_MIRROR_SLACK_SIGNING_SECRET)"
        if slack
        else "Slack commands: off (set DRA_MIRROR_SLACK_SIGNING_SECRET to try them)",
        "",
        "Paste one of these:",
    ]
    for title, query in EXAMPLE_QUERIES:
        lines += ["", f"# {title}", query]
    return "\n".join(lines) + "\n"


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
    """The demo as an ASGI app: its lifespan starts the simulator, then the mirror (history
    in a SQLite file in `workdir` unless a database is configured; `/slack/commands` with
    `slack`, the `SlackSettings` of DRA_MIRROR_SLACK_*). `access`: an access configuration
    (`service.access.config.AccessConfig`) for the browser tests of sign-in; the demo itself
    serves open."""
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


async def run_demo(
    settings: Settings,
    *,
    scenario: str = "demo",
    slack: Any = None,
    announce: Callable[[str], None] = print,
    alerts: AlertsConfig | None = None,
    deadline: ShutdownDeadline | None = None,
) -> None:
    """Serve the demo until cancelled; announce the URL once every cluster synced."""
    with tempfile.TemporaryDirectory(prefix="dra-mirror-demo-") as workdir:
        demo = demo_app(
            settings, workdir=Path(workdir), scenario=scenario, alerts=alerts, slack=slack
        )
        config = uvicorn.Config(
            demo.app,
            host=DEMO_HOST,  # served open: never beyond this machine
            port=settings.http.port,
            http=protocol_class(settings.http.header_timeout, settings.http.max_connections),
            log_config=None,
            access_log=False,
            lifespan="on",
        )
        deadline = deadline or ShutdownDeadline(settings.http.shutdown_deadline)
        server = DeadlineServer(config, deadline=deadline)
        serving = asyncio.create_task(server.serve(), name="demo-api")
        url = f"http://{DEMO_HOST}:{settings.http.port}/graphql"
        try:
            while not server.started:
                if serving.done():
                    await serving
                    return
                await asyncio.sleep(0.05)
            while not demo.ready:
                if serving.done():
                    break
                await asyncio.sleep(0.1)
            announce(banner(url, slack=slack is not None))
            await serving
        finally:
            server.should_exit = True
            await asyncio.gather(serving, return_exceptions=True)
