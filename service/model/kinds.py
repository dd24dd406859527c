"""The Kubernetes kinds dra-mirror knows, as kube-apiserver describes them: one table.

Each `Resource` says how a kind is named and served — its plural (the URL segment), its API
group (`""` for the core group), whether it is namespaced, its short names and whether it has
a `status` subresource — matching what a 1.34/1.35 kube-apiserver publishes in discovery: the
four DRA kinds have no short names; only ResourceClaim has a `status` subresource among them
(ResourceSlice and DeviceClass are written whole by drivers and admins).

* `MIRRORED` — the six kinds the mirror lists and watches, in the order the reactor lists
  them; the watchers' collection URLs (`service.clusters.resources`), the Helm chart's
  ClusterRole (get/list/watch on exactly these; `tests/infra/test_helm.py`) and the record
  types all follow it.
* `SERVED` — what the simulated API server serves: `MIRRORED` plus Namespace (kubectl and the
  simulator's garbage collector need namespaces; the mirror does not watch them).
* resource.k8s.io is served at one of `DRA_VERSIONS` per cluster, newest first (v1 is GA in
  Kubernetes 1.34); the core kinds are always `v1`.

Promises: pure data, no I/O; the only definition of these names in the package.
"""

from __future__ import annotations

from typing import Final, NamedTuple

DRA_GROUP = "resource.k8s.io"
CORE_GROUP = ""
# resource.k8s.io versions in order of preference: v1 (GA in 1.34), then the betas.
DRA_VERSIONS: tuple[str, ...] = ("v1", "v1beta2", "v1beta1")

# Kinds, as Kubernetes spells them (Final: type checkers read them as literals, so a call such
# as `normalize(RESOURCE_CLAIM, …)` is known to give a ClaimRecord).
DEVICE_CLASS: Final = "DeviceClass"
RESOURCE_SLICE: Final = "ResourceSlice"
RESOURCE_CLAIM: Final = "ResourceClaim"
RESOURCE_CLAIM_TEMPLATE: Final = "ResourceClaimTemplate"
POD: Final = "Pod"
NODE: Final = "Node"
NAMESPACE: Final = "Namespace"


class Resource(NamedTuple):
    """One API resource: a kind and how the API server serves it."""

    plural: str
    kind: str
    group: str  # "" for the core group
    namespaced: bool
    short_names: tuple[str, ...]
    has_status: bool

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def is_dra(self) -> bool:
        """Whether it lives in resource.k8s.io (its version is discovered per cluster)."""
        return self.group == DRA_GROUP


MIRRORED: tuple[Resource, ...] = (
    Resource("deviceclasses", DEVICE_CLASS, DRA_GROUP, False, (), False),
    Resource("resourceslices", RESOURCE_SLICE, DRA_GROUP, False, (), False),
    Resource("resourceclaims", RESOURCE_CLAIM, DRA_GROUP, True, (), True),
    Resource("resourceclaimtemplates", RESOURCE_CLAIM_TEMPLATE, DRA_GROUP, True, (), False),
    Resource("pods", POD, CORE_GROUP, True, ("po",), True),
    Resource("nodes", NODE, CORE_GROUP, False, ("no",), True),
)
SERVED: tuple[Resource, ...] = (
    *MIRRORED,
    Resource("namespaces", NAMESPACE, CORE_GROUP, False, ("ns",), True),
)

BY_KIND: dict[str, Resource] = {r.kind: r for r in SERVED}
BY_PLURAL: dict[str, Resource] = {r.plural: r for r in SERVED}
