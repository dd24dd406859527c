"""Scalars and enums of the graph: `DateTime`, `JSON`, `ClaimState`, `ClaimOrigin`, `DeviceStatus`.

`DateTime` is an RFC 3339 string in UTC (`2026-01-02T03:04:05Z`), passed through as the API
server wrote it (it always writes UTC with `Z`); `JSON` is any JSON value (attribute maps,
raw config). Enum values map one-to-one onto the model's derived-state strings
(`service.model.records`: "pending", "template", "free"…), so `ClaimState(record.state)` works.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NewType

import strawberry
from graphql import GraphQLError
from strawberry.scalars import JSON
from strawberry.types.scalar import ScalarDefinition

from dra_mirror.service.model import records

__all__ = [
    "JSON",
    "SCALAR_MAP",
    "ClaimOrigin",
    "ClaimState",
    "DateTime",
    "DeviceStatus",
    "to_datetime",
]


def _parse_datetime(value: object) -> str:
    if not isinstance(value, str) or "T" not in value:
        # a client error with a code; at most 40 characters of what was sent are repeated
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:40] + "…"
        raise GraphQLError(
            f"DateTime must be an RFC 3339 string, got {shown}", extensions={"code": "BAD_INPUT"}
        )
    return value


DateTime = NewType("DateTime", str)

# Passed to the schema as `StrawberryConfig(scalar_map=SCALAR_MAP)`.
SCALAR_MAP: Mapping[object, ScalarDefinition] = {
    DateTime: strawberry.scalar(
        name="DateTime",
        description="An instant as RFC 3339 in UTC, e.g. 2026-01-02T03:04:05Z.",
        serialize=str,
        parse_value=_parse_datetime,
    )
}


def to_datetime(value: str | None) -> DateTime | None:
    """Record timestamps are already RFC 3339; empty strings mean unknown."""
    return DateTime(value) if value else None


@strawberry.enum(description="A claim's state, as kubectl's STATE column reads it.")
class ClaimState(enum.Enum):
    PENDING = records.PENDING
    ALLOCATED = records.ALLOCATED
    RESERVED = records.RESERVED
    DELETING = records.DELETING


@strawberry.enum(description="Who made a claim.")
class ClaimOrigin(enum.Enum):
    TEMPLATE = records.TEMPLATE
    EXTENDED_RESOURCE = records.EXTENDED_RESOURCE
    MANUAL = records.MANUAL


@strawberry.enum(description="BLOCKED: free itself, but sibling partitions use its counters.")
class DeviceStatus(enum.Enum):
    FREE = records.FREE
    HELD = records.HELD
    SHARED = records.SHARED
    BLOCKED = records.BLOCKED
