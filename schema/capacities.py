"""GraphQL types of a device's capacities (`Device.capacity`, `remainingCapacity`, claims'
consumed capacity): the quantity as written, parsed where it parses, and a shared device's
request policy.
"""

from __future__ import annotations

from collections.abc import Mapping

import strawberry

from dra_mirror.service.model.quantity import parse_quantity
from dra_mirror.service.model.records import Capacity as CapacityRecord
from dra_mirror.service.model.records import Device as DeviceRecord


def _number(quantity: str | None) -> float | None:
    if quantity is None:
        return None
    try:
        return float(parse_quantity(quantity))
    except ValueError:
        return None


@strawberry.type
class CapacityRange:
    min: str | None
    max: str | None
    step: str | None


@strawberry.type(description="How a shared device rounds the capacity a request asks for.")
class CapacityRequestPolicy:
    default: str | None
    valid_values: list[str] | None
    valid_range: CapacityRange | None


@strawberry.type(description="A capacity of a device, as the Kubernetes quantity string.")
class Capacity:
    name: str = strawberry.field(
        description="As the slice writes it (`memory`, or `example.com/bandwidth`)."
    )
    qualified_name: str = strawberry.field(
        description="With its domain: a name written without one is in the driver's domain."
    )
    value: str
    number: float | None = strawberry.field(description="The quantity parsed (bytes, units).")
    request_policy: CapacityRequestPolicy | None = None


def _policy(raw: dict | None) -> CapacityRequestPolicy | None:
    if not raw:
        return None
    valid_range = raw.get("validRange")
    return CapacityRequestPolicy(
        default=raw.get("default"),
        valid_values=list(raw["validValues"]) if raw.get("validValues") else None,
        valid_range=CapacityRange(
            min=valid_range.get("min"), max=valid_range.get("max"), step=valid_range.get("step")
        )
        if valid_range
        else None,
    )


def capacity_list(
    capacity: Mapping[str, CapacityRecord | str], device: DeviceRecord | None = None
) -> list[Capacity]:
    """Capacities (keyed by qualified name) sorted by name as written; accepts records (with
    policy) or plain quantity strings. `device` says how its slice spells each name."""
    items: list[Capacity] = []
    for qualified in capacity:
        value = capacity[qualified]
        name = device.written(qualified) if device is not None else qualified
        text = value if isinstance(value, str) else value.value
        policy = None if isinstance(value, str) else _policy(value.request_policy)
        items.append(
            Capacity(
                name=name,
                qualified_name=qualified,
                value=text,
                number=_number(text),
                request_policy=policy,
            )
        )
    return sorted(items, key=lambda c: c.name)
