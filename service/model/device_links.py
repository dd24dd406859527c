"""The device reverse maps one device entry links: by slice, pool, name, node and uuid.

* a published entry (`DeviceEntry.published`) is linked from its slice, its pool, its name, its
  node (none for a network-attached device) and its uuid (when the driver publishes one);
* an unpublished entry (held, published by no slice: service.model.devices_index) has neither
  slice nor pool: it is linked by name, node and uuid only.

`link_device` adds a published entry's links, written out rather than iterated: it runs for
every device of a sync. The reverse maps are sets (service.model.links), so a link two entries
share stays until both are unlinked (`device_links` lets a caller keep those).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from dra_mirror.service.model.links import Links
from dra_mirror.service.model.records import DeviceEntry
from dra_mirror.service.model.relations import (
    NAME_DEVICES,
    NODE_DEVICES,
    POOL_DEVICES,
    SLICE_DEVICES,
    UUID_DEVICES,
    Relation,
)


def linked_by(entry: DeviceEntry) -> tuple[object, ...]:
    """What the device reverse maps are keyed by: relink only when one of these moved."""
    return (entry.slice, entry.node, entry.device.uuid)


def unpublished_links(entry: DeviceEntry) -> Iterator[tuple[Relation, Hashable]]:
    key = entry.key
    yield NAME_DEVICES, key.device
    if entry.node:
        yield NODE_DEVICES, (key.cluster, entry.node)
    if entry.device.uuid:
        yield UUID_DEVICES, entry.device.uuid


def device_links(entry: DeviceEntry) -> Iterator[tuple[Relation, Hashable]]:
    key = entry.key
    assert entry.slice is not None
    yield SLICE_DEVICES, entry.slice
    yield POOL_DEVICES, (key.cluster, key.driver, key.pool)
    yield NAME_DEVICES, key.device
    if entry.node:
        yield NODE_DEVICES, (key.cluster, entry.node)
    if entry.device.uuid:
        yield UUID_DEVICES, entry.device.uuid


def link_device(links: Links, entry: DeviceEntry) -> None:
    """Add every link of `device_links(entry)`."""
    add, key = links.add, entry.key
    assert entry.slice is not None
    add(SLICE_DEVICES, entry.slice, key)
    add(POOL_DEVICES, (key.cluster, key.driver, key.pool), key)
    add(NAME_DEVICES, key.device, key)
    if entry.node:
        add(NODE_DEVICES, (key.cluster, entry.node), key)
    if entry.device.uuid:
        add(UUID_DEVICES, entry.device.uuid, key)
