"""`dra-mirror`: the command group (click) and the commands that run the mirror.

    dra-mirror serve --kubeconfig PATH [--context NAME]… [--host H] [--port 8000]
                     [--redis-url URL] [--database-url URL] [--no-watch] [--insecure-no-auth]
    dra-mirror watch --kubeconfig PATH [--context NAME]… --redis-url URL [--database-url URL]
    dra-mirror demo [--port N]

The other commands live in their own modules and are registered here: `sim` (simulator),
`migrate` (database), `history partitions` (history), `schema` (sdl), `persisted-queries`
(registered documents' hashes), `who-holds|free|waiting|idle` (client), `explain` and `lint`
(diagnostics), `plan` (plan), `mcp` (MCP tools on stdio). Settings are built at the edge
(`service.cli.options`) and passed down;
flags win over `DRA_MIRROR_*` environment variables, which win over the embedded defaults
(`service.settings`). The API listens on 127.0.0.1:8000 by default, GraphQL at `/graphql`;
`serve` and `watch` say so once the socket is bound and the app started. Every option's help
names its variable and default (`service.cli.help`, applied to every registered command).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import click

from dra_mirror.service.cli import asked, busy, client, diagnostics, mcp, plan, preflight
from dra_mirror.service.cli.database import migrate
from dra_mirror.service.cli.deadline import ShutdownDeadline
from dra_mirror.service.cli.help import document_options, setting_option
from dra_mirror.service.cli.history import history
from dra_mirror.service.cli.options import build_settings, cluster_options, cluster_settings
from dra_mirror.service.cli.persisted import persisted_queries
from dra_mirror.service.cli.running import run
from dra_mirror.service.cli.sdl import schema_command
from dra_mirror.service.cli.simulator import sim
from dra_mirror.service.reactor.heap import SyncGc
from dra_mirror.service.settings import Settings, SettingsError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dra-mirror", prog_name="dra-mirror")
@setting_option("--log-level", setting="log.level", help="DEBUG, INFO, WARNING or ERROR.")
@setting_option("--log-json/--log-plain", setting="log.json", help="JSON lines or plain text.")
def main(log_level: str | None, log_json: bool | None) -> None:
    """Mirror of Kubernetes Dynamic Resource Allocation objects, served as one GraphQL graph."""


SLACK_EPILOG = (
    "Slack (/slack/commands, docs/chatops.md): DRA_MIRROR_SLACK_SIGNING_SECRET or "
    "DRA_MIRROR_SLACK_SIGNING_SECRET_FILE (none: the endpoint answers 404), "
    "DRA_MIRROR_SLACK_ANSWER_WITHIN, DRA_MIRROR_SLACK_RESPONSE_URLS."
)


@main.command(epilog=SLACK_EPILOG)
@cluster_options
@click.option(
    "--no-watch",
    is_flag=True,
    help="Serve only: read the state the `watch` replicas write to Redis.",
)
@setting_option(
    "--insecure-no-auth",
    setting="access.insecure_no_auth",
    is_flag=True,
    help="Serve without authentication: anyone who reaches the port sees everything.",
)
@click.pass_context
def serve(ctx: click.Context, no_watch: bool, insecure_no_auth: bool | None, **flags: Any) -> None:
    """Watch clusters and serve the GraphQL API (or only serve, with --no-watch)."""
    settings = cluster_settings(ctx, {**flags, "access.insecure_no_auth": insecure_no_auth})
    if no_watch and not settings.store.redis_url:
        raise click.UsageError("--no-watch reads the shared state: give --redis-url")
    access = access_config(settings)
    utilization_config(settings)  # a bad file stops the start here (exit 2)
    prices_config(settings)  # likewise
    preflight.check(settings, watch=not no_watch)
    deadline = ShutdownDeadline(settings.http.shutdown_deadline)
    run(_serve(settings, watch=not no_watch, access=access, deadline=deadline), deadline=deadline)


def access_config(settings: Settings) -> Any:
    """The checked access configuration; without one `serve` refuses to start, unless
    --insecure-no-auth says to serve everything to everyone (docs/security.md)."""
    from dra_mirror.service.access.config import load
    from dra_mirror.service.access.errors import AccessConfigError

    try:
        config = load(settings.access)
    except AccessConfigError as error:
        raise preflight.ConfigurationProblem(str(error)) from None
    preflight.check_access(config, settings)
    if not config.configured and not config.insecure_no_auth:
        raise preflight.ConfigurationProblem(
            "no authentication is configured: set DRA_MIRROR_ACCESS_CONFIG (or "
            "DRA_MIRROR_ACCESS_STATIC_TOKENS, _OIDC_ISSUER, _KUBERNETES_CONTEXT; see "
            "docs/security.md), or give --insecure-no-auth to serve everything to everyone"
        )
    return config


@main.command()
@cluster_options
@setting_option(
    "--insecure-no-auth",
    setting="access.insecure_no_auth",
    is_flag=True,
    help="Serve /graphql and /metrics without authentication.",
)
@click.pass_context
def watch(ctx: click.Context, insecure_no_auth: bool | None, **flags: Any) -> None:
    """Only watch clusters into the shared state (Redis, --redis-url required) and history.

    The watcher serves the same API as `serve` (/graphql, /metrics, /healthz, /readyz) on
    --port, over the state it writes. On one host beside `serve --no-watch`, give one of the
    two another --port."""
    settings = cluster_settings(ctx, {**flags, "access.insecure_no_auth": insecure_no_auth})
    if not settings.store.redis_url:
        raise click.UsageError("watch writes the shared state: give --redis-url")
    access = access_config(settings)
    utilization_config(settings)  # a bad file stops the start here (exit 2)
    prices_config(settings)  # likewise
    preflight.check(settings, watch=True)
    deadline = ShutdownDeadline(settings.http.shutdown_deadline)
    run(_serve(settings, watch=True, access=access, role="watcher", deadline=deadline),
        deadline=deadline)  # fmt: skip


def slack_settings() -> Any:
    """Slack commands' settings from DRA_MIRROR_SLACK_* (None: `/slack/commands` is off)."""
    from dra_mirror.service.runtime import configuration

    try:
        return configuration.slack_settings()
    except SettingsError as error:
        raise click.UsageError(str(error)) from error


