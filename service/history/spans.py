"""What the history reads return: plain dataclasses, times in microseconds since the epoch.

`service.history.queries` builds them; `schema.history` and the CSV export turn them into
GraphQL objects and rows. `end_us` None means the interval is still open.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeviceIdentity:
    cluster: str
    driver: str
    pool: str
    device: str
    uuid: str | None


@dataclass
class PodSpan:
    name: str
    uid: str
    start_us: int
    end_us: int | None


@dataclass
class AllocationSpan:
    cluster: str
    driver: str
    pool: str
    device: str
    uuid: str | None
    node: str | None
    namespace: str
    claim: str
    claim_uid: str
    request: str
    share_id: str | None
    consumed_capacity: dict[str, str]
    class_name: str
    start_us: int
    end_us: int | None
    end_reason: str | None
    pods: list[PodSpan] = field(default_factory=list)


@dataclass
class InventorySpan:
    cluster: str
    driver: str
    pool: str
    device: str
    uuid: str | None
    node: str | None
    data: dict[str, Any]
    start_us: int
    end_us: int | None
    end_reason: str | None


@dataclass
class DeviceTimeline:
    """One physical device (a uuid), or one device key when the driver publishes no uuid."""

    uuid: str | None
    identities: list[DeviceIdentity]
    inventory: list[InventorySpan]
    allocations: list[AllocationSpan]


@dataclass
class Span:
    start_us: int
    end_us: int | None
    end_reason: str | None = None
    detail: str = ""  # waits: class names; consumers: pod name


@dataclass
class ClaimVersion:
    uid: str
    resource_version: str
    observed_us: int
    deleted: bool
    body: str  # the record as msgspec JSON


@dataclass
class ClaimIncarnation:
    cluster: str
    namespace: str
    name: str
    uid: str
    versions: list[ClaimVersion]
    waits: list[Span]
    allocations: list[AllocationSpan]
    consumers: list[PodSpan]
    idle: list[Span]


@dataclass
class IdleHolder:
    cluster: str
    namespace: str
    claim: str
    claim_uid: str
    device_hours_idle: float
    device_hours_held: float
    devices: int


@dataclass
class GapSpan:
    cluster: str
    start_us: int
    end_us: int
