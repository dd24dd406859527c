"""An allocation recorded before any slice published its device: the device's uuid reaches
the allocation's row when the slice arrives (in a later batch or the same one), and whoHeld
and deviceHistory find the holding by the uuid and by driver/pool/device."""

from __future__ import annotations

from sqlalchemy import select

from dra_mirror.service.history.models import AllocationInterval
from dra_mirror.service.history.times import to_us
from dra_mirror.service.model.changes import ALLOCATED, DEVICE_APPEARED, Changes, Transition
from tests.history.script import CLUSTER, DRIVER, at


def _held(claim: str, device: str, minute: float) -> Transition:
    return Transition(ALLOCATED, CLUSTER, at(minute), namespace="team-a", claim=claim,
                      claim_uid=f"uid-{claim}", driver=DRIVER, pool="n1", device=device,
                      uuid=None, node="n1", request="gpu", class_names=("h200",))  # fmt: skip


def _appeared(device: str, uuid: str, minute: float) -> Transition:
    return Transition(DEVICE_APPEARED, CLUSTER, at(minute), driver=DRIVER, pool="n1",
                      device=device, uuid=uuid, node="n1", data={"model": "H200"})  # fmt: skip


async def _uuids(engine) -> dict[str, str | None]:
    a = AllocationInterval
    async with engine.connect() as conn:
        return dict((await conn.execute(select(a.claim, a.uuid).order_by(a.claim))).all())


async def test_a_slice_arriving_later_names_the_device_of_its_holders(engine, pipeline, queries):
    await pipeline.sink(Changes(CLUSTER, at(1), transitions=[_held("early", "gpu-0", 1)]))
    await pipeline.drained()  # written: the row has no uuid yet
    assert await _uuids(engine) == {"early": None}
    same_batch = [_held("same", "gpu-1", 2), _appeared("gpu-1", "GPU-B", 2)]
    await pipeline.sink(Changes(CLUSTER, at(2), transitions=same_batch))
    await pipeline.sink(Changes(CLUSTER, at(3), transitions=[_appeared("gpu-0", "GPU-A", 3)]))
    await pipeline.drained()
    assert await _uuids(engine) == {"early": "GPU-A", "same": "GPU-B"}
    for name in ("GPU-A", f"{DRIVER}/n1/gpu-0", "n1/gpu-0"):
        (held,) = await queries.who_held(name, to_us(at(2.5)))
        assert (held.claim, held.uuid) == ("early", "GPU-A"), name
        (timeline,) = await queries.device_history(name, to_us(at(0)), to_us(at(9)))
        assert [s.claim for s in timeline.allocations] == ["early"], name


async def test_a_holding_that_ended_before_the_slice_is_found_by_the_device_key(
    engine, pipeline, queries
):
    released = Transition("released", CLUSTER, at(2), namespace="team-a", claim="gone",
                          claim_uid="uid-gone", driver=DRIVER, pool="n1", device="gpu-0",
                          request="gpu")  # fmt: skip
    await pipeline.sink(Changes(CLUSTER, at(1), transitions=[_held("gone", "gpu-0", 1)]))
    await pipeline.sink(Changes(CLUSTER, at(2), transitions=[released]))
    await pipeline.sink(Changes(CLUSTER, at(3), transitions=[_appeared("gpu-0", "GPU-A", 3)]))
    await pipeline.drained()
    for name in ("GPU-A", f"{DRIVER}/n1/gpu-0"):
        (held,) = await queries.who_held(name, to_us(at(1.5)))
        assert held.claim == "gone", name
        (timeline,) = await queries.device_history(name, to_us(at(0)), to_us(at(9)))
        assert timeline.uuid == "GPU-A"
        assert [s.claim for s in timeline.allocations] == ["gone"], name
