"""The in-process bus's promises to subscribers (service.stores.bus): ids in order, a resume
from a kept id replays exactly what followed it, and a subscriber too slow to keep up is told
to re-read with one Resync instead of silently missing events."""

from __future__ import annotations

import asyncio

from dra_mirror.service.model.live import ClaimEvent, Resync
from dra_mirror.service.stores.bus import InProcessBus

EAST = "east"


def claim_event(name: str, cluster: str = EAST) -> ClaimEvent:
    return ClaimEvent("ADDED", cluster, "ns", name)


async def test_a_subscriber_too_slow_to_keep_up_is_told_to_re_read() -> None:
    bus = InProcessBus(max_queued=1)
    events = bus.subscribe(EAST)
    first = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0)  # listening
    bus.publish([claim_event("a")])
    assert (await first).event.name == "a"
    for name in "bcd":  # its queue holds one batch: c and d find it full
        bus.publish([claim_event(name)])
    taken = [await asyncio.wait_for(anext(events), 1) for _ in range(2)]
    assert taken[0].event.name == "b"
    assert isinstance(taken[1].event, Resync)
    assert taken[1].id == bus.newest_id(EAST)  # go on from the newest event
    bus.publish([claim_event("e")])
    assert (await asyncio.wait_for(anext(events), 1)).event.name == "e"
    await events.aclose()


async def test_ids_count_each_clusters_events_and_a_resume_replays_what_followed() -> None:
    bus = InProcessBus()
    bus.publish([claim_event("a"), claim_event("x", "west"), claim_event("b")])
    bus.publish([claim_event("c")])
    kept = bus.subscribe(EAST, after=f"{bus.epoch}-1")
    replayed = [await asyncio.wait_for(anext(kept), 1) for _ in range(2)]
    assert [(d.id, d.event.name) for d in replayed] == [
        (f"{bus.epoch}-2", "b"),
        (f"{bus.epoch}-3", "c"),
    ]
    await kept.aclose()
    current = bus.subscribe(EAST, after=f"{bus.epoch}-3")
    waiting = asyncio.ensure_future(anext(current))
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing after the newest: nothing replayed
    bus.publish([claim_event("d")])
    assert (await asyncio.wait_for(waiting, 1)).id == f"{bus.epoch}-4"
    await current.aclose()
