"""`dra-mirror`: the command line (click). Settings are built here, at the edge, and passed down.

Commands (each a small function registered on the group; other areas add theirs in their own
module, listed in `EXTRA_COMMANDS`, and they appear when that module exists):

    dra-mirror serve --kubeconfig PATH [--context NAME]… [--host H] [--port 8000]
                     [--redis-url URL] [--database-url URL] [--no-watch]
    dra-mirror watch --kubeconfig PATH [--context NAME]… --redis-url URL [--database-url URL]
    dra-mirror demo [--port N]
    dra-mirror sim --scenario FILE|NAME [--kubeconfig-out PATH] [--host H] [--port-base N]
    dra-mirror sim --list-scenarios
    dra-mirror migrate [--database-url URL]
    dra-mirror history partitions [--database-url URL] [--retention-days N] …
    dra-mirror schema [--write [--output PATH]]
    dra-mirror who-holds|free|waiting|idle … [--server URL] [--token T] [--json]

Flags win over `DRA_MIRROR_*` environment variables, which win over the embedded defaults
(`service.settings`). The API listens on 127.0.0.1:8000 by default, GraphQL at `/graphql`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import inspect
import signal
import sys
from pathlib import Path
from typing import Any

import click

from dra_mirror.service.logs import configure_logging
from dra_mirror.service.settings import Settings, SettingsError

SHUTDOWN_GRACE = 5.0
"""Seconds open HTTP requests (and GraphQL subscriptions) get after SIGTERM before they are
cancelled; then the watches stop and history drains (Kubernetes waits 30 s by default)."""

# (module, attribute) of commands other areas add; registered when the module exists.
EXTRA_COMMANDS: tuple[tuple[str, str], ...] = (
    # questions to a running server (chatops; `explain` is the diagnostics' own, below)
    ("dra_mirror.service.cli.client", "who_holds"),
    ("dra_mirror.service.cli.client", "free"),
    ("dra_mirror.service.cli.client", "waiting"),
    ("dra_mirror.service.cli.client", "idle"),
    ("dra_mirror.service.cli.diagnostics", "explain"),
    ("dra_mirror.service.cli.diagnostics", "lint"),
    ("dra_mirror.service.cli.history", "history"),  # history partitions (maintenance)
)


def build_settings(ctx: click.Context, **flags: Any) -> Settings:
    """Settings from the environment, overridden by the flags given (None = not given)."""
    root = ctx.find_root()
    overrides = {"log.level": root.params.get("log_level"), "log.json": root.params.get("log_json")}
    overrides.update(flags)
    try:
        settings = Settings.from_env(overrides)
    except SettingsError as error:
        raise click.UsageError(str(error)) from error
    configure_logging(settings.log.level, json=settings.log.json)
    return settings


def run(coro: Any) -> None:
    """Run until done, Ctrl-C or SIGTERM; either signal ends the program quietly, exit 0.

    Under uvicorn (serve, watch, demo) uvicorn takes both signals while it serves and shuts
    down gracefully: it stops accepting, gives open requests `SHUTDOWN_GRACE` seconds, and runs
    the app's lifespan shutdown — the watches stop and their last batches reach the state store,
    history drains, leases are released, stores close. uvicorn then raises the signal again
    with the previous handler, ours: for SIGTERM that cancels what is left of `coro` instead of
    letting the default action kill the process with status 143. Elsewhere (sim) SIGTERM
    cancels `coro` like Ctrl-C, so its cleanup runs."""
    termination = Termination()
    # signal.signal, not loop.add_signal_handler: uvicorn installs its handlers with
    # signal.signal and restores ours afterwards; a loop handler would fire under uvicorn's too
    # and cut its graceful shutdown short. Ours stays installed until every task has ended
    # (asyncio.run waits for them): a uvicorn server ending late re-raises into it, never into
    # the default action.
    previous = signal.signal(signal.SIGTERM, termination.on_signal)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(termination.run(coro))
    finally:
        signal.signal(signal.SIGTERM, previous)


class Termination:
    """SIGTERM cancels the main task (when it still runs); the cancellation then ends it
    quietly."""

    def __init__(self) -> None:
        self.received = False
        self.task: asyncio.Task[Any] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def on_signal(self, _signum: int, _frame: Any) -> None:
        self.received = True
        task, loop = self.task, self.loop
        if task is None or loop is None or task.done() or loop.is_closed():
            return
        loop.call_soon_threadsafe(task.cancel)

    async def run(self, coro: Any) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        if self.received:  # terminated before the program started
            coro.close()
            return
        try:
            await coro
        except asyncio.CancelledError:
            if not self.received:
                raise
            if self.task is not None:
                self.task.uncancel()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--log-level", default=None, help="DEBUG, INFO, WARNING, ERROR [env DRA_MIRROR_LOG_LEVEL]"
)
@click.option("--log-json/--log-plain", default=None, help="JSON lines instead of plain text.")
def main(log_level: str | None, log_json: bool | None) -> None:
    """Mirror of Kubernetes Dynamic Resource Allocation objects, served as one GraphQL graph."""


def cluster_options(command: Any) -> Any:
    """The options `serve` and `watch` share: clusters, listening address, stores."""
    options = [
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False, exists=True),
            default=None,
            help="Kubeconfig to read (default: in-cluster config, or ~/.kube/config).",
        ),
        click.option(
            "--context",
            "contexts",
            multiple=True,
            help="Context to watch, one cluster each (repeatable; default: every context).",
        ),
        click.option("--host", default=None, help="Address to listen on (default 127.0.0.1)."),
        click.option("--port", type=int, default=None, help="Port to listen on (default 8000)."),
        click.option("--redis-url", default=None, help="Keep state in Redis instead of memory."),
        click.option("--database-url", default=None, help="Record history in this SQL database."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def cluster_settings(ctx: click.Context, flags: dict[str, Any]) -> Settings:
    return build_settings(
        ctx,
        **{
            "clusters.kubeconfig": flags["kubeconfig"],
            "clusters.contexts": flags["contexts"] or None,
            "http.host": flags["host"],
            "http.port": flags["port"],
            "store.redis_url": flags["redis_url"],
            "history.database_url": flags["database_url"],
        },
    )


@main.command()
@cluster_options
@click.option(
    "--no-watch",
    is_flag=True,
    help="Serve only: read the state the `watch` replicas write to Redis.",
)
@click.pass_context
def serve(ctx: click.Context, no_watch: bool, **flags: Any) -> None:
    """Watch clusters and serve the GraphQL API (or only serve, with --no-watch)."""
    settings = cluster_settings(ctx, flags)
    if no_watch and not settings.store.redis_url:
        raise click.UsageError("--no-watch reads the shared state: give --redis-url")
    run(_serve(settings, watch=not no_watch))


@main.command()
@cluster_options
@click.pass_context
def watch(ctx: click.Context, **flags: Any) -> None:
    """Only watch clusters into the shared state (Redis) and history; /healthz and /readyz
    stay served for probes."""
    settings = cluster_settings(ctx, flags)
    if not settings.store.redis_url:
        raise click.UsageError("watch writes the shared state: give --redis-url")
    run(_serve(settings, watch=True))


def open_state_store(settings: Settings) -> Any:
    """The state store the settings ask for: in memory, or Redis when a URL is given."""
    if settings.store.redis_url:
        if importlib.util.find_spec("dra_mirror.service.stores.redis") is None:
            raise click.UsageError("--redis-url: this build has no Redis state store yet")
        redis_module = importlib.import_module("dra_mirror.service.stores.redis")
        return redis_module.RedisStore.from_url(
            settings.store.redis_url, prefix=settings.store.redis_prefix
        )
    from dra_mirror.service.stores.bus import LiveMemoryStore  # in memory, with live events

    return LiveMemoryStore()


def slack_settings() -> Any:
    """Slack commands' settings from DRA_MIRROR_SLACK_* (None: `/slack/commands` is off)."""
    from dra_mirror.service.slack import SlackSettings

    try:
        return SlackSettings.from_env()
    except SettingsError as error:
        raise click.UsageError(str(error)) from error


