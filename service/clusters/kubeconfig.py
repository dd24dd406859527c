"""Which clusters to mirror, read from a kubeconfig and checked without connecting.

`plan_clusters(kubeconfig, contexts)` makes the choice `service.clusters.config.connect`
follows: with a kubeconfig, the named contexts (`--context`, repeatable) or every context in
it; without one, the in-cluster service account when running in a pod, else the default
kubeconfig (`$KUBECONFIG`, a path list, or `~/.kube/config`). It reads every file of the path
list, merged as kubectl merges them (the first file naming a context, cluster or user wins),
and checks it as kubectl would before using a context: a file that is not YAML, empty, not a
mapping, without contexts; a context that does not exist, or names a cluster without a server
or a user that is not there; no kubeconfig at all — each as one `ConfigurationError` line
naming the file and the fix. `current-context` is not used (the mirror watches the named
contexts, or all of them), so one naming a context that does not exist is no error, as
kubectl accepts it with `--context`.

Light on purpose: YAML and the standard library only (no Kubernetes client), so the commands
can check their configuration before anything heavy is imported or started.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from dra_mirror.service.clusters.errors import ConfigurationError

IN_CLUSTER_NAME = "in-cluster"
# What the kubelet gives every pod (kubernetes_asyncio's incluster_config reads the same).
SERVICE_HOST_ENV_NAME = "KUBERNETES_SERVICE_HOST"
SERVICE_TOKEN_FILENAME = "/var/run/secrets/kubernetes.io/serviceaccount/token"


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
    """Which clusters `connect` would connect to (see the module docstring); raises
    `ConfigurationError` with one line saying what is wrong and how to fix it."""
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
    files = [os.path.expanduser(p) for p in path.split(os.pathsep) if p]
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
