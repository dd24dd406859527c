"""The orders a ClusterIndex keeps (service.model.ordering): after any sequence of batches
they are exactly the sorted keys of what the index holds, a view keeps what it showed once
the index moves on, and a namespace or driver range is the slice of the sorted keys."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dra_mirror.service.model.index import DELETED, MODIFIED, ClusterIndex, Event
from dra_mirror.service.model.ordering import Chained, KeyOrder
from dra_mirror.service.model.records import RESOURCE_CLAIM, RESOURCE_SLICE, key_of
from tests.model.builders import claim, device, slice_

NAMESPACES = ("a", "b", "b-x", "c")
NAMES = tuple(f"c{i}" for i in range(6))

claims = st.builds(
    lambda namespace, name, deleted, pool: (
        claim(name, namespace=namespace, devices=((pool, "d0"),) if pool else ()),
        deleted,
    ),
    st.sampled_from(NAMESPACES),
    st.sampled_from(NAMES),
    st.booleans(),
    st.sampled_from((None, "n0", "n1")),
)
slices = st.builds(
    lambda pool, devices, deleted: (
        slice_(f"s-{pool}", pool=pool, devices=tuple(device(d) for d in devices)),
        deleted,
    ),
    st.sampled_from(("n0", "n1", "n2")),
    st.lists(st.sampled_from(("d0", "d1", "d2")), unique=True, max_size=3),
    st.booleans(),
)


def _events(batch):
    return [Event(DELETED if deleted else MODIFIED, record) for record, deleted in batch]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(claims, slices), max_size=6), max_size=8), st.data())
def test_kept_orders_are_the_sorted_keys_after_any_batches(batches, data) -> None:
    index = ClusterIndex("east")
    for number, batch in enumerate(batches):
        before = list(index.order.records_in_order(RESOURCE_CLAIM))
        held = index.order.records_in_order(RESOURCE_CLAIM)  # a reader across the batch
        devices_held = index.order.devices_in_order(published=False)
        devices_before = list(devices_held)
        index.apply(_events(batch), at=f"2026-01-01T00:00:{number:02}Z")
        assert list(held) == before and len(held) == len(before)
        assert list(devices_held) == devices_before
        if data.draw(st.booleans()):  # read now, or only after the next batch
            continue
        for kind in (RESOURCE_CLAIM, RESOURCE_SLICE):
            assert list(index.order.records(kind)) == sorted(key_of(r) for r in index.records(kind))
        assert list(index.order.devices()) == sorted(e.key for e in index.devices())
        assert list(index.order.devices(published=False)) == sorted(
            e.key for e in index.unpublished_devices()
        )
        for namespace in NAMESPACES:
            wanted = sorted(
                (r for r in index.records(RESOURCE_CLAIM) if r.meta.namespace == namespace),
                key=key_of,
            )
            view = index.order.records_in_order(RESOURCE_CLAIM, namespace=namespace)
            assert list(view) == wanted and len(view) == len(wanted)
            assert view[1:3] == wanted[1:3] and (not wanted or view[-1] == wanted[-1])


def test_chained_views_read_like_one_list() -> None:
    parts = [[1, 2], [], [3], [4, 5, 6]]
    chained = Chained(parts)
    whole = [1, 2, 3, 4, 5, 6]
    assert len(chained) == 6 and list(chained) == whole and chained == whole
    for start in range(-7, 8):
        for stop in range(-7, 8):
            assert chained[start:stop] == whole[start:stop]
    assert [chained[i] for i in range(-6, 6)] == [whole[i] for i in range(-6, 6)]
    assert chained[::2] == [1, 3, 5]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 199)), max_size=40), st.integers(0, 3))
def test_a_key_order_follows_few_changes_one_by_one(changes, reads) -> None:
    """Few touched keys against a large map take the incremental path (add / remove), many
    take a fresh sort: both end as the sorted keys."""
    source = {i: None for i in range(0, 200, 2)}
    order = KeyOrder(source)
    assert list(order.keys()) == sorted(source)
    for step, (add, key) in enumerate(changes):
        if add:
            source[key] = None
        else:
            source.pop(key, None)
        order.touch(key)
        if reads and step % reads == 0:
            assert list(order.keys()) == sorted(source)
    assert list(order.keys()) == sorted(source)
