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
    from dra_mirror.service.questions.remote import RemoteQuestions
    from dra_mirror.service.slack.replies import render_free

    await scenario.show(SLICE, RULE)
    system = scenario.system

    async def asked(document: str, variables: dict) -> dict:
        rest = {k: v for k, v in variables.items() if k != "cluster"}
        answer = await ask(system.schema, system.watcher.memory, system.cluster, document, **rest)
        assert answer.errors == []
        return answer.data

    free = await RemoteQuestions(asked).free(None, system.cluster)
    assert [(d.device, d.taints) for d in free.devices] == [
        ("gpu-0", ["example.com/drain:NoExecute (rule drain-n1)"])
    ]  # the xid taint of effect None keeps nothing off
    assert "tainted: example.com/drain:NoExecute (rule drain-n1)" in str(render_free(free))


# 1.33/1.34: v1alpha3 rules may name a DeviceClass and carry CEL selectors; the slices and the
# class are served at v1beta1 there, the claims too.
MODEL = 'device.attributes["gpu.nvidia.com"].model'


def _gpu(name: str, model: str | None) -> dict:
    made = o.device(name)
    if model is not None:
        made["attributes"]["model"] = {"string": model}
    return made


OLD_SLICE = o.render(
    o.slice_("n2-gpu", GPU, "n2", [_gpu("gpu-0", "a100"), _gpu("gpu-1", "h100"), _gpu("gpu-2", None)], node_name="n2"),
    "v1beta1",
)  # fmt: skip
A100 = {
    **o.device_class("a100", GPU),
    "apiVersion": "resource.k8s.io/v1beta1",
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}},
                           {"cel": {"expression": f'{MODEL} == "a100"'}}]},
}  # fmt: skip
BY_CLASS = o.taint_rule("by-class", "example.com/a100", "NoExecute", device_class_name="a100")
BY_CEL = o.taint_rule("by-cel", "example.com/h100", "NoSchedule", cel=(f'{MODEL} == "h100"',))
NO_CLASS = o.taint_rule("no-class", "example.com/none", "NoExecute", device_class_name="absent")
BOTH = o.taint_rule("both", "example.com/both", "NoExecute", device_class_name="a100", cel=(f'{MODEL} == "h100"',))  # fmt: skip
HELD_ELSEWHERE = o.render(
    o.claim("holds-gone", results=[o.result("gpu", GPU, "n2", "gpu-9")], node_name="n2"), "v1beta1"
)
EVERY = o.taint_rule("every", "example.com/every", "NoExecute", cel=("true",))
BY_NAME = o.taint_rule("by-name", "example.com/by-name", "NoExecute", device_name="gpu-9")
AREAS = ("device", "counts", "pool")


async def test_a_1_33_rule_taints_only_the_devices_its_class_and_selectors_pick(each_store):
    await each_store.show(OLD_SLICE, A100, BY_CLASS, BY_CEL, NO_CLASS, BOTH)
    assert await each_store.mismatches(*AREAS) == []
    for store in each_store.system.watcher.stores():
        answer = await ask(each_store.system.schema, store, each_store.system.cluster, SOURCES)
        assert answer.errors == []
        rules = {d["name"]: [t["rule"] for t in d["taintSources"]] for d in answer.data["devices"]["nodes"]}  # fmt: skip
        # gpu-2 has no model: the expressions fail on it and select it not
        assert rules == {"gpu-0": ["by-class"], "gpu-1": ["by-cel"], "gpu-2": []}
        assert answer.data["resourcePools"] == [
            {"poolName": "n2", "unavailableDevices": 2, "availableDevices": 1}
        ]


async def test_a_class_change_re_matches_the_rules_naming_it(scenario):
    await scenario.show(OLD_SLICE, BY_CLASS)  # the class does not exist yet: no device
    assert await scenario.mismatches(*AREAS) == []
    assert scenario.truth().devices[(GPU, "n2", "gpu-0")].taints == ()
    await scenario.show(A100)
    assert await scenario.mismatches(*AREAS) == []
    h100 = {**A100, "spec": {"selectors": [{"cel": {"expression": f'{MODEL} == "h100"'}}]}}
    await scenario.show(h100)
    assert await scenario.mismatches(*AREAS) == []
    assert [k[2] for k, d in scenario.truth().devices.items() if d.taints] == ["gpu-1"]
    await scenario.show(gone=(h100,))
    assert await scenario.mismatches(*AREAS) == []


HOLDS = """query($cluster: String) {
  whoHolds(device: "gpu.nvidia.com/n2/gpu-9", cluster: $cluster) {
    device { published taintSources { rule } } } }"""


async def test_a_1_33_selector_rule_taints_no_device_that_no_slice_publishes(scenario):
    await scenario.show(OLD_SLICE, HELD_ELSEWHERE, EVERY, BY_NAME)
    assert await scenario.mismatches(*AREAS) == []
    truth = scenario.truth().devices
    assert [t[0] for t in truth[(GPU, "n2", "gpu-9")].taints] == ["example.com/by-name"]
    assert [t[0] for t in truth[(GPU, "n2", "gpu-0")].taints] == ["example.com/every"]
    system = scenario.system
    answer = await ask(system.schema, system.watcher.memory, system.cluster, HOLDS)
    assert answer.errors == []
    assert answer.data["whoHolds"] == [
        {"device": {"published": False, "taintSources": [{"rule": "by-name"}]}}
    ]
