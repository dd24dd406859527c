"""Connections to the clusters to mirror, from a kubeconfig or the in-cluster service account.

`connect(kubeconfig, contexts)` gives one `ClusterConnection` per cluster:

* with a kubeconfig: one per named context (`--context`, repeatable), or one per context in the
  file when none is named; the cluster's name in the mirror is the context name;
* without one: the in-cluster configuration (service account token, re-read as the kubelet
  rotates it) when running in a pod, else the default kubeconfig (`$KUBECONFIG`,
  `~/.kube/config`).

Each connection has its own `ApiClient` (own Configuration, own aiohttp session), so clusters
never share credentials or connection pools; connections with the same TLS settings share one
TLS context (`service.clusters.tls`), and a plain `http://` server gets none. Exec credential plugins (EKS, GKE, AKS) are run by
kubernetes_asyncio; their tokens are refreshed before they expire through the Configuration's
`refresh_api_key_hook`. Errors leave as `ConfigurationError`.

`plan_clusters(kubeconfig, contexts)` (`service.clusters.kubeconfig`) is the same choice made
and checked without connecting; `connect` follows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from dra_mirror.service.clusters.errors import ConfigurationError
from dra_mirror.service.clusters.kube_client import (
    ApiClient,
    ConfigException,
    Configuration,
    KubeConfigLoader,
    load_incluster_config,
    load_kube_config,
)
from dra_mirror.service.clusters.kubeconfig import (  # noqa: F401  (re-exported)
    IN_CLUSTER_NAME,
    ClusterPlan,
    in_cluster,
    plan_clusters,
)
from dra_mirror.service.clusters.tls import TlsContexts
from dra_mirror.service.clusters.transport import api_client_for

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


async def _from_kubeconfig(path: str, context: str, tls: TlsContexts) -> ClusterConnection:
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
    return ClusterConnection(context, api_client_for(configuration, tls=tls), context)


async def connect(
    kubeconfig: str | None,
    contexts: Sequence[str] | None,
    *,
    in_cluster_name: str = IN_CLUSTER_NAME,
) -> list[ClusterConnection]:
    """One connection per cluster to mirror (see the module docstring for the rules)."""
    plan = plan_clusters(kubeconfig, contexts, in_cluster_name=in_cluster_name)
    tls = TlsContexts()  # the connections' TLS contexts, one per set of TLS settings
    if plan.path is None:
        configuration = _configuration()
        try:
            load_incluster_config(client_configuration=configuration)
        except (ConfigException, OSError) as error:
            raise ConfigurationError(f"in-cluster configuration: {error}") from error
        client = api_client_for(configuration, tls=tls)
        return [ClusterConnection(in_cluster_name, client, None)]
    connections: list[ClusterConnection] = []
    try:
        for name in plan.contexts:
            connections.append(await _from_kubeconfig(plan.path, name, tls))
    except BaseException:
        await close_all(connections)
        raise
    return connections


async def close_all(connections: Sequence[ClusterConnection]) -> None:
    """Close every connection's HTTP session."""
    for connection in connections:
        await connection.close()
