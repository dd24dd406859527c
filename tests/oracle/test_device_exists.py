"""Who-holds tells a device nobody holds from a name that names nothing, looking the device up
by what the person typed — over the graph in one request, in this process from the store."""

from __future__ import annotations

from typing import Any

from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.local import LocalQuestions
from dra_mirror.service.questions.remote import RemoteQuestions
from tests.oracle import objects as o
from tests.oracle.system import ask

GPU = "gpu.nvidia.com"
DEVICES = [o.device(f"gpu-{i}", uuid=f"GPU-{i:04d}") for i in range(64)]


async def test_a_device_is_found_by_key_in_one_request(scenario):
    await scenario.show(*(o.slice_(f"n{i}-gpu", GPU, f"n{i}", DEVICES, node_name=f"n{i}") for i in range(12)))  # fmt: skip
    system = scenario.system
    asked: list[str] = []

    async def counted(document: str, variables: dict[str, Any]) -> dict[str, Any]:
        asked.append(document)
        rest = {k: v for k, v in variables.items() if k != "cluster"}
        answer = await ask(system.schema, system.watcher.memory, variables["cluster"], document, **rest)  # fmt: skip
        assert answer.errors == []
        return answer.data

    remote = RemoteQuestions(counted)
    local = LocalQuestions(Asker.over(system.watcher.memory))
    for spec in ("GPU-0063", "n11/gpu-63", f"{GPU}/n11/gpu-63", "gpu-63"):
        for questions in (remote, local):
            answer = await questions.who_holds(spec, system.cluster)
            assert answer.devices and {d.status for d in answer.devices} == {"FREE"}, spec
    for spec in ("GPU-9999", "n12/gpu-0", f"{GPU}/n11/gpu-64", "gpu-64"):
        for questions in (remote, local):
            assert (await questions.who_holds(spec, system.cluster)).unknown, spec
    assert len(asked) == 8  # one request each, however many devices the cluster has