def alerts_config(settings: Settings) -> Any:
    """The alerts' configuration file (DRA_MIRROR_ALERTS_CONFIG), checked; None when unset."""
    from dra_mirror.service.runtime import configuration

    try:
        return configuration.alerts_config(settings)
    except configuration.ConfigurationError as error:
        raise preflight.ConfigurationProblem(str(error)) from None


def utilization_config(settings: Settings) -> Any:
    """The utilisation source's file (DRA_MIRROR_UTILIZATION_CONFIG), checked; None when unset."""
    from dra_mirror.service.runtime import configuration

    try:
        return configuration.utilization_config(settings)
    except configuration.ConfigurationError as error:
        raise preflight.ConfigurationProblem(str(error)) from None


def prices_config(settings: Settings) -> Any:
    """The chargeback's price table (DRA_MIRROR_HISTORY_PRICES), checked; None when unset."""
    from dra_mirror.service.runtime import configuration

    try:
        return configuration.prices_config(settings)
    except configuration.ConfigurationError as error:
        raise preflight.ConfigurationProblem(str(error)) from None


async def _serve(
    settings: Settings,
    *,
    watch: bool = True,
    access: Any = None,
    role: str = "api",
    deadline: ShutdownDeadline | None = None,
) -> None:
    # The imports, the schema and the app are long-lived: no collector walks while they are
    # built, and they are frozen once the app has started (the watchers' own tuning goes on
    # until every cluster synced).
    starting = SyncGc()
    try:
        await _serve_app(settings, watch=watch, access=access, role=role, deadline=deadline,
                         starting=starting)  # fmt: skip
    finally:
        starting.done(freeze=False)  # the app never started


