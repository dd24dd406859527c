"""The seams between the reactor, the stores and the schema.

A state store holds the current records of every cluster and the indexes that walk the graph
both ways. Writers (the reactor) call `apply` with one `Changes` per batch; readers (the
GraphQL schema, the CLI, Slack) use only the batched read methods below, so that a per-request
DataLoader can answer each relation with one store call. The in-memory store (embedded default)
and the Redis store implement the same Protocol and pass the same contract tests
(`tests/stores/test_contract.py`).

Errors: every store raises `StoreUnavailable` (and only that) when its backend cannot be
reached; callers turn it into a clear API error or a retry.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from msgspec import Struct, field

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.records import (  # noqa: F401  (re-exported for readers)
    AllocationRef,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    Record,
)


class StoreError(Exception):
    """Base of the store errors."""


class StoreUnavailable(StoreError):
    """The backend (Redis, SQL) cannot be reached now; nothing was lost, try again later."""


class ClusterStatus(Struct):
    name: str
    connected: bool = False
    synced: bool = False
    api_version: str | None = None  # resource.k8s.io version in use (v1, v1beta2, v1beta1)
    last_event_at: str | None = None
    last_sync_at: str | None = None
    error: str | None = None
    events: int = 0
    relists: int = 0
    malformed: dict[str, int] = field(default_factory=dict)  # kind -> objects skipped
    stalls: dict[str, int] = field(default_factory=dict)  # kind -> watch streams ended silent


class Relation(enum.Enum):
    """Indexed relations; the key type each takes is given after the arrow."""

    DEVICE_ALLOCATIONS = "device_allocations"  # DeviceKey -> [AllocationRef]
    CLAIM_REFERRERS = "claim_referrers"  # claim ObjectKey -> [pod ObjectKey] (pod.spec claims)
    TEMPLATE_CLAIMS = "template_claims"  # template ObjectKey -> [claim ObjectKey]
    CLASS_CLAIMS = "class_claims"  # (cluster, class name) -> [claim ObjectKey]
    NODE_SLICES = "node_slices"  # (cluster, node name) -> [slice ObjectKey]
    NODE_DEVICES = "node_devices"  # (cluster, node name) -> [DeviceKey]
    NODE_PODS = "node_pods"  # (cluster, node name) -> [pod ObjectKey]
    SLICE_DEVICES = "slice_devices"  # slice ObjectKey -> [DeviceKey]
    POOL_DEVICES = "pool_devices"  # (cluster, driver, pool) -> [DeviceKey]
    UUID_DEVICES = "uuid_devices"  # uuid -> [DeviceKey] (across clusters)
    NAME_DEVICES = "name_devices"  # device name -> [DeviceKey] (across clusters)


@runtime_checkable
class StateReader(Protocol):
    async def clusters(self) -> list[ClusterStatus]: ...

    async def get(self, keys: Sequence[ObjectKey]) -> list[Record | None]: ...

    async def list(
        self, kind: str, *, cluster: str | None = None, namespace: str | None = None
    ) -> list[Record]: ...

    async def devices(self, keys: Sequence[DeviceKey]) -> list[DeviceEntry | None]: ...

    async def list_devices(
        self, *, cluster: str | None = None, driver: str | None = None
    ) -> list[DeviceEntry]: ...

    async def lookup(self, relation: Relation, keys: Sequence[Any]) -> list[list[Any]]: ...

    async def idle_since(self, claims: Sequence[ObjectKey]) -> list[str | None]: ...


@runtime_checkable
class StateWriter(Protocol):
    async def apply(self, changes: Changes) -> None:
        """Apply one batch atomically: a reader never sees records and indexes disagree."""
        ...

    async def set_status(self, status: ClusterStatus) -> None: ...


class StateStore(StateReader, StateWriter, Protocol):
    async def close(self) -> None: ...


class ChangeSink(Protocol):
    """Anything the reactor hands each batch to (state store, history outbox, live bus)."""

    async def __call__(self, changes: Changes) -> None: ...