async def _serve(settings: Settings, *, watch: bool = True) -> None:
    import uvicorn

    from dra_mirror.service.http.app import mirror_app

    app = mirror_app(
        settings, store=open_state_store(settings), watch=watch, slack=slack_settings()
    )
    config = uvicorn.Config(
        app,
        host=settings.http.host,
        port=settings.http.port,
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
    click.echo(
        f"dra-mirror: GraphQL at http://{settings.http.host}:{settings.http.port}/graphql", err=True
    )
    server = uvicorn.Server(config)
    with contextlib.suppress(SystemExit):  # uvicorn exits with 3 when the lifespan fails
        await server.serve()
    if not server.started:  # the lifespan failed: a bad kubeconfig, an unreachable store…
        error = app.state.mirror.startup_error
        reason = f": {error}" if error is not None else " (see the log above)"
        raise click.ClickException(f"startup failed{reason}")


@main.command()
@click.option("--port", type=int, default=None, help="Port of the API (default 8000).")
@click.option("--scenario", default="demo", show_default=True, help="Shipped scenario or file.")
@click.pass_context
def demo(ctx: click.Context, port: int | None, scenario: str) -> None:
    """The simulator's two-cluster demo and the mirror, in one process."""
    settings = build_settings(ctx, **{"http.port": port})
    from dra_mirror.service.cli.demo import run_demo

    run(run_demo(settings, scenario=scenario, announce=lambda text: click.echo(text)))


@main.command()
@click.option("--scenario", default=None, help="A shipped scenario name or a YAML file.")
@click.option(
    "--kubeconfig-out",
    type=click.Path(dir_okay=False),
    default="sim.kubeconfig",
    show_default=True,
    help="Where to write the kubeconfig (one context per cluster).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port-base", type=int, default=None, help="First port (one per cluster); default: free ports."
)
@click.option("--list-scenarios", is_flag=True, help="List the shipped scenarios and exit.")
@click.pass_context
def sim(
    ctx: click.Context,
    scenario: str | None,
    kubeconfig_out: str,
    host: str,
    port_base: int | None,
    list_scenarios: bool,
) -> None:
    """Serve simulated clusters (a scenario) with a Kubernetes API kubectl can use."""
    build_settings(ctx)
    from dra_mirror.service.sim import scenario as scenarios

    if list_scenarios:
        for name in scenarios.list_scenarios():
            click.echo(name)
        return
    if not scenario:
        raise click.UsageError("give --scenario NAME|FILE (see --list-scenarios)")
    try:
        scenarios.load_scenario(scenario)
    except (scenarios.ScenarioError, OSError) as error:
        raise click.UsageError(f"--scenario {scenario}: {error}") from error
    kwargs: dict[str, Any] = {"kubeconfig_path": kubeconfig_out, "port_base": port_base}
    if "host" in inspect.signature(scenarios.serve_scenario).parameters:
        kwargs["host"] = host
    elif host != "127.0.0.1":
        raise click.UsageError("--host: this simulator listens on 127.0.0.1 only")
    run(scenarios.serve_scenario(scenario, announce=lambda text: click.echo(text), **kwargs))


@main.command()
@click.option(
    "--database-url",
    default=None,
    help="History database (SQLAlchemy URL or SQLite path) [env DRA_MIRROR_HISTORY_DATABASE_URL].",
)
@click.pass_context
def migrate(ctx: click.Context, database_url: str | None) -> None:
    """Bring the history database to the newest schema (Alembic upgrade head)."""
    settings = build_settings(ctx, **{"history.database_url": database_url})
    url = settings.history.database_url
    if not url:
        raise click.UsageError("give --database-url or DRA_MIRROR_HISTORY_DATABASE_URL")
    from dra_mirror.service.history.migrate import migrate as upgrade
    from dra_mirror.service.stores.protocols import StoreUnavailable

    try:
        asyncio.run(upgrade(url))
    except StoreUnavailable as error:
        raise click.ClickException(f"history database unavailable: {error}") from error
    click.echo("history database at the newest schema")


@main.command("schema")
@click.option("--write", is_flag=True, help="Write schema/schema.graphql instead of printing.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="With --write: the file to write (default: the committed schema.graphql).",
)
def schema_command(write: bool, output: str | None) -> None:
    """Print the GraphQL SDL (or write the committed copy)."""
    from dra_mirror import schema

    if write:
        path = schema.write_sdl(Path(output)) if output else schema.write_sdl()
        click.echo(f"wrote {path}")
    else:
        click.echo(schema.print_sdl(), nl=False)


def _register_extra_commands() -> None:
    for module_name, attribute in EXTRA_COMMANDS:
        try:
            found = importlib.util.find_spec(module_name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            continue
        command = getattr(importlib.import_module(module_name), attribute, None)
        if isinstance(command, click.Command):
            main.add_command(command)


_register_extra_commands()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