async def _serve_app(
    settings: Settings,
    *,
    watch: bool,
    access: Any,
    role: str,
    deadline: ShutdownDeadline | None,
    starting: SyncGc,
) -> None:
    from dra_mirror.service.runtime import server as servers
    from dra_mirror.service.runtime.mirror import mirror_app

    app = mirror_app(
        settings,
        watch=watch,
        slack=slack_settings(),
        access=access,
        role=role,
        alerts=alerts_config(settings) if watch else None,
        utilization=utilization_config(settings),
        graphql_in_lifespan=True,  # the first LISTs leave before strawberry and the schema load
    )
    deadline = deadline or ShutdownDeadline(settings.http.shutdown_deadline)
    server = servers.mirror_server(
        app,
        host=settings.http.host,
        port=settings.http.port,
        deadline=deadline,
        header_timeout=settings.http.header_timeout,
        max_connections=settings.http.max_connections,
    )
    serving = asyncio.create_task(_until_stopped(server), name="dra-mirror-api")
    while not server.started:  # bound and started: then say where
        if serving.done():
            break
        await asyncio.sleep(0.05)
    starting.done(freeze=server.started)
    if server.started:
        sockets = [sock for listening in server.servers for sock in listening.sockets]
        port = sockets[0].getsockname()[1] if sockets else settings.http.port
        url = f"http://{settings.http.host}:{port}/graphql"
        click.echo(f"dra-mirror: GraphQL at {url}", err=True)
    await serving
    if not server.started:  # the lifespan failed: a bad kubeconfig, an unreachable store…
        error = app.state.mirror.startup_error
        reason = f": {error}" if error is not None else " (see the log above)"
        raise click.ClickException(f"startup failed{reason}")


async def _until_stopped(server: Any) -> None:
    with contextlib.suppress(SystemExit):  # uvicorn exits with 3 when the lifespan fails
        await server.serve()


@main.command(epilog=SLACK_EPILOG)
@setting_option("--port", setting="http.port", type=int, help="Port of the API.")
@click.option("--scenario", default="demo", help="Shipped scenario or file.")
@click.option(
    "--kubeconfig-out",
    type=click.Path(dir_okay=False),
    default="demo.kubeconfig",
    show_default=True,
    help="Where to write the simulated clusters' kubeconfig, for kubectl (removed on exit).",
)
@click.pass_context
def demo(ctx: click.Context, port: int | None, scenario: str, kubeconfig_out: str) -> None:
    """The simulator's two-cluster demo and the mirror, in one process."""
    settings = build_settings(ctx, **{"http.port": port})
    preflight.check(settings, watch=False)
    from dra_mirror.service.cli.demo import run_demo
    from dra_mirror.service.runtime.demo import demo_alerts

    alerts = alerts_config(settings) or demo_alerts(settings.http.port)
    utilization = utilization_config(settings)  # else the demo's own Prometheus, if installed
    slack = slack_settings()
    deadline = ShutdownDeadline(settings.http.shutdown_deadline)
    preflight.writable(kubeconfig_out, "--kubeconfig-out")
    run(run_demo(settings, scenario=scenario, slack=slack, announce=click.echo, alerts=alerts,
                 deadline=deadline, kubeconfig=kubeconfig_out, utilization=utilization),
        deadline=deadline)  # fmt: skip


for command in (
    sim,
    migrate,
    history,
    schema_command,
    persisted_queries,
    client.who_holds,
    client.free,
    client.waiting,
    client.idle,
    asked.capacity,
    asked.fragmentation,
    busy.not_busy,
    busy.utilization_audit,
    asked.pod_devices,
    asked.device_history,
    diagnostics.explain,
    diagnostics.lint,
    plan.plan,
    mcp.mcp,
):
    main.add_command(command)
document_options(
    main,
    reads_settings={"serve": None, "watch": None, "demo": None, "migrate": ("history", "log")},
)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
