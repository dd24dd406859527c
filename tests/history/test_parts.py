"""Large batches in parts: a LIST's Changes is appended as entries of at most `entry_rows`
rows and the writer takes at most `max_batch_bytes` of entries into one batch. History must be the
same as with whole entries: the writer's scenarios run again here with parts of one row."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from dra_mirror.service.history.outbox import (
    ChangesEntry,
    MemoryOutbox,
    changes_entries,
    decode_entry,
    encode_entry,
)
from dra_mirror.service.history.sink import HistorySink
from dra_mirror.service.model import changes as ch
from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.records import ClaimRecord, Meta
from dra_mirror.service.stores.protocols import StoreUnavailable
from tests.history.conftest import FAST, Pipeline
from tests.history.script import CLUSTER, at, transitions
from tests.history.test_writer import (  # noqa: F401  (run here with the fixture below)
    test_a_device_changed_while_nobody_watched_opens_a_new_interval,
    test_a_relist_reannouncing_a_holder_keeps_the_first_start,
    test_a_takeover_of_a_quiet_cluster_keeps_what_it_kept_and_ends_what_it_lost,
    test_a_watch_started_with_an_empty_index_records_the_gap,
    test_every_entry_twice_writes_every_fact_once,
)

PARTS = replace(FAST, max_batch_bytes=1)  # one entry a batch


@pytest.fixture
async def pipeline(engine) -> AsyncIterator[Pipeline]:
    running = Pipeline(engine, options=PARTS, entry_rows=1).start()
    yield running
    await running.stop()


def a_list(claims: int = 5) -> Changes:
    records = [
        ClaimRecord(
            meta=Meta(
                cluster=CLUSTER,
                name=f"c{i}",
                namespace="team-a",
                uid=f"u-c{i}",
                resource_version=str(2000 + i),
                created_at=at(i),
            )
        )
        for i in range(claims)
    ]
    moved = [t for _, t in transitions()][:4]
    return Changes(CLUSTER, at(300), upserts=records, transitions=moved,
                   listed_kind="ResourceClaim", announced=(ch.CLAIM_FACTS,))  # fmt: skip


def test_a_large_batch_is_its_versions_then_its_transitions_in_parts() -> None:
    changes = a_list()
    whole = ChangesEntry.of(changes)
    parts = list(changes_entries(changes, rows=2))
    assert [(len(p.versions), len(p.transitions)) for p in parts] == [
        (2, 0), (2, 0), (1, 0), (0, 2), (0, 2)]  # fmt: skip
    assert [v for p in parts for v in p.versions] == list(whole.versions)
    assert [t for p in parts for t in p.transitions] == list(whole.transitions)
    assert [p.announced for p in parts] == [(), (), (), (), (ch.CLAIM_FACTS,)]
    assert all(p.listed and p.cluster == CLUSTER and p.at == whole.at for p in parts)
    assert list(changes_entries(changes, rows=9)) == [whole]  # small enough: one entry


class FailingOnce(MemoryOutbox):
    """An outbox whose third append fails once (Redis went away)."""

    def __init__(self) -> None:
        super().__init__()
        self.appends = 0

    async def append(self, payload: bytes, *, cluster: str | None = None) -> str:
        self.appends += 1
        if self.appends == 3:
            raise StoreUnavailable("outbox: connection refused")
        return await super().append(payload)


async def test_a_batch_handed_again_after_a_failed_append_appends_each_part_once() -> None:
    outbox = FailingOnce()
    sink = HistorySink(outbox, entry_rows=2)
    changes = a_list()
    with pytest.raises(StoreUnavailable):
        await sink.apply(changes)
    await sink.apply(changes)  # the reactor's delivery hands the same batch again
    entries = [decode_entry(payload) for _, payload in await outbox.read(100, block=0)]
    assert entries == list(changes_entries(changes, rows=2))


async def test_the_writer_never_takes_more_than_max_batch_bytes(engine) -> None:
    changes = a_list(claims=9)
    parts = [encode_entry(e) for e in changes_entries(changes, rows=2)]
    limit = len(parts[0]) + 1  # the second entry crosses it: two entries a batch at most
    running = Pipeline(engine, options=replace(FAST, max_batch_bytes=limit), entry_rows=2)
    taken: list[int] = []
    gather = running.writer._gatherer.gather

    async def counting():
        batch = await gather()
        if batch:
            taken.append(len(batch))
        return batch

    running.writer._gatherer.gather = counting
    running.start()
    try:
        await running.sink(changes)
        await running.drained()
    finally:
        await running.stop()
    assert sum(taken) == len(parts) == 7 and max(taken) == 2
    assert running.writer.stats.rows >= 9


async def test_the_writer_decodes_each_entry_once(engine, monkeypatch) -> None:
    """An initial sync's entries are megabytes each: the entries read beyond a batch's
    `max_batch_bytes` wait undecoded for the next batch, and are decoded only then."""
    from dra_mirror.service.history import gathering

    decoded: list[bytes] = []

    def counting(payload: bytes):
        decoded.append(payload)
        return decode_entry(payload)

    monkeypatch.setattr(gathering, "decode_entry", counting)
    changes = a_list(claims=9)
    parts = [encode_entry(e) for e in changes_entries(changes, rows=2)]
    running = Pipeline(engine, options=replace(FAST, max_batch_bytes=1), entry_rows=2)
    running.start()
    try:
        await running.sink(changes)
        await running.drained()
    finally:
        await running.stop()
    assert sorted(decoded) == sorted(parts)  # every part, each once
