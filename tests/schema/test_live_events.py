"""deviceEvents and claimEvents through the schema over the in-memory store: every change of a
device's holders is an event, each side answered from its own moment; an unknown cluster is an
error at once; a client that resumes from the last id it saw loses and repeats nothing, or is
told to re-read (RESYNC)."""

from __future__ import annotations

import asyncio
from typing import Any

from dra_mirror.schema import build_schema
from dra_mirror.schema.context import make_context
from dra_mirror.service.model.live import LIVE_BATCH_LIMIT
from dra_mirror.service.stores.bus import InProcessBus
from dra_mirror.service.stores.memory import MemoryStore
from tests.feeding import feed
from tests.model.builders import CLUSTER, claim, device, slice_

SCHEMA = build_schema()
DEVICES = """subscription($c: String!, $after: String) { deviceEvents(cluster: $c, after: $after) {
  id type
  old { status device { name status allocations { claim { name } } } }
  new { status device { name status allocations { claim { name } } } } } }"""
CLAIMS = """subscription($c: String!, $after: String) { claimEvents(cluster: $c, after: $after) {
  id type name } }"""
GPUS = slice_("n1-gpu", pool="n1", node="n1", devices=(device("gpu-0"), device("gpu-1")))


def held(name: str, gpu: str = "gpu-0", rv: str = "1") -> Any:
    return claim(name, devices=(("n1", gpu),), rv=rv)


async def started(store: MemoryStore, document: str, **variables: Any) -> Any:
    """A subscription whose first `anext` is on its way (it is listening once this returns)."""
    stream: Any = await SCHEMA.subscribe(
        document, variable_values={"c": CLUSTER, **variables}, context_value=make_context(store)
    )
    pending = asyncio.ensure_future(anext(stream))
    for _ in range(5):
        await asyncio.sleep(0)
    return stream, pending


async def take(stream: Any, first: Any, n: int) -> list[dict]:
    results = [await asyncio.wait_for(first, 2)]
    while len(results) < n:
        results.append(await asyncio.wait_for(anext(stream), 2))
    for result in results:
        assert not result.errors, result.errors
    return [next(iter(r.data.values())) for r in results]


async def world() -> MemoryStore:
    store = MemoryStore()
    await feed(store, CLUSTER, upserts=[GPUS], at="t0")
    return store


async def test_a_device_released_and_allocated_again_in_one_batch_is_an_event() -> None:
    store = await world()
    await feed(store, CLUSTER, upserts=[held("c1")], at="t1")
    stream, first = await started(store, DEVICES)
    await feed(store, CLUSTER, deletes=[held("c1")], upserts=[held("c2", rv="2")], at="t2")
    [event] = await take(stream, first, 1)
    assert event["type"] == "MODIFIED"
    assert event["old"]["device"]["allocations"] == [{"claim": None}]  # c1 is gone now
    assert event["new"]["device"]["allocations"] == [{"claim": {"name": "c2"}}]
    await stream.aclose()


async def test_the_old_side_of_a_device_event_is_its_snapshot_before_the_change() -> None:
    store = await world()
    stream, first = await started(store, DEVICES)
    await feed(store, CLUSTER, upserts=[held("c1")], at="t1")
    [event] = await take(stream, first, 1)
    assert event["old"] == {"status": "FREE", "device": {
        "name": "gpu-0", "status": "FREE", "allocations": []}}  # fmt: skip
    assert event["new"] == {"status": "HELD", "device": {
        "name": "gpu-0", "status": "HELD", "allocations": [{"claim": {"name": "c1"}}]}}  # fmt: skip
    await stream.aclose()


async def test_a_subscription_to_an_unknown_cluster_is_an_error_at_once() -> None:
    store = await world()
    for document in (DEVICES, CLAIMS):
        stream: Any = await SCHEMA.subscribe(
            document, variable_values={"c": "eats"}, context_value=make_context(store)
        )
        result = await asyncio.wait_for(anext(stream), 2)
        [error] = result.errors
        assert error.extensions["code"] == "UNKNOWN_CLUSTER"
        assert "eats" in error.message and CLUSTER in error.message


async def test_a_client_resumes_after_the_last_id_it_saw_losing_and_repeating_nothing() -> None:
    store = await world()
    stream, first = await started(store, CLAIMS)
    await feed(store, CLUSTER, upserts=[claim("a")], at="t1")
    [seen] = await take(stream, first, 1)
    await stream.aclose()  # the client goes away; two claims come meanwhile
    await feed(store, CLUSTER, upserts=[claim("b")], at="t2")
    await feed(store, CLUSTER, upserts=[claim("c")], at="t3")
    stream, first = await started(store, CLAIMS, after=seen["id"])
    await feed(store, CLUSTER, upserts=[claim("d")], at="t4")
    events = await take(stream, first, 3)
    assert [(e["type"], e["name"]) for e in events] == [
        ("ADDED", "b"), ("ADDED", "c"), ("ADDED", "d")]  # fmt: skip
    assert len({seen["id"], *(e["id"] for e in events)}) == 4
    await stream.aclose()


async def test_a_resume_the_bus_cannot_replay_is_a_resync() -> None:
    store = MemoryStore(live=InProcessBus(replay=2))
    await feed(store, CLUSTER, upserts=[GPUS], at="t0")
    stream, first = await started(store, CLAIMS)
    await feed(store, CLUSTER, upserts=[claim("a")], at="t1")
    [seen] = await take(stream, first, 1)
    await stream.aclose()
    for n, name in enumerate("bcd"):  # more than the bus keeps
        await feed(store, CLUSTER, upserts=[claim(name)], at=f"t{n + 2}")
    stream, first = await started(store, CLAIMS, after=seen["id"])
    await feed(store, CLUSTER, upserts=[claim("e")], at="t9")
    resync, after = await take(stream, first, 2)
    assert (resync["type"], resync["name"]) == ("RESYNC", "")
    assert (after["type"], after["name"]) == ("ADDED", "e")
    await stream.aclose()
    # An id from another run of the mirror (another bus) is a resync too.
    stream, first = await started(store, CLAIMS, after="0badc0de-3")
    [resync] = await take(stream, first, 1)
    assert resync["type"] == "RESYNC"
    await stream.aclose()


async def test_a_batch_too_large_for_per_object_events_is_a_resync() -> None:
    store = await world()
    stream, first = await started(store, DEVICES)
    many = [claim(f"c{i}") for i in range(LIVE_BATCH_LIMIT + 1)]
    await feed(store, CLUSTER, upserts=many, at="t1")
    [event] = await take(stream, first, 1)
    assert (event["type"], event["old"], event["new"]) == ("RESYNC", None, None)
    await stream.aclose()
