"""DeviceTaintRules as the graph answers them: each taint with its source, the pool counts,
and explainClaim's verdict for a claim that does not tolerate a rule's taint."""

from __future__ import annotations

from tests.oracle import objects as o
from tests.oracle.machine import at
from tests.oracle.system import ask

GPU = "gpu.nvidia.com"
SLICE = o.slice_("n1-gpu", GPU, "n1", [o.device("gpu-0", taints=[("gpu.nvidia.com/xid", "79", "None")])], node_name="n1")  # fmt: skip
RULE = o.taint_rule("drain-n1", "example.com/drain", "NoExecute", driver=GPU, pool="n1")

SOURCES = """query($cluster: String) {
  devices(cluster: $cluster) { nodes { name
    taintSources { key value effect rule unavailable } } }
  resourcePools(cluster: $cluster) { poolName unavailableDevices availableDevices }
}"""
EXPLAIN = """query($cluster: String!) {
  explainClaim(cluster: $cluster, namespace: "team-a", name: "wants") {
    verdict requests { verdict } } }"""


async def test_each_taint_says_where_it_comes_from_and_what_it_means(each_store):
    await each_store.show(SLICE, RULE)
    for store in each_store.system.watcher.stores():
        answer = await ask(each_store.system.schema, store, each_store.system.cluster, SOURCES)
        assert answer.errors == []
        [device] = answer.data["devices"]["nodes"]
        assert device["taintSources"] == [
            {
                "key": "gpu.nvidia.com/xid",
                "value": "79",
                "effect": "None",
                "rule": None,
                "unavailable": False,
            },
            {
                "key": "example.com/drain",
                "value": "",
                "effect": "NoExecute",
                "rule": "drain-n1",
                "unavailable": True,
            },
        ]
        assert answer.data["resourcePools"] == [
            {"poolName": "n1", "unavailableDevices": 1, "availableDevices": 0}
        ]


async def test_explain_claim_blames_a_rule_taint_the_claim_does_not_tolerate(scenario):
    await scenario.show(o.device_class("gpu", GPU), SLICE, o.claim("wants"), RULE)
    system = scenario.system
    answer = await ask(system.schema, system.watcher.memory, system.cluster, EXPLAIN)
    assert answer.errors == []
    assert answer.data["explainClaim"]["requests"] == [{"verdict": "TAINTED"}]
    await scenario.show(gone=(RULE,))  # the admin lifts it: the device can be given
    answer = await ask(system.schema, system.watcher.memory, system.cluster, EXPLAIN)
    assert answer.data["explainClaim"]["requests"] == []  # nothing keeps it from allocation


INVENTORY = """query($cluster: String!, $device: String!, $from: DateTime!, $to: DateTime!) {
  deviceHistory(device: $device, from: $from, to: $to, cluster: $cluster) {
    inventory { data since until endReason } } }"""


async def test_history_keeps_a_rule_taint_arriving_and_leaving(history_scenario):
    await history_scenario.show(SLICE)
    await history_scenario.show(RULE)
    await history_scenario.show(gone=(RULE,))
    system = history_scenario.system
    await system.device_history([], start=at(0), end=at(9))  # the writer has drained
    answer = await system.run(
        system.watcher.memory, INVENTORY, device=f"{GPU}/n1/gpu-0", **{"from": at(0), "to": at(9)}
    )
    assert answer.errors == []
    [timeline] = answer.data["deviceHistory"]
    versions = [([t.get("rule") for t in v["data"]["taints"]], v["endReason"]) for v in timeline["inventory"]]  # fmt: skip
    assert versions == [([None], "changed"), ([None, "drain-n1"], "changed"), ([None], None)]


async def test_free_devices_in_chat_say_which_taints_keep_claims_off(scenario):
    from dra_mirror.service.questions.chatops import ask_free
    from dra_mirror.service.slack.blocks import render_free

    await scenario.show(SLICE, RULE)
    system = scenario.system

    async def asked(document: str, variables: dict) -> dict:
        rest = {k: v for k, v in variables.items() if k != "cluster"}
        answer = await ask(system.schema, system.watcher.memory, system.cluster, document, **rest)
        assert answer.errors == []
        return answer.data

    free = await ask_free(asked, None, system.cluster)
    assert [(d.device, d.taints) for d in free.devices] == [
        ("gpu-0", ["example.com/drain:NoExecute (rule drain-n1)"])
    ]  # the xid taint of effect None keeps nothing off
    assert "tainted: example.com/drain:NoExecute (rule drain-n1)" in str(render_free(free))
