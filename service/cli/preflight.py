"""What the long-running commands check before anything starts, and how a bad setting ends.

`dra-mirror serve`, `watch`, `demo` and `migrate` call `check` (or `check_database`) right
after building their settings, before the state store, the history database, a watcher or
the HTTP server is started:

* the settings' values (checked when `Settings` is built: ports, URLs' schemes, levels…);
* the history database URL: a SQLite file this process can create or write, or PostgreSQL,
  with an installed driver (`service.history.db.check_url`);
* with watching: the kubeconfig and contexts (`service.clusters.kubeconfig.plan_clusters`), or
  the in-cluster service account;
* the access file's Kubernetes reviewing contexts (`check_access`): each a context of the
  kubeconfig;
* the registered documents (`DRA_MIRROR_GRAPHQL_PERSISTED_DOCUMENTS`): read, parsed and
  validated against the schema, as the app checks them when it is built
  (`service.runtime.standalone`);
* the listening address: the host resolves to an address of this machine and the port is
  free (a socket is bound as uvicorn binds it, and closed again).

A problem ends the command with exit status 2 and one line on stderr,
`dra-mirror: <what is wrong and how to fix it>` — never a traceback (`ConfigurationProblem`).
Exit statuses of the commands: 0 after a clean stop (SIGTERM, Ctrl-C); 1 when starting failed
at run time (a store that cannot be reached during startup, see the log); 2 for a bad
configuration or bad usage; the lint and question commands use 1 for "findings".
"""

from __future__ import annotations

import errno
import socket
from typing import IO, Any

import click

from dra_mirror.service.settings import Settings

# The cluster and history checks are imported when they run (the history check loads
# SQLAlchemy), so that commands which do not need them start fast.


class ConfigurationProblem(click.ClickException):
    """A setting that cannot work: one line on stderr, exit status 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"dra-mirror: {self.message}", err=True)


def check(settings: Settings, *, watch: bool, listen: bool = True) -> None:
    """Raise `ConfigurationProblem` for the first setting the command cannot work with."""
    if settings.history.database_url:
        check_database(settings.history.database_url)
    if watch:
        from dra_mirror.service.clusters.errors import ConfigurationError
        from dra_mirror.service.clusters.kubeconfig import plan_clusters

        clusters = settings.clusters
        try:
            plan_clusters(clusters.kubeconfig, clusters.contexts or None)
        except ConfigurationError as error:
            raise ConfigurationProblem(error.detail()) from None
    if settings.graphql.persisted_documents:
        check_documents(settings)
    if listen:
        problem = listen_problem(settings.http.host, settings.http.port)
        if problem:
            raise ConfigurationProblem(problem)


def check_access(config: Any, settings: Settings) -> None:
    """The contexts the access file's Kubernetes review names (`kubernetes.context`,
    `kubernetes.clusters`) are contexts of the kubeconfig the mirror uses."""
    kube = getattr(config, "kubernetes", None)
    if kube is None:
        return
    wanted = [c for c in (kube.context, *kube.clusters) if c]
    if not wanted and settings.clusters.kubeconfig is None:
        return  # reviewed by the pod's own cluster (in-cluster)
    from dra_mirror.service.clusters.errors import ConfigurationError
    from dra_mirror.service.clusters.kubeconfig import plan_clusters

    try:
        plan_clusters(settings.clusters.kubeconfig, wanted or None)
    except ConfigurationError as error:
        where = settings.access.config or "the access configuration"
        raise ConfigurationProblem(f"{where}: kubernetes: {error.detail()}") from None


def check_documents(settings: Settings) -> None:
    """The registered documents (DRA_MIRROR_GRAPHQL_PERSISTED_DOCUMENTS) read and checked
    against the schema, as the app checks them when it is built."""
    from dra_mirror.service.runtime.standalone import DocumentsProblem, check_documents

    try:
        check_documents(settings)
    except DocumentsProblem as error:
        raise ConfigurationProblem(f"registered documents: {error}") from None


def check_database(url: str) -> None:
    from dra_mirror.service.history.db import BadHistoryUrl, check_url

    try:
        check_url(url)
    except BadHistoryUrl as error:
        raise ConfigurationProblem(str(error)) from None


def listen_problem(host: str, port: int) -> str | None:
    """Why uvicorn could not listen on host:port (None: it can). Bound as uvicorn binds its
    socket (SO_REUSEADDR, IPv6 for a host with a colon), then closed."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except socket.gaierror as error:
        return f"cannot listen on {host}:{port}: the host does not resolve ({error.strerror})"
    except OSError as error:
        reason = error.strerror or str(error)
        hint = " (is another dra-mirror running? choose --port)" if port else ""
        if error.errno != errno.EADDRINUSE:
            hint = " (not an address of this machine? choose --host)"
        return f"cannot listen on {host}:{port}: {reason}{hint}"
    finally:
        sock.close()
    return None
