"""The Kubernetes kinds dra-mirror knows, as kube-apiserver describes them: one table.

Each `Resource` says how a kind is named and served — its plural (the URL segment), its API
group (`""` for the core group), whether it is namespaced, its short names and whether it has
a `status` subresource — matching what a 1.34/1.35 kube-apiserver publishes in discovery: the
four DRA kinds have no short names; only ResourceClaim has a `status` subresource among them
(ResourceSlice and DeviceClass are written whole by drivers and admins).

* `MIRRORED` — the seven kinds the mirror lists and watches, in the order the reactor lists
  them; the watchers' collection URLs (`service.clusters.resources`), the Helm chart's
  ClusterRole (get/list/watch on exactly these; `tests/infra/test_helm.py`) and the record
  types all follow it.
* `SERVED` — what the simulated API server serves: `MIRRORED` plus Namespace (kubectl and the
  simulator's garbage collector need namespaces; the mirror does not watch them).
* resource.k8s.io is served at one of `DRA_VERSIONS` per cluster, newest first (v1 is GA in
  Kubernetes 1.34); the core kinds are always `v1`.
* DeviceTaintRule is served at versions of its own (`Resource.versions`, newest first):
  v1alpha3 from 1.33 (alpha, off by default), v1beta2 from 1.36, v1 from 1.37. Its version is
  discovered on its own, and a cluster serving none of them is watched without it
  (`OPTIONAL`: never a reason to call DRA unserved or to hold back "synced").

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
DEVICE_TAINT_RULE: Final = "DeviceTaintRule"
# DeviceTaintRule's versions, newest first: v1 (1.37), v1beta2 (1.36), v1alpha3 (1.33-1.36).
TAINT_RULE_VERSIONS: tuple[str, ...] = ("v1", "v1beta2", "v1alpha3")
# Every resource.k8s.io version some mirrored kind is served at, newest first.
ALL_DRA_VERSIONS: tuple[str, ...] = ("v1", "v1beta2", "v1beta1", "v1alpha3")


def taint_rule_versions(minor: int) -> tuple[str, ...]:
    """The DeviceTaintRule versions a Kubernetes 1.<minor> API server has (newest first; the
    alpha and beta ones serve only where switched on): v1alpha3 from 1.33, v1beta2 from
    1.36, v1 from 1.37 (resource/*/types.go, prerelease-lifecycle `introduced`)."""
    return tuple(
        v for v, since in (("v1", 37), ("v1beta2", 36), ("v1alpha3", 33)) if minor >= since
    )


class Resource(NamedTuple):
    """One API resource: a kind and how the API server serves it."""

    plural: str
    kind: str
    group: str  # "" for the core group
    namespaced: bool
    short_names: tuple[str, ...]
    has_status: bool
    # The resource.k8s.io versions serving this kind when they differ from DRA_VERSIONS.
    versions: tuple[str, ...] | None = None

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

    @property
    def own_versions(self) -> bool:
        """Whether its resource.k8s.io version is discovered apart from the other DRA kinds."""
        return self.versions is not None


MIRRORED: tuple[Resource, ...] = (
    Resource("deviceclasses", DEVICE_CLASS, DRA_GROUP, False, (), False),
    Resource("resourceslices", RESOURCE_SLICE, DRA_GROUP, False, (), False),
    Resource("resourceclaims", RESOURCE_CLAIM, DRA_GROUP, True, (), True),
    Resource("resourceclaimtemplates", RESOURCE_CLAIM_TEMPLATE, DRA_GROUP, True, (), False),
    Resource(
        "devicetaintrules", DEVICE_TAINT_RULE, DRA_GROUP, False, (), True, TAINT_RULE_VERSIONS
    ),
    Resource("pods", POD, CORE_GROUP, True, ("po",), True),
    Resource("nodes", NODE, CORE_GROUP, False, ("no",), True),
)
SERVED: tuple[Resource, ...] = (
    *MIRRORED,
    Resource("namespaces", NAMESPACE, CORE_GROUP, False, ("ns",), True),
)

# Kinds a cluster may not serve at all while it serves DRA: watched where served.
OPTIONAL: frozenset[str] = frozenset(r.kind for r in MIRRORED if r.own_versions)
# The DRA kinds whose one version is discovered together (`DRA_VERSIONS`).
CORE_DRA: tuple[Resource, ...] = tuple(r for r in MIRRORED if r.is_dra and not r.own_versions)

BY_KIND: dict[str, Resource] = {r.kind: r for r in SERVED}
BY_PLURAL: dict[str, Resource] = {r.plural: r for r in SERVED}
