"""findDevices of one status on a Redis reader reads only the devices of that status (the
writer's status filter, a page at a time), not every device of the cluster, and answers as
the whole read filtered by status would."""

from __future__ import annotations

import uuid

import pytest

from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.questions import diagnosis
from dra_mirror.service.questions.scoped import Scope, ScopedReader
from dra_mirror.service.stores.redis import RedisStore
from tests.stores.test_contract import EAST, EAST_RECORDS

pytestmark = pytest.mark.redis


async def test_devices_of_one_status_are_read_from_the_status_filter(
    redis_url, monkeypatch
) -> None:
    store = RedisStore.from_url(redis_url, prefix=f"test-{uuid.uuid4().hex[:12]}")
    try:
        index = ClusterIndex(EAST)
        await store.apply(index.apply([Event("ADDED", r) for r in EAST_RECORDS], at="t1"))
        reader = ScopedReader(store, Scope())
        every = await diagnosis.find_devices(reader, "true", cluster=EAST)
        statuses = dict(zip((e.key for e in every.devices),
                            await store.device_status([e.key for e in every.devices]),
                            strict=True))  # fmt: skip
        assert {"free", "held"} <= set(statuses.values())

        async def whole_kind(**_):
            raise AssertionError("read every device of the cluster")

        monkeypatch.setattr(store, "list_devices", whole_kind)
        monkeypatch.setattr(diagnosis, "SEARCH_PAGE", 1)  # page by page
        for status in ("free", "held"):
            found = await diagnosis.find_devices(reader, "true", cluster=EAST, status=status)
            expected = sorted(k for k, s in statuses.items() if s == status)
            assert sorted(e.key for e in found.devices) == expected
    finally:
        await store.close()
