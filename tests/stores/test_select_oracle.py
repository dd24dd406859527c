"""Every list, filter and count answered from the Redis writer's indexes equals the in-memory
store's answer on the same state.

Random event sequences (claims, pods, slices, DeviceClasses with CEL selectors, taint rules,
nodes; upserts, deletes and relists; claims and pods in several namespaces) are folded into a
MemoryStore's index and, through the index the Redis store opens, into Redis. Then random
selections — every filter of `Selection`, one cluster or all, page sizes, cursors taken from
the answer, cursor prefixes and cursors outside the list — must give the same page, total and
page info from both stores; so must `namespaces`. The same holds for a Redis cluster whose
indexes are not whole (its layout marker names another writer: the replica reads it whole).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.records import (
    ALLOCATED,
    BLOCKED,
    DELETING,
    FREE,
    HELD,
    PENDING,
    POD,
    RESERVED,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    SHARED,
    DeviceClassRecord,
    Meta,
    Record,
    key_of,
)
from dra_mirror.service.stores.memory import MemoryStore
from dra_mirror.service.stores.protocols import DEVICES, Page, Selection
from dra_mirror.service.stores.redis import RedisStore
from tests.model.builders import DRIVER, claim, device, pod, slice_
from tests.model.test_index_property import records as index_records

EAST, WEST = "east", "west"
NAMESPACES = ("ns", "ns-a", "team")
AT = "2026-11-01T00:00:00Z"

CLASS_SELECTORS = {
    "all": (),
    "gpu": (f'device.driver == "{DRIVER}"',),
    "big": (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("60Gi")) >= 0',),
    "u0": (f'device.attributes["{DRIVER}"].uuid == "U0"',),  # fails where there is no uuid
    "shareable": ("device.allowMultipleAllocations",),
}


def device_class(name: str, selectors: tuple[str, ...]) -> DeviceClassRecord:
    return DeviceClassRecord(meta=Meta(cluster=EAST, name=name, uid=f"uid-{name}"),
                             selectors=selectors)  # fmt: skip


@st.composite
def moved(draw: st.DrawFn) -> Record:
    """A record of the index's property test, claims and pods spread over namespaces, slices
    with devices of two memory sizes."""
    record = draw(
        st.one_of(
            index_records,
            st.sampled_from([device_class(n, s) for n, s in CLASS_SELECTORS.items()]),
        )
    )
    if key_of(record).kind in (RESOURCE_CLAIM, POD):
        meta = replace(record.meta, namespace=draw(st.sampled_from(NAMESPACES)))
        record = replace(record, meta=meta)
    if key_of(record).kind == RESOURCE_SLICE and draw(st.booleans()):
        small = tuple(replace(d, capacity={f"{DRIVER}/memory": replace(
            next(iter(d.capacity.values())), value="40Gi")}) for d in record.devices)  # fmt: skip
        record = replace(record, devices=small)
    return record


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """("events", [Event…]) or ("relist", kind, [records…]) steps."""
    steps: list[tuple[str, Any]] = []
    held: dict[Any, Record] = {}
    for _ in range(draw(st.integers(1, 8))):
        if held and draw(st.integers(0, 4)) == 0:
            kind = draw(st.sampled_from(sorted({k.kind for k in held})))
            kept = [r for k, r in held.items() if k.kind == kind and draw(st.booleans())]
            steps.append(("relist", kind, kept))
            for key in [k for k in held if k.kind == kind]:
                del held[key]
            held.update((key_of(r), r) for r in kept)
            continue
        events = []
        for _ in range(draw(st.integers(1, 6))):
            if held and draw(st.integers(0, 3)) == 0:
                key = draw(st.sampled_from(sorted(held, key=str)))
                events.append(Event("DELETED", held.pop(key)))
            else:
                record = draw(moved())
                held[key_of(record)] = record
                events.append(Event("MODIFIED", record))
        steps.append(("events", events))
    return steps


WEST_WORLD = [
    slice_("w1", pool="w1", node="w1", cluster=WEST,
           devices=(device("gpu-0", uuid="U0"), device("gpu-1"))),
    claim("w-claim", cluster=WEST, devices=(("w1", "gpu-0"),), node="w1"),
    claim("w-pending", cluster=WEST, namespace="team"),
    pod("w-pod", cluster=WEST, node="w1", claims=(("gpu", "w-claim", None),)),
]  # fmt: skip

STATES = (None, PENDING, ALLOCATED, RESERVED, DELETING)
STATUSES = (None, FREE, HELD, SHARED, BLOCKED)


@st.composite
def selections(draw: st.DrawFn) -> tuple[Selection, str | None]:
    """A selection template and the cluster asked (None: every cluster)."""
    cluster = draw(st.sampled_from((EAST, WEST, None)))
    kind = draw(st.sampled_from((RESOURCE_CLAIM, POD, DEVICES, "Node", RESOURCE_SLICE)))
    namespaces = draw(st.sampled_from((None, ("ns",), ("ns-a", "team"), ())))
    if kind == RESOURCE_CLAIM:
        made = Selection(kind, "", namespaces=namespaces, state=draw(st.sampled_from(STATES)),
                         idle=draw(st.sampled_from((None, True, False))))  # fmt: skip
    elif kind == POD:
        made = Selection(kind, "", namespaces=namespaces,
                         node=draw(st.sampled_from((None, "n0", "n1", "w1"))),
                         uses_devices=draw(st.sampled_from((None, True, False))))  # fmt: skip
    elif kind == DEVICES:
        made = Selection(
            kind, "",
            published=draw(st.sampled_from((True, False, None))),
            driver=draw(st.sampled_from((None, DRIVER, "other.example.com"))),
            node=draw(st.sampled_from((None, "n0", "n1", "w1"))),
            status=draw(st.sampled_from(STATUSES)),
            class_name=draw(st.sampled_from((None, *CLASS_SELECTORS, "missing"))),
        )  # fmt: skip
    else:
        made = Selection(kind, "")
    return made, cluster


def _keys(page: Page) -> list[tuple[str, ...]]:
    return [
        tuple(item.key)
        if hasattr(item, "key")
        else (item.meta.cluster, item.meta.namespace, item.meta.name)
        for item in page.items
    ]


async def _both(memory: MemoryStore, store: RedisStore, steps: list[tuple[str, Any]]) -> None:
    """Fold the steps into both stores, each through the index it opens."""
    indexes = {}
    for name, target in (("memory", memory), ("redis", store)):
        east, west = target.open_index(EAST), target.open_index(WEST)
        indexes[name] = east
        await target.apply(_west(west))
        for step in steps:
            if step[0] == "relist":
                changes = east.resync(step[1], step[2], at=AT)
            else:
                changes = east.apply(step[1], at=AT)
            await target.apply(changes)


def _west(index: ClusterIndex) -> Any:
    return index.apply([Event("ADDED", r) for r in WEST_WORLD], at=AT)


async def _compare(memory: MemoryStore, store: RedisStore, asked: list[Any]) -> None:
    for template, cluster, first, cursor_pick in asked:
        names = [cluster] if cluster is not None else [EAST, WEST]
        parts = [replace(template, cluster=n) for n in names]
        whole = await memory.select(parts, after=None, first=1000)
        cursors: list[tuple[str, ...] | None] = [None, ("a",), ("zz",), (EAST,), (WEST, "ns")]
        cursors += _keys(whole)
        after = cursors[cursor_pick % len(cursors)]
        expected = await memory.select(parts, after=after, first=first)
        found = await store.select(parts, after=after, first=first)
        what = (template, cluster, after, first)
        assert _keys(found) == _keys(expected), what
        assert found.items == expected.items, what
        assert (found.total, found.has_previous, found.has_next) == (
            expected.total, expected.has_previous, expected.has_next), what  # fmt: skip
    for kind in (RESOURCE_CLAIM, POD):
        for name in (EAST, WEST):
            assert await store.namespaces(kind, name) == await memory.namespaces(kind, name)


async def _run(url: str, steps: list[tuple[str, Any]], asked: list[Any], *, stale: bool) -> None:
    prefix = f"oracle-{uuid.uuid4().hex[:12]}"
    memory = MemoryStore()
    store = RedisStore.from_url(url, prefix=prefix)
    try:
        await _both(memory, store, steps)
        marker = store.keys(EAST).layout
        if stale:  # an older writer holds the cluster now: the replica must read it whole
            await store.redis.set(marker, b"1")
        else:
            assert await store.redis.get(marker) == b"2:"  # the indexes answer
        await _compare(memory, store, asked)
    finally:
        raw = aioredis.from_url(url)
        keys = [k async for k in raw.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await raw.delete(*keys)
        await raw.aclose()
        await store.close()


asked_lists = st.lists(
    st.tuples(selections(), st.sampled_from((0, 1, 2, 3, 100)), st.integers(0, 40)).map(
        lambda t: (t[0][0], t[0][1], t[1], t[2])
    ),
    min_size=20,
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(steps=batches(), asked=asked_lists)
def test_redis_indexes_answer_as_memory_does(redis_url: str, steps, asked) -> None:
    asyncio.run(_run(redis_url, steps, asked, stale=False))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(steps=batches(), asked=asked_lists)
def test_a_cluster_without_whole_indexes_is_read_whole_and_answers_the_same(
    redis_url: str, steps, asked
) -> None:
    asyncio.run(_run(redis_url, steps, asked, stale=True))
