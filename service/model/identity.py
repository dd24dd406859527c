"""Identity of what the mirror holds: an object's key, a device's key, and the parts of
ObjectMeta every record carries.

They promise: an object is `(cluster, kind, namespace, name)`, `namespace` "" for
cluster-scoped kinds; a device is `(cluster, driver, pool, device)`, never its slice's name
(slices come and go), and not its hardware either: drivers renumber `gpu-N`, so the history of
a physical device follows its `uuid` attribute where the driver publishes one. `Meta` keeps
only the ObjectMeta the mirror serves and records. `service.model.records` re-exports all four.
"""

from __future__ import annotations

from typing import NamedTuple

from msgspec import Struct, field


class ObjectKey(NamedTuple):
    """Identity of a mirrored object; `namespace` is "" for cluster-scoped kinds."""

    cluster: str
    kind: str
    namespace: str
    name: str

    def ref(self) -> str:
        """`cluster/Kind/namespace/name`, for logs and errors."""
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.cluster}/{self.kind}/{ns}{self.name}"


class DeviceKey(NamedTuple):
    """Identity of a device: unique per cluster, never the slice name (slices come and go)."""

    cluster: str
    driver: str
    pool: str
    device: str

    def ref(self) -> str:
        return f"{self.cluster}/{self.driver}/{self.pool}/{self.device}"


class OwnerRef(Struct, frozen=True, gc=False):
    kind: str
    name: str
    uid: str
    controller: bool = False
    api_version: str = ""


class Meta(Struct, frozen=True, gc=False):
    """The parts of ObjectMeta the mirror serves and records."""

    cluster: str
    name: str
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    created_at: str | None = None  # RFC 3339, as the API server wrote it
    deleted_at: str | None = None  # deletionTimestamp: deletion requested, finalizers pending
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    owners: tuple[OwnerRef, ...] = ()
    finalizers: tuple[str, ...] = ()
    generate_name: str = ""

    def controller(self) -> OwnerRef | None:
        for owner in self.owners:
            if owner.controller:
                return owner
        return None
