"""Resource pools: which devices of a pool count, where they live, and whether the pool is whole.

Rules (resource.k8s.io ResourceSlice: `spec.pool` with its `generation` and
`resourceSliceCount`):

* a pool is all slices with the same (driver, pool name); only slices of the HIGHEST
  `pool.generation` are valid — older ones are being replaced by the driver and are ignored for
  inventory (history keeps them);
* the pool is complete when exactly `resourceSliceCount` slices of that generation are
  present and agree on that count;
* a device is `(cluster, driver, pool, device)`; if two valid slices of a pool publish the same
  device name (invalid, but a driver bug must not crash the mirror) the slice with the smallest
  name wins, so every observer picks the same one;
* a device lives on the slice's `nodeName`, or its own `nodeName` when the slice uses
  `perDeviceNodeSelection`; devices on `allNodes`/`nodeSelector` slices have no single node;
* shared counter sets (MIG: a GPU's memory slices and engines) are a pool resource: since 1.35
  they may be published in their own slice of the pool, so they are collected from every
  valid slice.

`valid_pool` is pure (`valid_generation` picks the slices that count); the index calls it for the pool of each slice event (O(pool size)).
`valid_devices` applies it to every pool of a set of slices at once, for a consumer that
rebuilds its view whole (the simulator's scheduler), so both see the same devices.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from dra_mirror.service.model.records import CounterSet, DeviceEntry, DeviceKey, SliceRecord, key_of


class PoolKey(NamedTuple):
    driver: str
    pool: str


class ValidPool(NamedTuple):
    generation: int
    complete: bool
    devices: dict[DeviceKey, DeviceEntry]
    counter_sets: tuple[CounterSet, ...]
    slice_count: int  # slices of the valid generation present
    expected_slices: int  # resourceSliceCount they announce


EMPTY_POOL = ValidPool(0, False, {}, (), 0, 0)


def pool_key(slice_: SliceRecord) -> PoolKey:
    return PoolKey(slice_.driver, slice_.pool.name)


def device_node(slice_: SliceRecord, device_node_name: str | None) -> str | None:
    if slice_.per_device_node_selection:
        return device_node_name
    return slice_.node_name


def valid_generation(slices: Iterable[SliceRecord]) -> tuple[int, list[SliceRecord]]:
    """A pool's highest generation and its slices of that generation, by name ((0, []) for
    no slice)."""
    slices = list(slices)
    if not slices:
        return 0, []
    generation = max(s.pool.generation for s in slices)
    return generation, sorted(
        (s for s in slices if s.pool.generation == generation), key=lambda s: s.meta.name
    )


def valid_pool(cluster: str, slices: Iterable[SliceRecord]) -> ValidPool:
    """The devices and counters of a pool's valid generation, from all its slices."""
    generation, valid = valid_generation(slices)
    if not valid:
        return EMPTY_POOL
    # Complete when exactly `resourceSliceCount` slices of the valid generation are present
    # and they agree on that count (what kube-scheduler requires before it allocates from a
    # pool); a driver still publishing, or one whose slices disagree, leaves it incomplete.
    counts = {s.pool.resource_slice_count for s in valid}
    expected = max(counts)
    complete = len(counts) == 1 and len(valid) == expected
    devices: dict[DeviceKey, DeviceEntry] = {}
    counter_sets: list[CounterSet] = []
    for slice_ in valid:
        counter_sets.extend(slice_.shared_counters)
        slice_key = key_of(slice_)
        for device in slice_.devices:
            key = DeviceKey(cluster, slice_.driver, slice_.pool.name, device.name)
            if key in devices:
                continue
            devices[key] = DeviceEntry(
                key=key,
                device=device,
                slice=slice_key,
                node=device_node(slice_, device.node_name),
                pool_generation=generation,
                pool_complete=complete,
            )
    return ValidPool(generation, complete, devices, tuple(counter_sets), len(valid), expected)


def valid_devices(cluster: str, slices: Iterable[SliceRecord]) -> list[DeviceEntry]:
    """The devices of the valid generation of every pool among `slices` (all of one cluster),
    as `valid_pool` finds them: pools in order of first appearance, a pool's devices by slice
    name, then in the slice's order."""
    pools: dict[PoolKey, list[SliceRecord]] = {}
    for slice_ in slices:
        pools.setdefault(pool_key(slice_), []).append(slice_)
    return [
        entry for group in pools.values() for entry in valid_pool(cluster, group).devices.values()
    ]
