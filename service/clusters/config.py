"""Connections to the clusters to mirror, from a kubeconfig or the in-cluster service account.

`connect(kubeconfig, contexts)` gives one `ClusterConnection` per cluster:

* with a kubeconfig: one per named context (`--context`, repeatable), or one per context in the
  file when none is named; the cluster's name in the mirror is the context name;
* without one: the in-cluster configuration (service account token, re-read as the kubelet
  rotates it) when running in a pod, else the default kubeconfig (`$KUBECONFIG`,
  `~/.kube/config`).

Each connection has its own `ApiClient` (own Configuration, own aiohttp session), so clusters
never share credentials or connection pools. Exec credential plugins (EKS, GKE, AKS) are run by
kubernetes_asyncio; their tokens are refreshed before they expire through the Configuration's
`refresh_api_key_hook`. Errors leave as `ConfigurationError`.

`plan_clusters(kubeconfig, contexts)` is the same choice without connecting: it reads the
kubeconfig (every file of a `KUBECONFIG` path list, merged as kubectl merges them: the first
file naming a context, cluster or user wins) and checks it as kubectl would before using a
context — a file that is not YAML, empty, not a mapping, without contexts; a context that does
not exist, or names a cluster without a server or a user that is not there — each as one
`ConfigurationError` line naming the file and the fix. `current-context` is not used (the
mirror watches the named contexts, or all of them), so one naming a context that does not
exist is no error, as kubectl accepts it with `--context`. `dra-mirror serve` and `watch` call
it before anything starts; `connect` calls it too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException
from kubernetes_asyncio.config.incluster_config import (
    SERVICE_HOST_ENV_NAME,
    SERVICE_TOKEN_FILENAME,
    load_incluster_config,
)
from kubernetes_asyncio.config.kube_config import (
    ENV_KUBECONFIG_PATH_SEPARATOR,
    KubeConfigLoader,
    load_kube_config,
)

from dra_mirror.service.clusters.errors import ConfigurationError

IN_CLUSTER_NAME = "in-cluster"
# Six watches per cluster stay open at once, plus lists and discovery.
_MIN_POOL = 16


@dataclass(eq=False)
class ClusterConnection:
    """One cluster to mirror: its name in the mirror and the client that reaches it."""

    name: str
    api_client: ApiClient
    context: str | None = None  # kubeconfig context, None in-cluster

    async def close(self) -> None:
        await self.api_client.close()


def _configuration() -> Configuration:
    configuration = Configuration()
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, _MIN_POOL
    )
    return configuration


def _refresh_exec_tokens(loader: KubeConfigLoader, configuration: Configuration) -> None:
    if not loader._user or "exec" not in loader._user:  # only exec plugins expire here
        return

    async def refresh(config: Configuration) -> None:
        # load_from_exec_plugin re-runs the plugin only once its token is (nearly) expired.
        if await loader.load_from_exec_plugin():
            config.api_key["BearerToken"] = loader.token

    configuration.refresh_api_key_hook = refresh


async def _from_kubeconfig(path: str, context: str) -> ClusterConnection:
    configuration = _configuration()
    try:
        loader = await load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError, KeyError, ValueError, TypeError, yaml.YAMLError) as error:
        raise ConfigurationError(f"context {context!r} in {path}: {error}") from error
    _refresh_exec_tokens(loader, configuration)
    return ClusterConnection(context, ApiClient(configuration), context)


def _default_kubeconfig() -> str:
    """What kubectl reads without --kubeconfig: $KUBECONFIG (a path list), else ~/.kube/config."""
    # not kubernetes_asyncio's KUBE_CONFIG_DEFAULT_LOCATION: it is fixed when it is imported
    return os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def in_cluster() -> bool:
    """Whether this process runs in a pod (the kubelet sets KUBERNETES_SERVICE_HOST)."""
    return bool(os.environ.get(SERVICE_HOST_ENV_NAME))


@dataclass(frozen=True)
class ClusterPlan:
    """The clusters to mirror: in-cluster (`path` None), or these contexts of `path`."""

    path: str | None
    contexts: tuple[str, ...]


_HOW = "give --kubeconfig PATH (or DRA_MIRROR_CLUSTERS_KUBECONFIG, or KUBECONFIG)"


def plan_clusters(
    kubeconfig: str | None,
    contexts: Sequence[str] | None,
    *,
    in_cluster_name: str = IN_CLUSTER_NAME,
) -> ClusterPlan:
    """Which clusters `connect` would connect to, checked without connecting (see the module
    docstring); raises `ConfigurationError` with one line saying what is wrong and how to fix it."""
    if kubeconfig is None and not contexts and in_cluster():
        if not os.path.isfile(SERVICE_TOKEN_FILENAME):
            raise ConfigurationError(
                f"in-cluster configuration: no service account token at "
                f"{SERVICE_TOKEN_FILENAME} (automountServiceAccountToken off?): mount one, "
                f"or {_HOW}"
            )
        return ClusterPlan(None, (in_cluster_name,))
    path = kubeconfig or _default_kubeconfig()
    merged = _read_kubeconfigs(path, given=kubeconfig is not None)
    names = list(merged["contexts"])
    wanted = list(dict.fromkeys(contexts)) if contexts else names
    unknown = [name for name in wanted if name not in merged["contexts"]]
    if unknown:
        raise ConfigurationError(
            f"kubeconfig {path} has no context {', '.join(map(repr, unknown))} "
            f"(it has: {', '.join(names) or 'none'})"
        )
    if not wanted:
        raise ConfigurationError(f"kubeconfig {path} has no contexts: add one per cluster")
    for name in wanted:
        context = merged["contexts"][name]
        cluster = context.get("cluster")
        if not isinstance(merged["clusters"].get(cluster), dict) or not merged["clusters"][
            cluster
        ].get("server"):
            raise ConfigurationError(
                f"kubeconfig {path}: context {name!r} names cluster {cluster!r}, "
                "which is not in it or has no server"
            )
        user = context.get("user")
        if user and user not in merged["users"]:
            raise ConfigurationError(
                f"kubeconfig {path}: context {name!r} names user {user!r}, which is not in it"
            )
    return ClusterPlan(path, tuple(wanted))


def _read_kubeconfigs(path: str, *, given: bool) -> dict[str, dict[str, Any]]:
    """contexts, clusters and users (name -> body) of the files of `path` (a path list), the
    first file naming one winning, as kubectl merges them."""
    files = [os.path.expanduser(p) for p in path.split(ENV_KUBECONFIG_PATH_SEPARATOR) if p]
    existing = [f for f in files if os.path.exists(f)]
    if not existing:
        if given:
            raise ConfigurationError(f"kubeconfig {path} does not exist: {_HOW}")
        where = "at " + " or ".join(files) if files else "(KUBECONFIG is empty)"
        raise ConfigurationError(
            f"no kubeconfig found {where} and this process does not run in a pod: {_HOW}"
        )
    merged: dict[str, dict[str, Any]] = {"contexts": {}, "clusters": {}, "users": {}}
    for file in existing:
        try:
            with open(file, encoding="utf-8") as stream:
                document = yaml.safe_load(stream)
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigurationError(f"kubeconfig {file} cannot be read: {error}") from None
        except yaml.YAMLError as error:
            first = " ".join(str(error).split())[:200]
            raise ConfigurationError(f"kubeconfig {file} is not YAML: {first}") from None
        if document is None:
            raise ConfigurationError(f"kubeconfig {file} is empty")
        if not isinstance(document, dict):
            raise ConfigurationError(
                f"kubeconfig {file} is not a kubeconfig (a mapping with contexts, clusters "
                "and users)"
            )
        for section, body_key in (("contexts", "context"), ("clusters", "cluster"),
                                  ("users", "user")):  # fmt: skip
            entries = document.get(section) or []
            if not isinstance(entries, list):
                raise ConfigurationError(f"kubeconfig {file}: {section} is not a list")
            for entry in entries:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise ConfigurationError(f"kubeconfig {file}: {section} entry without a name")
                body = entry.get(body_key)
                merged[section].setdefault(entry["name"], body if isinstance(body, dict) else {})
    return merged


async def connect(
    kubeconfig: str | None,
    contexts: Sequence[str] | None,
    *,
    in_cluster_name: str = IN_CLUSTER_NAME,
) -> list[ClusterConnection]:
    """One connection per cluster to mirror (see the module docstring for the rules)."""
    plan = plan_clusters(kubeconfig, contexts, in_cluster_name=in_cluster_name)
    if plan.path is None:
        configuration = _configuration()
        try:
            load_incluster_config(client_configuration=configuration)
        except (ConfigException, OSError) as error:
            raise ConfigurationError(f"in-cluster configuration: {error}") from error
        return [ClusterConnection(in_cluster_name, ApiClient(configuration), None)]
    connections: list[ClusterConnection] = []
    try:
        for name in plan.contexts:
            connections.append(await _from_kubeconfig(plan.path, name))
    except BaseException:
        await close_all(connections)
        raise
    return connections


async def close_all(connections: Sequence[ClusterConnection]) -> None:
    """Close every connection's HTTP session."""
    for connection in connections:
        await connection.close()
