"""Server-side printing: `meta.k8s.io/v1 Table` responses, as kube-apiserver builds them.

`kubectl get` asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints
the columns the server returns (plus NAMESPACE with `-A`, which kubectl adds from each
row's object metadata). Columns and cell rules follow `pkg/printers/internalversion`:
ResourceClaim STATE is `deleted`/`pending`/`allocated` plus `,reserved`; AGE is
`duration.HumanDuration` of the creation timestamp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

Column = dict[str, Any]
_NAME = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace. Cannot be updated.",
    "priority": 0,
}
_AGE = {
    "name": "Age",
    "type": "string",
    "format": "",
    "description": "CreationTimestamp is a timestamp representing the server time when this "
    "object was created.",
    "priority": 0,
}


def _col(name: str, description: str = "", priority: int = 0, type_: str = "string") -> Column:
    return {
        "name": name,
        "type": type_,
        "format": "",
        "description": description,
        "priority": priority,
    }


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    if seconds < -1:
        return "<invalid>"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{hours // 24 // 365}y"


def _age(obj: dict, now: datetime) -> str:
    created = obj["metadata"].get("creationTimestamp")
    if not created:
        return "<unknown>"
    when = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return human_duration((now - when).total_seconds())


def claim_state(claim: dict) -> str:
    """The STATE column of `kubectl get resourceclaims` (printers.go)."""
    states = []
    status = claim.get("status") or {}
    if claim["metadata"].get("deletionTimestamp"):
        states.append("deleted")
    if status.get("allocation") is None:
        if not claim["metadata"].get("deletionTimestamp"):
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _pod_cells(pod: dict) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    ready = sum(1 for c in containers if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in containers)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for c in containers:
        waiting = (c.get("state") or {}).get("waiting") or {}
        terminated = (c.get("state") or {}).get("terminated") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated.get("reason"):
            reason = terminated["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        restarts,
    ]


def _pod_wide(pod: dict) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    return [
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        "<none>",
    ]


def _node_cells(node: dict) -> list[Any]:
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Unknown"
    if ready is not None:
        state = "Ready" if ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = sorted(
        k.split("/", 1)[1]
        for k in (node["metadata"].get("labels") or {})
        if k.startswith("node-role.kubernetes.io/")
    )
    return [state, ",".join(roles) or "<none>"]


def _node_tail(node: dict) -> list[Any]:
    return [((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or ""]


# plural -> (columns after Name, cells before Age, cells after Age)
_PRINTERS: dict[str, tuple[list[Column], Callable[[dict], list], Callable[[dict], list]]] = {
    "deviceclasses": ([_AGE], lambda o: [], lambda o: []),
    "resourceclaimtemplates": ([_AGE], lambda o: [], lambda o: []),
    "resourceclaims": (
        [
            _col("State", "A summary of the current state (allocated, pending, reserved, etc.)."),
            _AGE,
        ],
        lambda o: [claim_state(o)],
        lambda o: [],
    ),
    "resourceslices": (
        [
            _col("Node", "The node providing the devices, if a single node."),
            _col("Driver", "The driver providing the devices."),
            _col("Pool", "The pool of the devices."),
            _AGE,
        ],
        lambda o: [
            (o.get("spec") or {}).get("nodeName") or "",
            (o.get("spec") or {}).get("driver") or "",
            ((o.get("spec") or {}).get("pool") or {}).get("name") or "",
        ],
        lambda o: [],
    ),
    "pods": (
        [
            _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", "The aggregate status of the containers in this pod."),
            _col(
                "Restarts",
                "The number of times the containers in this pod have been restarted.",
                type_="integer",
            ),
            _AGE,
            _col("IP", "IP address allocated to the pod.", 1),
            _col("Node", "Name of the node the pod is assigned to.", 1),
            _col("Nominated Node", "Name of the node the pod is nominated to.", 1),
            _col("Readiness Gates", "The readiness gates of the pod.", 1),
        ],
        _pod_cells,
        _pod_wide,
    ),
    "nodes": (
        [
            _col("Status", "The status of the node"),
            _col("Roles", "The roles of the node"),
            _AGE,
            _col("Version", "Kubelet Version reported by the node."),
        ],
        _node_cells,
        _node_tail,
    ),
    "namespaces": (
        [_col("Status", "The status of the namespace"), _AGE],
        lambda o: [(o.get("status") or {}).get("phase") or "Active"],
        lambda o: [],
    ),
}


_NAME_AND_AGE: tuple[list[Column], Callable[[dict], list], Callable[[dict], list]] = (
    [_AGE],
    lambda o: [],
    lambda o: [],
)


def table(
    plural: str,
    objects: Iterable[dict],
    *,
    resource_version: str,
    continue_token: str = "",
    remaining: int | None = None,
    include_object: str = "Metadata",
    now: datetime | None = None,
    headers: bool = True,
    served: Callable[[dict], dict] | None = None,
) -> dict:
    """A Table of `objects` (storage shape) with the columns kube-apiserver prints;
    `served` converts a row's full object (`includeObject=Object`) to the requested version."""
    now = now or datetime.now(UTC)
    # A kind without printer columns of its own (DeviceTaintRule, PodGroup): name and age.
    columns, before, after = _PRINTERS.get(plural, _NAME_AND_AGE)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {
            "cells": [obj["metadata"]["name"], *before(obj), _age(obj, now), *after(obj)]
        }
        if include_object == "Object":
            row["object"] = served(obj) if served is not None else obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    out: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    out["columnDefinitions"] = [_NAME, *columns] if headers else []
    out["rows"] = rows
    return out
