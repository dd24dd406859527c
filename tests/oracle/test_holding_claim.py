"""`Holding.claim` follows a reference that can dangle (a field that follows a reference is nullable): a store is
read in several calls, so the claim of a hold just read may be gone by the next one. The
holding is answered with a null claim, never an error that erases the other holdings; a
claim outside the asker's scope is not a dangling link but a withheld holder (no row, counted
on the device)."""

from __future__ import annotations

from typing import Any

from dra_mirror.schema.context import make_context
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.model.records import RESOURCE_CLAIM
from tests.oracle import objects as o
from tests.oracle.system import SETTINGS, ask

GPU = "gpu.nvidia.com"
SLICE = o.slice_("n1-gpu", GPU, "n1", [o.device("gpu-0", capacity={"memory": "80Gi"}, shareable=True)], node_name="n1")  # fmt: skip
SHARES = [o.claim(f"s{i}", results=[o.result("gpu", GPU, "n1", "gpu-0", share_id=f"{i}")]) for i in range(2)]  # fmt: skip
WHO = """query($cluster: String) { whoHolds(device: "gpu.nvidia.com/n1/gpu-0", cluster: $cluster) {
  shareID claim { name } } devicesNamed(device: "gpu-0", cluster: $cluster) { withheldAllocations } }"""


class ClaimDeletedMeanwhile:
    """The store, with claim `gone` deleted between the read of the holds and of the claims."""

    def __init__(self, store: Any, gone: str) -> None:
        self.store, self.gone = store, gone

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def index(self, cluster: str) -> None:
        return None  # answer through the store's batched reads, as over Redis

    async def get(self, keys: Any) -> list[Any]:
        found = await self.store.get(keys)
        return [
            None if k.kind == RESOURCE_CLAIM and k.name == self.gone else r
            for k, r in zip(keys, found, strict=True)
        ]


async def test_a_holding_whose_claim_went_meanwhile_keeps_its_row(scenario):
    await scenario.show(SLICE, *SHARES)
    system = scenario.system
    torn = ClaimDeletedMeanwhile(system.watcher.memory, "s0")
    answer = await ask(system.schema, torn, system.cluster, WHO)
    assert answer.errors == []
    rows = sorted((h["shareID"], h["claim"]) for h in answer.data["whoHolds"])
    assert rows == [("0", None), ("1", {"name": "s1"})]


async def test_a_holding_outside_the_scope_is_withheld_not_dangling(scenario):
    await scenario.show(SLICE, *SHARES, o.claim("s2", "team-b", results=[o.result("gpu", GPU, "n1", "gpu-0", share_id="2")]))  # fmt: skip
    system = scenario.system
    scope = AccessScope.parse([f"{system.cluster}/team-a"])
    context = make_context(system.watcher.memory, settings=SETTINGS, scope=scope)
    result = await system.schema.execute(WHO, variable_values={"cluster": system.cluster}, context_value=context)  # fmt: skip
    assert result.errors is None
    assert sorted(h["claim"]["name"] for h in result.data["whoHolds"]) == ["s0", "s1"]
    assert result.data["devicesNamed"] == [{"withheldAllocations": 1}]


async def test_the_mcp_tool_says_a_device_is_held_where_the_caller_cannot_see(scenario):
    from dra_mirror.service.mcp import tools
    from dra_mirror.service.questions.asker import Asker
    from dra_mirror.service.questions.local import LocalQuestions
    from dra_mirror.service.questions.remote import RemoteQuestions

    other = o.claim("s2", "team-b", results=[o.result("gpu", GPU, "n1", "gpu-0", share_id="2")])
    await scenario.show(SLICE, other)
    system = scenario.system
    scope = AccessScope.parse([f"{system.cluster}/team-a"])

    async def asked(document: str, variables: dict[str, Any]) -> dict[str, Any]:
        context = make_context(system.watcher.memory, settings=SETTINGS, scope=scope)
        result = await system.schema.execute(document, variable_values=variables, context_value=context)  # fmt: skip
        assert result.errors is None
        return result.data

    for questions in (
        RemoteQuestions(asked),
        LocalQuestions(Asker.over(system.watcher.memory, scope)),
    ):
        answer = (await tools.who_holds(questions, "gpu-0", system.cluster)).model_dump(
            mode="json", by_alias=True
        )
        assert answer["holdings"] == []  # as whoHolds: no holder the caller may see
        assert answer["answer"] == "held-elsewhere"
        assert answer["devices"] == [
            {
                "cluster": system.cluster,
                "node": "n1",
                "device": f"{GPU}/n1/gpu-0",
                "uuid": None,
                "model": None,
                "status": "SHARED",
                "heldElsewhere": 1,
            }
        ]
