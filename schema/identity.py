"""The identity fields every object type wrapping one Kubernetes object's record shares.

A type inherits one of these bases and redeclares `record` with its own record type:

    ClusterScopedFields    cluster, name              (DeviceClass, ResourceSlice, Node)
    NamespacedFields       cluster, namespace, name   (ResourceClaimTemplate)
    NamespacedUidFields    cluster, namespace, name, uid   (ResourceClaim, Pod)

The fields come first in the inheriting type, in the order above, and read the record's
`meta` as-is (the cluster is the mirror's name for it; uid is metadata.uid, empty when the
API server did not send one). The bases are never returned by a resolver, so they never
appear in the SDL themselves: only their fields do, on the types that inherit them.
"""

from __future__ import annotations

from typing import Protocol

import strawberry

from dra_mirror.service.model.records import Meta


class ObjectRecord(Protocol):
    """Any record of a Kubernetes object (`service.model.records.Record`): it has `meta`."""

    @property
    def meta(self) -> Meta: ...


@strawberry.type
class ClusterScopedFields:
    record: strawberry.Private[ObjectRecord]

    @strawberry.field
    def cluster(self) -> str:
        return self.record.meta.cluster

    @strawberry.field
    def name(self) -> str:
        return self.record.meta.name


@strawberry.type
class NamespacedFields:
    record: strawberry.Private[ObjectRecord]

    @strawberry.field
    def cluster(self) -> str:
        return self.record.meta.cluster

    @strawberry.field
    def namespace(self) -> str:
        return self.record.meta.namespace

    @strawberry.field
    def name(self) -> str:
        return self.record.meta.name


@strawberry.type
class NamespacedUidFields(NamespacedFields):
    @strawberry.field
    def uid(self) -> str:
        return self.record.meta.uid
