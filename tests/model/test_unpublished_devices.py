"""A device held and published by no slice keeps its links when slices come and go in a batch.

* A batch in which a slice publishes a held, unpublished device and a newer generation of its
  pool withdraws it again leaves the unpublished entry as it was, and its links (name, node,
  uuid) too: whoHolds by device name still finds it.
* The uuid such a device keeps is the one it had when last published by a settled batch: a
  slice that published it only within a batch (a seed folding a pool's slices one by one) gives
  it none.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.index import ClusterIndex
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    DeviceKey,
    Record,
    key_of,
)
from dra_mirror.service.model.relations import Relation
from tests.model.builders import CLUSTER, DRIVER, claim, device, slice_
from tests.model.test_index_property import fresh, state

D0 = DeviceKey(CLUSTER, DRIVER, "n0", "d0")


def _world(*records: Record) -> dict[Any, Record]:
    return {key_of(r): r for r in records}


def test_a_held_device_published_and_withdrawn_within_a_batch_keeps_its_name_link() -> None:
    holder = claim("c0", devices=(("n0", "d0"),))
    older = slice_("n0-a", pool="n0", devices=(device("d0"),))
    newer = slice_("n0-b", pool="n0", generation=1)  # takes the pool over, without d0
    index = ClusterIndex(CLUSTER)
    index.resync(RESOURCE_CLAIM, [holder], at="t0")  # claims listed before slices
    assert index.lookup(Relation.NAME_DEVICES, "d0") == [D0]
    index.resync(RESOURCE_SLICE, [older, newer], at="t1")  # d0 published, then withdrawn
    entry = index.device(D0)
    assert entry is not None and not entry.published
    assert index.lookup(Relation.NAME_DEVICES, "d0") == [D0]
    assert state(index) == state(fresh(_world(holder, older, newer)))


def test_a_seed_gives_a_held_device_no_uuid_a_slice_published_only_in_passing() -> None:
    holder = claim("c0", devices=(("n0", "d0"),))
    older = slice_("n0-a", pool="n0", devices=(device("d0", uuid="U1"),))
    newer = slice_("n0-b", pool="n0", generation=1)
    world = _world(older, newer, holder)
    earlier = fresh(world)  # what an earlier writer left: d0 held, unpublished, no uuid known
    index = ClusterIndex(CLUSTER)
    index.seed(ch.Seed(list(world.values()), {}, frozenset()), at="t")
    entry = index.device(D0)
    assert entry is not None and not entry.published
    assert entry.device.uuid is None
    assert index.lookup(Relation.UUID_DEVICES, "U1") == []
    assert dict(index.links.mapping(Relation.UUID_DEVICES)) == dict(
        earlier.links.mapping(Relation.UUID_DEVICES)
    )
