"""The resources the simulated API server serves, as kube-apiserver describes them.

`RESOURCES` is keyed by plural name. Kinds, scopes, short names and status subresources
match what a 1.34/1.35 kube-apiserver publishes in discovery: the four DRA kinds have no
short names; only ResourceClaim has a `status` subresource among them (ResourceSlice and
DeviceClass are written whole by drivers and admins).
"""

from __future__ import annotations

from typing import NamedTuple

DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")  # preference order, newest first


class Resource(NamedTuple):
    """One served resource."""

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


RESOURCES: dict[str, Resource] = {
    r.plural: r
    for r in (
        Resource("deviceclasses", "DeviceClass", DRA_GROUP, False, (), False),
        Resource("resourceslices", "ResourceSlice", DRA_GROUP, False, (), False),
        Resource("resourceclaims", "ResourceClaim", DRA_GROUP, True, (), True),
        Resource("resourceclaimtemplates", "ResourceClaimTemplate", DRA_GROUP, True, (), False),
        Resource("pods", "Pod", "", True, ("po",), True),
        Resource("nodes", "Node", "", False, ("no",), True),
        Resource("namespaces", "Namespace", "", False, ("ns",), True),
    )
}


def resource(plural: str) -> Resource:
    """The served resource named `plural`; KeyError for anything else."""
    return RESOURCES[plural]
