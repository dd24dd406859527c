"""A device's history finds its allocations whether they were recorded with its uuid or, seen
before the device itself (the reactor lists the kinds concurrently), by its key alone."""

from __future__ import annotations

import time

from sqlalchemy import insert

from dra_mirror.service.history.models import AllocationInterval, DeviceInterval

# now: PostgreSQL keeps history in monthly partitions, created for this month and the next two
START = int(time.time() - 600) * 1_000_000
LATER = START + 300_000_000
KEY = {"cluster": "east", "driver": "gpu.nvidia.com", "pool": "east-h200-1", "device": "gpu-0"}


async def test_an_allocation_recorded_without_the_uuid_is_the_devices(engine, queries) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(DeviceInterval).values(
            **KEY, uuid="GPU-B2", node="east-h200-1", data="{}", start_us=START,
        ))  # fmt: skip
        await conn.execute(insert(AllocationInterval).values(
            **KEY, uuid=None, node="east-h200-1", namespace="research", claim="notebook-gpu",
            claim_uid="u-1", request="gpu", share_id="", consumed_capacity="{}",
            class_name="gpu.nvidia.com", start_us=START,
        ))  # fmt: skip
    for spec in ("GPU-B2", "east-h200-1/gpu-0", "gpu.nvidia.com/east-h200-1/gpu-0"):
        [timeline] = await queries.device_history(spec, START, LATER + 1)
        assert timeline.uuid == "GPU-B2"
        assert [a.claim for a in timeline.allocations] == ["notebook-gpu"], spec
        held = await queries.who_held(spec, LATER)
        assert [h.claim for h in held] == ["notebook-gpu"], spec
