"""`dra-mirror demo`: the simulator's two-cluster `demo` scenario and the mirror, one process.

What a newcomer gets from one command: the mirror the composition root builds for the demo
(`service.runtime.demo`: the simulated clusters on free loopback ports, watched through the
real Kubernetes client, in-memory state, history in a SQLite file in a temporary directory),
served on 127.0.0.1:8000 (or `--port`). The simulator's kubeconfig is written to
`./demo.kubeconfig` (or `--kubeconfig-out`), so `kubectl --kubeconfig demo.kubeconfig` changes
the very clusters the mirror watches. Once every cluster has synced, it prints the GraphiQL
URL, the Devices screens' URL, the kubeconfig with a kubectl line, and three queries to paste.
The demo serves without authentication, so it binds 127.0.0.1 whatever DRA_MIRROR_HTTP_HOST
says, and says so.

Everything runs inside the app's lifespan (simulator first, then the watchers), so Ctrl-C
stops the watchers, then the simulator, and removes the kubeconfig (unless something else
replaced it meanwhile) and the temporary directory.
"""

from __future__ import annotations

import asyncio
import shlex
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dra_mirror.service.cli.deadline import ShutdownDeadline
from dra_mirror.service.runtime.demo import DEMO_HOST, demo_app
from dra_mirror.service.runtime.server import mirror_server
from dra_mirror.service.settings import Settings

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


KUBECONFIG_OUT = "demo.kubeconfig"


def banner(
    url: str,
    *,
    slack: bool = False,
    kubeconfig: str | None = None,
    contexts: Sequence[str] = (),
) -> str:
    base = url.removesuffix("/graphql")
    lines = [
        f"dra-mirror demo: GraphiQL at {url}",
        f"Devices screens at {base}/ui/",
        "open: no authentication (a demo), so it listens on 127.0.0.1 only",
    ]
    if kubeconfig:
        first = f" --context {contexts[0]}" if contexts else ""
        lines += [
            f"kubeconfig of the simulated clusters (contexts: {', '.join(contexts)}): {kubeconfig}",
            f"  kubectl --kubeconfig {shlex.quote(kubeconfig)}{first} get resourceclaims -A",
        ]
    lines += [
        f"Slack commands at {base}/slack/commands (signed with DRA_MIRROR_SLACK_SIGNING_SECRET)"
        if slack
        else "Slack commands: off (set DRA_MIRROR_SLACK_SIGNING_SECRET to try them)",
        "",
        "Paste one of these:",
    ]
    for title, query in EXAMPLE_QUERIES:
        lines += ["", f"# {title}", query]
    return "\n".join(lines) + "\n"


async def run_demo(
    settings: Settings,
    *,
    scenario: str = "demo",
    slack: Any = None,
    announce: Callable[[str], None] = print,
    alerts: Any = None,
    deadline: ShutdownDeadline | None = None,
    kubeconfig: str | None = KUBECONFIG_OUT,
    utilization: Any = None,
) -> None:
    """Serve the demo until cancelled; announce the URL once every cluster synced.
    `kubeconfig`: where the simulator's kubeconfig goes (relative: to the working directory;
    None: the temporary directory, unannounced)."""
    with tempfile.TemporaryDirectory(prefix="dra-mirror-demo-") as workdir:
        demo = demo_app(
            settings,
            workdir=Path(workdir),
            scenario=scenario,
            alerts=alerts,
            slack=slack,
            kubeconfig=Path.cwd() / kubeconfig if kubeconfig else None,
            utilization=utilization,
        )
        deadline = deadline or ShutdownDeadline(settings.http.shutdown_deadline)
        server = mirror_server(
            demo.app,
            host=DEMO_HOST,  # served open: never beyond this machine
            port=settings.http.port,
            deadline=deadline,
            graceful=None,
            access_log=False,
            header_timeout=settings.http.header_timeout,
            max_connections=settings.http.max_connections,
        )
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
            contexts = list(demo.simulator.served) if demo.simulator is not None else []
            announce(banner(url, slack=slack is not None, kubeconfig=kubeconfig, contexts=contexts))
            await serving
        finally:
            server.should_exit = True
            await asyncio.gather(serving, return_exceptions=True)
