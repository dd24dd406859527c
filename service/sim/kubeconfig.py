"""A kubeconfig for the simulated clusters: one cluster, user and context per cluster.

The context, cluster and user entries are all named after the simulated cluster, and
`server` is `http://127.0.0.1:<port>` (plain HTTP on loopback); a user carries the bearer
`token` its scenario names (`access.kubeconfigToken`), otherwise no credentials. The
file is written atomically — a temporary file in the same directory, then `os.replace` —
so a reader that sees the path sees a complete file; the simulator writes it before it
reports ready.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml


def kubeconfig(
    ports: Mapping[str, int],
    *,
    current: str | None = None,
    host: str = "127.0.0.1",
    tokens: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The kubeconfig document for clusters named by `ports` (name -> port); `tokens` gives
    the bearer token of each cluster's user (name -> token)."""
    names = list(ports)
    tokens = tokens or {}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {"name": n, "cluster": {"server": f"http://{host}:{ports[n]}"}} for n in names
        ],
        "users": [{"name": n, "user": {"token": tokens[n]} if n in tokens else {}} for n in names],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
        "current-context": current or (names[0] if names else ""),
    }


def write_kubeconfig(
    path: str | os.PathLike,
    ports: Mapping[str, int],
    *,
    host: str = "127.0.0.1",
    tokens: Mapping[str, str] | None = None,
) -> Path:
    """Write the kubeconfig for `ports` to `path` atomically; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(kubeconfig(ports, host=host, tokens=tokens), sort_keys=False)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
