"""The one registry of the Kubernetes kinds dra-mirror knows: each kind registered once.

A `Kind` entry says everything the package needs of a kind:

* how kube-apiserver serves it (`Resource`): plural (the URL segment), API group (`""` for
  the core group), namespaced or not, short names, whether it has a `status` subresource — as
  a 1.34-1.37 kube-apiserver publishes them in discovery (the DRA kinds have no short names;
  among them only ResourceClaim and DeviceTaintRule have a `status` subresource);
* the versions the mirror reads it at, newest first, and the Kubernetes release that first
  serves each (`introduced`): resource.k8s.io v1 is GA in 1.34 (`DRA_VERSIONS`), the core
  kinds are `v1`;
* whether it is `optional`: a kind of its own versions (DeviceTaintRule: v1alpha3 from 1.33,
  alpha and off by default, v1beta2 from 1.36, v1 from 1.37; ResourcePoolStatusRequest:
  v1alpha3 from 1.36) is discovered on its own, and
  a cluster serving none of them is watched without it — never a reason to call DRA unserved
  or to hold back "synced"; its served version is kept per kind (`ClusterStatus.optional`);
* how it is read: its wire Struct (`service.model.api`, only the fields the mirror needs), the
  converter from wire to record, and its record type (`service.model.records`, tagged with the
  kind);
* how the index reacts to it (`IndexHook`): what it derives when an object of it changes;
* the verbs the mirror's ClusterRole grants on it (`helm/dra-mirror/templates/clusterrole.yaml`
  is checked against them: `tests/infra/test_helm.py`).

`MIRRORED` lists the kinds the mirror lists and watches, in the order the reactor lists them;
the watchers' collection URLs (`service.clusters.resources`), discovery
(`service.clusters.discovery`), the reactor's status, the simulated API server and the
graph's `ClusterStatus.optionalKinds` all read it. `SERVED` is what the simulated API server
serves: `MIRRORED` plus Namespace (kubectl and the simulator's garbage collector need
namespaces; the mirror does not watch them).

Adding a kind is one entry here, plus its record, its wire Struct and converter, what the
index links of it, and tests.

Promises: pure data and pure functions, no I/O; the only table of kinds in the package.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from dra_mirror.service.model import (
    api,
    api_core,
    api_pool_requests,
    api_scheduling,
    pool_requests,
    taint_rules,
)
from dra_mirror.service.model.claims import claim_record, template_record
from dra_mirror.service.model.kind_names import (
    CORE_GROUP,
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    DRA_GROUP,
    NAMESPACE,
    NODE,
    POD,
    POD_GROUP,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_POOL_STATUS_REQUEST,
    RESOURCE_SLICE,
    SCHEDULING_GROUP,
)
from dra_mirror.service.model.pod_groups import pod_group_record
from dra_mirror.service.model.records import (
    ClaimRecord,
    DeviceClassRecord,
    Meta,
    NodeRecord,
    PodGroupRecord,
    PodRecord,
    PoolStatusRequestRecord,
    Record,
    SliceRecord,
    TaintRuleRecord,
    TemplateRecord,
)
from dra_mirror.service.model.sharing import SharedValues
from dra_mirror.service.model.slices import device_class_record, slice_record
from dra_mirror.service.model.workloads import node_record, pod_record

__all__ = [
    "ALL_DRA_VERSIONS",
    "BY_KIND",
    "BY_PLURAL",
    "CORE_DRA",
    "CORE_GROUP",
    "DEVICE_CLASS",
    "DEVICE_TAINT_RULE",
    "DRA_GROUP",
    "DRA_VERSIONS",
    "KINDS",
    "MIRRORED",
    "NAMESPACE",
    "NODE",
    "OPTIONAL",
    "POD",
    "POD_GROUP",
    "REGISTERED",
    "REGISTRY",
    "RESOURCE_CLAIM",
    "RESOURCE_CLAIM_TEMPLATE",
    "RESOURCE_POOL_STATUS_REQUEST",
    "RESOURCE_SLICE",
    "SCHEDULING_GROUP",
    "SERVED",
    "IndexHook",
    "Kind",
    "Resource",
    "newest_first",
]

# resource.k8s.io versions in order of preference: v1 (GA in 1.34), then the betas.
DRA_VERSIONS: tuple[str, ...] = ("v1", "v1beta2", "v1beta1")
READ_ONLY: tuple[str, ...] = ("get", "list", "watch")

# What the index derives when an object of a kind changes (`service.model.index`):
# "devices" — a slice: its pool's valid generation and devices;
# "claims" — a claim: holds, reservations, waits, idleness;
# "pods" — a pod: its links (node, PodGroup, claims it names) and the idleness of its claims;
# "taints" — a DeviceTaintRule, or a DeviceClass rules may name: the devices' rule taints;
# "groups" — a PodGroup: the claims it names;
# "none" — kept and served as it is.
IndexHook = Literal["devices", "claims", "pods", "taints", "groups", "none"]
Converter = Callable[[Any, Meta, SharedValues], Record]


class Resource(NamedTuple):
    """One API resource: a kind and how the API server serves it."""

    plural: str
    kind: str
    group: str  # "" for the core group
    namespaced: bool
    short_names: tuple[str, ...]
    has_status: bool
    # The versions it is read at, newest first, each with the Kubernetes minor first serving it.
    introduced: tuple[tuple[str, int], ...] = (("v1", 0),)
    optional: bool = False  # served at versions of its own, watched where served
    removed: tuple[tuple[str, int], ...] = ()  # versions no longer served from that minor on

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(version for version, _ in self.introduced)

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

    def versions_at(self, minor: int) -> tuple[str, ...]:
        """The versions of it a Kubernetes 1.<minor> API server has, newest first (alpha and
        beta versions serve only where switched on)."""
        gone = dict(self.removed)
        return tuple(
            version
            for version, since in self.introduced
            if since <= minor < gone.get(version, minor + 1)
        )


@dataclass(frozen=True)
class Kind:
    """One mirrored kind: how it is served, read, indexed and granted."""

    resource: Resource
    record: type[Record]
    wire: type
    convert: Converter
    index: IndexHook
    verbs: tuple[str, ...] = READ_ONLY  # what the mirror's ClusterRole grants on it

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def optional(self) -> bool:
        return self.resource.optional

    @property
    def namespaced(self) -> bool:
        return self.resource.namespaced


# resource.k8s.io v1 from 1.34, v1beta2 from 1.33, v1beta1 from 1.32 (prerelease-lifecycle).
_DRA = (("v1", 34), ("v1beta2", 33), ("v1beta1", 32))

REGISTRY: tuple[Kind, ...] = (
    Kind(
        Resource("deviceclasses", DEVICE_CLASS, DRA_GROUP, False, (), False, _DRA),
        DeviceClassRecord, api.DeviceClass, device_class_record, "taints",
    ),
    Kind(
        Resource("resourceslices", RESOURCE_SLICE, DRA_GROUP, False, (), False, _DRA),
        SliceRecord, api.ResourceSlice, slice_record, "devices",
    ),
    Kind(
        Resource("resourceclaims", RESOURCE_CLAIM, DRA_GROUP, True, (), True, _DRA),
        ClaimRecord, api.ResourceClaim, claim_record, "claims",
    ),
    Kind(
        Resource("resourceclaimtemplates", RESOURCE_CLAIM_TEMPLATE, DRA_GROUP, True, (), False,
                 _DRA),
        TemplateRecord, api.ResourceClaimTemplate, template_record, "none",
    ),
    Kind(
        Resource("devicetaintrules", DEVICE_TAINT_RULE, DRA_GROUP, False, (), True,
                 (("v1", 37), ("v1beta2", 36), ("v1alpha3", 33)), optional=True),
        TaintRuleRecord, taint_rules.DeviceTaintRule, taint_rules.taint_rule_record, "taints",
    ),
    Kind(
        Resource("pods", POD, CORE_GROUP, True, ("po",), True),
        PodRecord, api_core.Pod, pod_record, "pods",
    ),
    Kind(
        Resource("nodes", NODE, CORE_GROUP, False, ("no",), True),
        NodeRecord, api_core.Node, node_record, "none",
    ),
    Kind(
        Resource("podgroups", POD_GROUP, SCHEDULING_GROUP, True, (), True,
                 (("v1beta1", 37), ("v1alpha3", 37), ("v1alpha2", 36)), optional=True,
                 removed=(("v1alpha2", 37),)),
        PodGroupRecord, api_scheduling.PodGroup, pod_group_record, "groups",
    ),
    # KEP-5677: v1alpha3 from 1.36 (DRAResourcePoolStatus, alpha, off by default); the
    # controller answers each request once. Kept and served beside the mirror's own pool status.
    Kind(
        Resource("resourcepoolstatusrequests", RESOURCE_POOL_STATUS_REQUEST, DRA_GROUP, False,
                 (), True, (("v1alpha3", 36),), optional=True),
        PoolStatusRequestRecord, api_pool_requests.ResourcePoolStatusRequest,
        pool_requests.pool_status_request_record, "none",
    ),
)  # fmt: skip

MIRRORED: tuple[Resource, ...] = tuple(k.resource for k in REGISTRY)
SERVED: tuple[Resource, ...] = (
    *MIRRORED,
    Resource("namespaces", NAMESPACE, CORE_GROUP, False, ("ns",), True),
)
# The mirrored kinds, in the order the reactor lists them.
KINDS: tuple[str, ...] = tuple(k.kind for k in REGISTRY)
BY_KIND: dict[str, Resource] = {r.kind: r for r in SERVED}
BY_PLURAL: dict[str, Resource] = {r.plural: r for r in SERVED}
REGISTERED: dict[str, Kind] = {k.kind: k for k in REGISTRY}
# Kinds a cluster may not serve at all while it serves DRA: watched where served.
OPTIONAL: frozenset[str] = frozenset(k.kind for k in REGISTRY if k.optional)
# The DRA kinds whose one version is discovered together (`DRA_VERSIONS`).
CORE_DRA: tuple[Resource, ...] = tuple(r for r in MIRRORED if r.is_dra and not r.optional)


def _priority(version: str) -> tuple[int, int, int]:
    """How kube-apiserver orders versions (GA, then beta, then alpha; higher numbers first)."""
    found = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if found is None:
        return (-1, 0, 0)
    major, level, minor = found.groups()
    return ({"alpha": 0, "beta": 1, None: 2}[level], int(major), int(minor or 0))


def newest_first(versions: Iterable[str]) -> list[str]:
    """`versions`, each once, in kube-apiserver's order of preference."""
    return sorted(set(versions), key=_priority, reverse=True)


# Every resource.k8s.io version some mirrored kind is served at, newest first.
ALL_DRA_VERSIONS: tuple[str, ...] = tuple(
    newest_first(v for r in MIRRORED if r.is_dra for v in r.versions)
)
