"""Dozens of shares per GPU (the `shared-gpus` scenario: NVIDIA ConsumableShares on H200s),
served by the simulator and watched into the mirror: every answer of its graph is the
oracle's, read from the raw objects."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

from dra_mirror.service.model.kinds import BY_PLURAL as RESOURCES
from dra_mirror.service.sim.scenario import build_world, load_scenario
from tests.oracle import known
from tests.oracle.compare import device_name, mismatches
from tests.oracle.system import quiet_schema, store_answers, watched
from tests.oracle.truth import answer

GPU = "gpu.nvidia.com"
MI = 1 << 20
KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "Pod", "Node")
PLURALS = {r.kind: r.plural for r in RESOURCES.values()}


def test_the_oracle_reads_dozens_of_shares():
    store = build_world(load_scenario("shared-gpus")).stores["shared"]
    truth = answer([o for kind in KINDS for o in store.list(PLURALS[kind])])
    memory = truth.devices[(GPU, "shared-h200-0", "gpu-0")]
    assert memory.status == "shared" and len(memory.holders) == 35
    assert memory.remaining == {f"{GPU}/memory": Fraction((143771 - 35 * 4096) * MI)}
    unlimited = truth.devices[(GPU, "shared-h200-1", "gpu-0")]
    assert len(unlimited.holders) == 24
    assert unlimited.remaining == {f"{GPU}/memory": Fraction(143771 * MI)}
    counted = truth.devices[(GPU, "shared-h200-2", "gpu-0")]
    assert len(counted.holders) == 4 and counted.remaining[f"{GPU}/shares"] == 0


async def test_the_mirror_answers_as_the_oracle_with_dozens_of_shares(tmp_path):
    store = build_world(load_scenario("shared-gpus")).stores["shared"]
    async with watched([store], versions=("v1",), directory=tmp_path) as mirrored:
        served = [o for kind in KINDS for o in store.list(PLURALS[kind])]
        truth = answer(served)
        held = [device_name(k) for k, d in truth.devices.items() if d.holders]
        assert len(held) == 3
        answers = await store_answers(quiet_schema(), mirrored, store.name, held, [])
        visible = {
            (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o
            for o in served
        }
        context = SimpleNamespace(visible=visible, handovers=[], pods_listed=True)
        found = mismatches(truth, answers, "memory")
        unknown, _ = known.explain(found, truth=truth, machine=context)
        assert not unknown, "\n".join(str(m) for m in unknown)
        # whoHolds names every one of the 35 shares, each with its own shareID
        holds = answers.holds[device_name((GPU, "shared-h200-0", "gpu-0"))]
        assert not holds.errors and holds.data is not None
        assert len({h["shareID"] for h in holds.data["whoHolds"]}) == 35
