"""The pool rules of `service.model.pools`: which devices of which slices count, and where.

`valid_devices` is what both the mirror's index (pool by pool, through `valid_pool`) and the
simulator's scheduler (all pools at once) see, so these are the rules of both.
"""

from __future__ import annotations

from msgspec.structs import replace

from dra_mirror.service.model.pools import valid_devices, valid_pool
from dra_mirror.service.model.records import DeviceKey, ObjectKey
from tests.model.builders import CLUSTER, DRIVER, device, slice_


def names(entries) -> list[tuple[str, str]]:
    return [(e.key.pool, e.key.device) for e in entries]


def test_only_the_highest_generation_counts_and_completeness_follows_the_count() -> None:
    old = slice_("a-old", pool="p", generation=1, count=1, devices=(device("gone"),))
    first = slice_("a-new", pool="p", generation=2, count=2, devices=(device("d0"),))
    pool = valid_pool(CLUSTER, [old, first])
    assert (pool.generation, pool.complete, pool.slice_count, pool.expected_slices) == (
        2,
        False,
        1,
        2,
    )
    assert [k.device for k in pool.devices] == ["d0"]
    entry = pool.devices[DeviceKey(CLUSTER, DRIVER, "p", "d0")]
    assert (entry.pool_generation, entry.pool_complete) == (2, False)
    assert entry.slice == ObjectKey(CLUSTER, "ResourceSlice", "", "a-new")

    second = slice_("b-new", pool="p", generation=2, count=2, devices=(device("d1"),))
    pool = valid_pool(CLUSTER, [second, old, first])
    assert pool.complete and [k.device for k in pool.devices] == ["d0", "d1"]
    assert all(e.pool_complete for e in pool.devices.values())


def test_a_generation_with_extra_or_disagreeing_slices_is_incomplete() -> None:
    one = slice_("a", pool="p", generation=3, count=1, devices=(device("d0"),))
    extra = slice_("b", pool="p", generation=3, count=1, devices=(device("d1"),))
    assert valid_pool(CLUSTER, [one]).complete
    assert not valid_pool(CLUSTER, [one, extra]).complete  # two slices where one was announced
    says_two = slice_("b", pool="p", generation=3, count=2, devices=(device("d1"),))
    pool = valid_pool(CLUSTER, [one, says_two])  # two present, but they disagree on the count
    assert (pool.complete, pool.slice_count, pool.expected_slices) == (False, 2, 2)


def test_a_device_published_twice_comes_from_the_slice_with_the_smallest_name() -> None:
    later = slice_("z", pool="p", count=2, devices=(device("d0", memory="40Gi"),))
    earlier = slice_("a", pool="p", count=2, devices=(device("d0", memory="80Gi"),))
    for order in ([later, earlier], [earlier, later]):
        [entry] = valid_pool(CLUSTER, order).devices.values()
        assert entry.slice.name == "a"
        assert entry.device.capacity[f"{DRIVER}/memory"].value == "80Gi"


def test_the_node_of_a_device_is_the_slices_or_its_own_with_per_device_selection() -> None:
    on_node = slice_("n", pool="n1", node="n1", devices=(device("gpu-0"),))
    per_device = replace(
        slice_("s", pool="fabric", devices=(replace(device("nic-0"), node_name="n2"),)),
        per_device_node_selection=True,
    )
    network = slice_("w", pool="net", devices=(device("switch-0"),))
    assert [
        (e.key.device, e.node) for e in valid_devices(CLUSTER, [on_node, per_device, network])
    ] == [
        ("gpu-0", "n1"),
        ("nic-0", "n2"),
        ("switch-0", None),
    ]


def test_valid_devices_is_valid_pool_over_every_pool() -> None:
    slices = [
        slice_("b-1", pool="b", generation=1, devices=(device("b0"), device("b1"))),
        slice_("a-0", pool="a", generation=0, devices=(device("a9"),)),
        slice_("b-0", pool="b", generation=0, devices=(device("stale"),)),
        slice_("a-1", pool="a", generation=3, count=2, devices=(device("a0"),)),
    ]
    entries = valid_devices(CLUSTER, slices)
    assert names(entries) == [("b", "b0"), ("b", "b1"), ("a", "a0")]
    by_pool = {
        p: list(valid_pool(CLUSTER, [s for s in slices if s.pool.name == p]).devices.values())
        for p in ("a", "b")
    }
    assert entries == by_pool["b"] + by_pool["a"]
    assert [e.pool_complete for e in entries] == [True, True, False]
    assert valid_devices(CLUSTER, []) == []
