"""The watcher→reactor queue (order, no loss on timed reads, close) and malformed bookkeeping."""

from __future__ import annotations

import asyncio
import logging

import pytest

from dra_mirror.service.clusters.watching import Bookmarked
from dra_mirror.service.model.normalize import MalformedObject
from dra_mirror.service.reactor.feed import CLOSED, ClusterFeed
from dra_mirror.service.reactor.malformed import MalformedObjects, split_ref


async def test_timed_reads_lose_nothing_and_keep_order() -> None:
    feed = ClusterFeed(size=4)
    sent = [Bookmarked("Pod", str(i)) for i in range(50)]

    async def produce() -> None:
        for message in sent:
            await feed.emit(message)  # waits whenever 4 are queued
            await asyncio.sleep(0)
        await feed.close()

    producer = asyncio.create_task(produce())
    taken = []
    while (message := await feed.take(0.0001)) is not CLOSED:
        if message is not None:
            taken.append(message)
    await producer
    assert taken == sent
    assert feed.empty()
    assert await feed.take(0.001) is None
    feed.abandon()


def test_split_ref_handles_cluster_names_with_slashes() -> None:
    cluster = "arn:aws:eks:eu-west-1:123:cluster/prod"
    assert split_ref(f"{cluster}/Pod/team-a/trainer-0", cluster, "Pod") == ("team-a", "trainer-0")
    assert split_ref(f"{cluster}/Node/n1", cluster, "Node") == ("", "n1")


def test_malformed_counted_and_logged_once_per_version(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="dra_mirror.service.reactor.reactor")
    objects = MalformedObjects("east")
    bad = MalformedObject("east/ResourceClaim/ns/c1", "Expected `array`, got `str`")
    assert objects.report("ResourceClaim", bad, "10")
    assert not objects.report("ResourceClaim", bad, "10")
    assert objects.report("ResourceClaim", bad, "11")  # a new version, still broken
    assert objects.counts == {"ResourceClaim": 2}
    assert len(caplog.records) == 2
    record = caplog.records[0]
    assert (record.cluster, record.kind, record.namespace, record.object_name) == (
        "east",
        "ResourceClaim",
        "ns",
        "c1",
    )
