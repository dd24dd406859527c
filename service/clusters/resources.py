"""Where the watchers find each mirrored kind on a cluster's API server.

The kinds themselves are the model's registry (`service.model.kinds.REGISTRY`); this module is
the clusters' view of it. `WATCHED` is the `(group, plural)` pairs the watchers list and watch,
and `GRANTED` the verbs the registry grants on each (the Helm chart's ClusterRole is checked
against it: exactly these verbs on exactly these resources). The core group is `""`. resource.k8s.io is served at one of several versions per cluster (see
`discovery`); `collection_path` builds the URL of a collection once that version is known.

Promises: pure data and string building, no I/O.
"""

from __future__ import annotations

from dra_mirror.service.model.kinds import (
    BY_KIND,
    CORE_GROUP,
    DRA_GROUP,
    DRA_VERSIONS,
    MIRRORED,
    REGISTRY,
)

__all__ = [
    "DRA_GROUP",
    "DRA_VERSIONS",
    "GRANTED",
    "KIND_BY_PLURAL",
    "WATCHED",
    "collection_path",
    "discovered",
    "is_dra",
]

WATCHED: tuple[tuple[str, str], ...] = tuple((r.group, r.plural) for r in MIRRORED)
KIND_BY_PLURAL: dict[str, str] = {r.plural: r.kind for r in MIRRORED}
GRANTED: dict[tuple[str, str], tuple[str, ...]] = {
    (k.resource.group, k.resource.plural): k.verbs for k in REGISTRY
}


def is_dra(kind: str) -> bool:
    """Whether `kind` lives in resource.k8s.io (its version is discovered per cluster)."""
    return BY_KIND[kind].is_dra


def discovered(kind: str) -> bool:
    """Whether the version `kind` is served at is discovered per cluster (every kind outside
    the core group: resource.k8s.io's, PodGroup's scheduling.k8s.io)."""
    return BY_KIND[kind].group != CORE_GROUP


def collection_path(kind: str, version: str | None = None) -> str:
    """The all-namespaces collection URL path of `kind` (`/api/v1/pods`,
    `/apis/resource.k8s.io/v1/resourceclaims`). A discovered kind needs the version the
    cluster serves it at."""
    resource = BY_KIND[kind]
    if resource.group == CORE_GROUP:
        return f"/api/v1/{resource.plural}"
    if version is None:
        raise ValueError(f"{kind} needs the {resource.group} version the cluster serves")
    return f"/apis/{resource.group}/{version}/{resource.plural}"
