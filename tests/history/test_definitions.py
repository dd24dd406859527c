"""The worked example of docs/history.md ("Definitions"), written through the model into
SQLite and PostgreSQL: every figure its table states is what the audit answers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dra_mirror.service.history.queries import HistoryQueries
from dra_mirror.service.history.times import to_us
from dra_mirror.service.model.index import ClusterIndex, Event
from dra_mirror.service.model.kinds import KINDS
from tests.history.conftest import BACKENDS, recorded
from tests.model.builders import CLUSTER, claim, device, pod, slice_

DOC = Path(__file__).resolve().parents[2] / "docs" / "history.md"
SLICES = {f"memory-slice-{i}": "1" for i in range(8)}


def at(minute: int) -> str:
    return f"2026-12-01T10:{minute:02d}:00Z"


def documented() -> dict[str, float]:
    """The figures of the worked example's table."""
    text = DOC.read_text()
    table = text.split("<!-- worked-example -->")[1].split("<!-- /worked-example -->")[0]
    rows = re.findall(r"^\| `(\w+)` \| ([\d.]+) \|", table, re.MULTILINE)
    assert len(rows) == 10, "the worked example's table"
    return {name: float(value) for name, value in rows}


def world_batches() -> list:
    """The example's events folded into an index that has listed an empty cluster (so the
    mirror observed everything that follows): one Changes per instant."""
    index = ClusterIndex(CLUSTER)
    out = [index.resync(kind, [], at=at(0)) for kind in KINDS]
    n1 = slice_(
        "n1", pool="n1", node="n1", counters={"cs0": SLICES},
        devices=(
            device("gpu-0", uuid="GPU-0", consumes={"cs0": SLICES}),
            device("gpu-0-3g", consumes={"cs0": {f"memory-slice-{i}": "1" for i in range(4)}}),
            device("gpu-0-1g", consumes={"cs0": {"memory-slice-4": "1"}}),
            device("gpu-1", uuid="GPU-1"),
        ),
    )  # fmt: skip
    running = {
        name: pod(f"p-{name}", node="n1", claims=(("gpu", name, None),))
        for name in ("train", "infer")
    }
    waiting = {
        name: pod(f"p-{name}", phase="Pending", claims=(("gpu", name, None),))
        for name in ("nb", "orphan")
    }
    held = [
        claim("train", devices=(("n1", "gpu-1"),), node="n1", consumers=(("p-train", "uid-p-train"),)),
        claim("infer", devices=(("n1", "gpu-0-3g"),), node="n1", consumers=(("p-infer", "uid-p-infer"),)),
    ]  # fmt: skip
    first = [n1, *running.values(), *waiting.values(), *held, claim("nb"), claim("orphan")]
    out.append(index.apply([Event("ADDED", r) for r in first], at=at(0)))
    out.append(index.apply([Event("DELETED", waiting["orphan"])], at=at(20)))
    served = claim("nb", devices=(("n1", "gpu-0-1g"),), node="n1",
                   consumers=(("p-nb", "uid-p-nb"),), rv="2")  # fmt: skip
    up = pod("p-nb", node="n1", rv="2", claims=(("gpu", "nb", None),))
    out.append(index.apply([Event("MODIFIED", served), Event("MODIFIED", up)], at=at(30)))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_worked_example_is_what_the_audit_answers(backend, request, tmp_path) -> None:
    async with recorded(backend, request, tmp_path, world_batches()) as engine:
        (row,) = await HistoryQueries(engine).contention(
            to_us(at(0)), to_us("2026-12-01T11:00:00Z"), group_by="CLUSTER"
        )
    answered = {
        "deviceHoursAvailable": row.device_hours_available,
        "deviceHoursAllocated": row.device_hours_allocated,
        "utilization": row.utilization,
        "gpuHoursAvailable": row.gpu_hours_available,
        "gpuHoursAllocated": row.gpu_hours_allocated,
        "gpuUtilization": row.gpu_utilization,
        "gpuHoursIdle": row.gpu_hours_idle,
        "claimsWaited": row.claims_waited,
        "waitP50Seconds": row.wait_p50,
        "claimsAbandoned": row.claims_abandoned,
    }
    assert answered == pytest.approx(documented())
