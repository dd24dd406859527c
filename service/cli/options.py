"""Settings at the edge: the flags every command shares, turned into one `Settings`.

Flags win over `DRA_MIRROR_*` environment variables, which win over the embedded defaults
(`service.settings`). `build_settings` reads the group's `--log-level`/`--log-json` too and
configures logging once the settings are known; `cluster_options` are the flags `serve` and
`watch` share (clusters, listening address, stores) and `cluster_settings` maps them onto the
settings' dotted names.

Promises: a bad flag or variable is a click usage error (exit 2), never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from dra_mirror.service.cli import preflight
from dra_mirror.service.cli.help import setting_option
from dra_mirror.service.logs import configure_logging
from dra_mirror.service.settings import Settings, SettingsError

F = TypeVar("F", bound=Callable[..., Any])


def build_settings(ctx: click.Context, **flags: Any) -> Settings:
    """Settings from the environment, overridden by the flags given (None = not given)."""
    root = ctx.find_root()
    overrides = {"log.level": root.params.get("log_level"), "log.json": root.params.get("log_json")}
    overrides.update(flags)
    try:
        settings = Settings.from_env(overrides)
    except SettingsError as error:
        raise preflight.ConfigurationProblem(str(error)) from None
    configure_logging(settings.log.level, json=settings.log.json)
    return settings


REDIS_HELP = (
    "Keep the state in Redis: redis://HOST:PORT, or redis+cluster://HOST:PORT for a Redis "
    "Cluster (none: in this process's memory; `watch` needs it)."
)


def cluster_options(command: F) -> F:
    """The options `serve` and `watch` share: clusters, listening address, stores."""
    options = [
        setting_option(
            "--kubeconfig",
            setting="clusters.kubeconfig",
            type=click.Path(dir_okay=False),
            help="Kubeconfig to read (none: the in-cluster config, or ~/.kube/config).",
        ),
        setting_option(
            "--context",
            "contexts",
            setting="clusters.contexts",
            multiple=True,
            default=(),
            help="Context to watch, one cluster each (repeatable; none: every context).",
        ),
        setting_option("--host", setting="http.host", help="Address to listen on."),
        setting_option(
            "--port", setting="http.port", type=int, help="Port to listen on (0: any free port)."
        ),
        setting_option("--redis-url", setting="store.redis_url", help=REDIS_HELP),
        setting_option(
            "--database-url",
            setting="history.database_url",
            help="Record history in this SQL database (SQLAlchemy URL or SQLite path).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def cluster_settings(ctx: click.Context, flags: dict[str, Any]) -> Settings:
    """The settings `cluster_options` give, over the environment."""
    return build_settings(
        ctx,
        **{
            "access.insecure_no_auth": flags.get("access.insecure_no_auth"),
            "clusters.kubeconfig": flags["kubeconfig"],
            "clusters.contexts": flags["contexts"] or None,
            "http.host": flags["host"],
            "http.port": flags["port"],
            "store.redis_url": flags["redis_url"],
            "history.database_url": flags["database_url"],
        },
    )
