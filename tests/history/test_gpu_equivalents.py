"""The contention audit in GPU-equivalent-hours, on the demo world folded through the model
into a SQLite history, against a naive recount from the simulator's raw objects."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_mirror.service.history.times import US_PER_HOUR, to_us
from tests.contract.test_contract import _gpu_recount
from tests.contract.worlds import LOADED_AT, demo_with_history


@pytest.fixture
async def world(tmp_path: Path):
    loaded = await demo_with_history(tmp_path)
    yield loaded
    await loaded.history.close()


async def test_east_gpu_utilization_is_the_share_of_gpus_held(world) -> None:
    start = to_us(LOADED_AT)
    end = start + US_PER_HOUR  # one hour after everything was seen, nothing changed
    rows = await world.history.contention(start, end, group_by="CLUSTER")
    (east,) = [r for r in rows if r.cluster == "east"]
    gpus, held = _gpu_recount(world.raw["east"])
    assert (gpus, held) == (12, 5.875)  # the demo's east: 12 GPUs, 5.875 of them held
    assert east.gpu_hours_available == pytest.approx(gpus)
    assert east.gpu_hours_allocated == pytest.approx(held)
    assert east.gpu_utilization == pytest.approx(held / gpus * 100)
    # in devices every partition counts as much as a GPU: a far smaller figure
    assert east.utilization < east.gpu_utilization / 4


async def test_nics_never_enter_gpu_figures(world) -> None:
    start = to_us(LOADED_AT)
    end = start + US_PER_HOUR
    rows = await world.history.contention(start, end, group_by="NODE")
    by_node = {r.group: r for r in rows if r.cluster == "east"}
    # east-a100-0: 4 A100s and a NIC; the NIC is shared, but never a GPU-equivalent
    assert by_node["east-a100-0"].gpu_hours_available == pytest.approx(4)


async def test_a_class_counts_every_gpu_it_selects_allocated_or_not(world) -> None:
    start = to_us(LOADED_AT)
    end = start + US_PER_HOUR
    rows = await world.history.contention(start, end, group_by="CLASS")
    by_class = {r.group: r for r in rows if r.cluster == "east"}
    gpus, _ = _gpu_recount(world.raw["east"])
    # gpu.nvidia.com selects every whole GPU, allocated or not: never-used ones count
    assert by_class["gpu.nvidia.com"].gpu_hours_available == pytest.approx(gpus)
    # shared NICs no longer pass 100 %: each NIC is available to its class, used or not
    assert by_class["network-interface"].utilization <= 100
    # the MIG class counts the GPUs whose partitions it selects (the H200s)
    assert by_class["mig.nvidia.com"].gpu_hours_available == pytest.approx(8)


@pytest.mark.parametrize("slices_later", ["batch", "apart"])
async def test_a_device_held_before_its_slice_is_seen_takes_its_real_share(
    tmp_path: Path, slices_later: str
) -> None:
    # a watch may list claims before slices: a MIG partition held then is weighed as a lone
    # device (1 GPU) until its slice arrives; its allocation then takes its share of the GPU
    loaded = await demo_with_history(tmp_path, slices_later=slices_later)
    try:
        start = to_us(LOADED_AT)
        rows = await loaded.history.contention(start, start + US_PER_HOUR, group_by="CLUSTER")
        (east,) = [r for r in rows if r.cluster == "east"]
        gpus, held = _gpu_recount(loaded.raw["east"])
        assert east.gpu_hours_available == pytest.approx(gpus)
        assert east.gpu_hours_allocated == pytest.approx(held)
    finally:
        await loaded.history.close()
