"""The Kubernetes resources the mirror watches, and where each is served.

`WATCHED` is the single list of `(group, plural)` pairs the watchers list and watch; the Helm
chart's ClusterRole is checked against it (get/list/watch on exactly these). The core group is
`""`. resource.k8s.io is served at one of several versions per cluster (see `discovery`);
`collection_path` builds the URL of a collection once that version is known.

Promises: pure data and string building, no I/O.
"""

from __future__ import annotations

from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)

DRA_GROUP = "resource.k8s.io"
CORE_GROUP = ""
# resource.k8s.io versions in order of preference: v1 (GA in 1.34), then the betas.
DRA_VERSIONS: tuple[str, ...] = ("v1", "v1beta2", "v1beta1")

WATCHED: tuple[tuple[str, str], ...] = (
    (DRA_GROUP, "deviceclasses"),
    (DRA_GROUP, "resourceslices"),
    (DRA_GROUP, "resourceclaims"),
    (DRA_GROUP, "resourceclaimtemplates"),
    (CORE_GROUP, "pods"),
    (CORE_GROUP, "nodes"),
)

KIND_BY_PLURAL: dict[str, str] = {
    "deviceclasses": DEVICE_CLASS,
    "resourceslices": RESOURCE_SLICE,
    "resourceclaims": RESOURCE_CLAIM,
    "resourceclaimtemplates": RESOURCE_CLAIM_TEMPLATE,
    "pods": POD,
    "nodes": NODE,
}
PLURAL_BY_KIND: dict[str, str] = {kind: plural for plural, kind in KIND_BY_PLURAL.items()}
GROUP_BY_KIND: dict[str, str] = {KIND_BY_PLURAL[plural]: group for group, plural in WATCHED}


def is_dra(kind: str) -> bool:
    """Whether `kind` lives in resource.k8s.io (its version is discovered per cluster)."""
    return GROUP_BY_KIND[kind] == DRA_GROUP


def collection_path(kind: str, dra_version: str | None = None) -> str:
    """The all-namespaces collection URL path of `kind` (`/api/v1/pods`,
    `/apis/resource.k8s.io/v1/resourceclaims`). DRA kinds need the cluster's version."""
    plural = PLURAL_BY_KIND[kind]
    if GROUP_BY_KIND[kind] == CORE_GROUP:
        return f"/api/v1/{plural}"
    if dra_version is None:
        raise ValueError(f"{kind} needs the resource.k8s.io version the cluster serves")
    return f"/apis/{DRA_GROUP}/{dra_version}/{plural}"
