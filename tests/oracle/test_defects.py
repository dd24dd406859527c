"""Each known disagreement with the oracle, in the fewest objects that show it.

Every test here fails today and is marked `xfail(strict=True)` with the defect's name
(tests.oracle.known): the fix makes it pass, strict xfail turns that into a failure, and the
fixer removes the mark (and the defect's entry in `known`, which the stateful comparison uses).
A last group checks, without xfail, what the mirror already answers right in the same places.
"""

from __future__ import annotations

from tests.oracle import objects as o
from tests.oracle.documents import CLAIMS
from tests.oracle.machine import at
from tests.oracle.system import System, ask, quiet_schema, simulated_cluster, watched

GPU, NIC = "gpu.nvidia.com", "nic.example.com"
H200 = o.device("gpu-0", uuid="GPU-21f6a090", capacity={"memory": "143771Mi"})
SLICE = o.slice_("n1-gpu", GPU, "n1", [H200], node_name="n1")
HELD = o.claim("train", results=[o.result("gpu", GPU, "n1", "gpu-0")], node_name="n1")


async def test_who_holds_a_device_no_slice_publishes(scenario):
    await scenario.show(HELD)  # the claim was listed before the slices, or outlived them
    assert await scenario.mismatches("whoHolds") == []


async def test_who_holds_a_device_no_slice_publishes_over_redis(redis_scenario):
    await redis_scenario.show(SLICE, HELD)
    await redis_scenario.show(gone=(SLICE,))  # the driver restarted and withdrew its slices
    assert await redis_scenario.mismatches("whoHolds") == []


async def test_a_missing_slice_does_not_erase_the_allocation(scenario):
    other = o.slice_("n2-gpu", GPU, "n2", [o.device("gpu-0")], node_name="n2")
    both = o.claim("train", results=[o.result("gpu", GPU, "n1", "gpu-0"), o.result("gpu", GPU, "n2", "gpu-0")])  # fmt: skip
    await scenario.show(other, both)
    assert await scenario.mismatches("claim.slices") == []


async def test_devices_say_whether_a_slice_publishes_them(scenario):
    await scenario.show(SLICE, o.claim("gone", results=[o.result("gpu", GPU, "n9", "gpu-3")]))
    assert await scenario.mismatches("device.published") == []


async def test_pool_status_counts_as_kep_5677(scenario):
    nic = o.device("eth0", capacity={"bandwidth": "10G"}, shareable=True)
    tainted = o.device("gpu-1", taints=[("gpu.nvidia.com/xid", "79", "NoExecute")])
    shares = [o.claim(f"s{i}", results=[o.result("nic", NIC, "n1", "eth0", share_id=f"{i}", consumed={"bandwidth": "1G"})]) for i in range(2)]  # fmt: skip
    watcher = o.claim("watch", results=[o.result("gpu", GPU, "n1", "gpu-0", admin=True)], admin=True)  # fmt: skip
    await scenario.show(
        o.slice_("n1-gpu", GPU, "n1", [H200, tainted], node_name="n1"),
        o.slice_("n1-nic", NIC, "n1", [nic], node_name="n1"),
        o.slice_("n2-gpu-a", GPU, "n2", [o.device("gpu-0")], node_name="n2", count=2),
        *shares, watcher,
    )  # fmt: skip
    assert await scenario.mismatches("pools", "pool") == []


async def test_device_taints_include_the_rules_that_select_the_device(each_store):
    await each_store.show(SLICE, HELD)
    rule = o.taint_rule("drain-n1", "example.com/drain", "NoExecute", driver=GPU, pool="n1")
    await each_store.show(rule)
    assert await each_store.mismatches("device.taints", "pools", "pool", "device.status") == []
    await each_store.show(gone=(rule,))  # the admin lifts it
    assert await each_store.mismatches("device.taints", "pools", "pool") == []


async def test_remaining_capacity_of_a_shared_h200(each_store):
    scenario = each_store
    shared = o.device("gpu-0", capacity={"memory": "143771Mi"}, shareable=True)
    claims = [
        o.claim("a", results=[o.result("gpu", GPU, "n1", "gpu-0", share_id="1", consumed={"memory": "40Gi"})]),
        o.claim("b", results=[o.result("gpu", GPU, "n1", "gpu-0", share_id="2", consumed={"memory": "20Gi"})]),
    ]  # fmt: skip
    await scenario.show(o.slice_("n1-gpu", GPU, "n1", [shared], node_name="n1"), *claims)
    assert await scenario.mismatches("device.remaining") == []


async def test_an_admin_access_claim_leaves_the_device_free(each_store):
    watcher = o.claim("monitor", results=[o.result("gpu", GPU, "n1", "gpu-0", admin=True)], admin=True)  # fmt: skip
    await each_store.show(SLICE, watcher)
    assert await each_store.mismatches("device.status", "device.holders", "counts") == []


async def test_an_admin_access_partition_blocks_no_sibling(scenario):
    devices = [o.device("gpu-0", consumes={"cs": {"mem": "2"}}), o.device("mig-0", consumes={"cs": {"mem": "2"}})]  # fmt: skip
    watcher = o.claim("monitor", results=[o.result("gpu", GPU, "n1", "mig-0", admin=True)], admin=True)  # fmt: skip
    await scenario.show(o.slice_("n1-gpu", GPU, "n1", devices, node_name="n1", counters={"cs": {"mem": "2"}}), watcher)  # fmt: skip
    assert await scenario.mismatches("device.status") == []


async def test_the_consumers_of_a_claim_reserved_for_a_podgroup_are_its_pods(scenario):
    claim = o.claim("shared", results=[o.result("gpu", GPU, "n1", "gpu-0")], podgroup="trainers")
    await scenario.show(SLICE, claim, o.pod("w0", podgroup="trainers", phase="Running"))
    assert await scenario.mismatches("claim.consumers") == []


async def test_a_claim_whose_podgroup_runs_no_pod_is_idle(scenario):
    claim = o.claim("shared", results=[o.result("gpu", GPU, "n1", "gpu-0")], podgroup="trainers")
    await scenario.show(SLICE, claim, o.pod("w0", podgroup="trainers", phase="Succeeded"))
    assert await scenario.mismatches("claim.idle") == []


async def test_a_claim_whose_pods_are_gone_is_idle_in_a_cluster_without_pods(tmp_path):
    # Through the real watcher: the simulator serves the claim and no pod at all.
    gone = o.claim("train", results=[o.result("gpu", GPU, "n1", "gpu-0")], reserved=[("p", "uid-p")])  # fmt: skip
    store = simulated_cluster("no-pods", [SLICE, gone])
    async with watched([store], versions=("v1",), directory=tmp_path) as memory:
        answer = await ask(quiet_schema(), memory, "no-pods", CLAIMS)
    assert answer.data["resourceClaims"]["nodes"][0]["idle"] is True


async def test_claim_events_carry_the_idle_of_their_moment(scenario):
    await scenario.show(SLICE, o.claim("train"))  # the first event: pending, not idle
    await scenario.show(HELD)  # allocated, no consumer: idle
    assert await scenario.mismatches("live.claim") == []


async def test_a_pod_starting_ends_its_claims_idleness_for_subscribers(scenario):
    reserved = o.claim("train", results=[o.result("gpu", GPU, "n1", "gpu-0")], reserved=[("p", "uid-p")])  # fmt: skip
    await scenario.show(SLICE, reserved, o.pod("p", uid="uid-p", claims=["train"], phase="Pending"))
    await scenario.show(o.pod("p", uid="uid-p", claims=["train"], phase="Running"))
    assert await scenario.mismatches("live.claim") == []


async def test_history_knows_the_uuid_of_a_device_held_before_its_slice(history_scenario):
    await history_scenario.show(HELD)
    await history_scenario.show(SLICE)
    system = history_scenario.system
    held = await system.who_held(["GPU-21f6a090"], [at(2.5)])
    assert [h["claim"] for h in held[("GPU-21f6a090", at(2.5))].data["whoHeld"]] == ["train"]


async def test_a_takeover_keeps_the_holdings_of_a_quiet_cluster(history_scenario):
    await history_scenario.show(SLICE, HELD)
    history_scenario.step += 5  # a quiet cluster, watched all along
    await history_scenario.handover()
    system = history_scenario.system
    held = await system.who_held([f"{GPU}/n1/gpu-0"], [at(4)])
    assert [h["claim"] for h in held[(f"{GPU}/n1/gpu-0", at(4))].data["whoHeld"]] == ["train"]
    timeline = await system.device_history([f"{GPU}/n1/gpu-0"], start=at(0), end=at(9))
    spans = timeline[f"{GPU}/n1/gpu-0"].data["deviceHistory"][0]["allocations"]
    assert [(s["since"], s["until"]) for s in spans] == [(at(1).replace(".000", ""), None)]


async def test_who_held_by_uuid_stays_in_the_cluster_asked(history_scenario, history):
    # The same GPU, moved from cluster `east` to this one: east's holding is not this one's.
    east = await System.start("east-" + history_scenario.system.cluster, history=history, at=at(0))
    try:
        await east.apply([("ADDED", SLICE), ("ADDED", HELD)], at=at(1))
        await history_scenario.show(SLICE)
        held = await history_scenario.system.who_held(["GPU-21f6a090"], [at(1.5)])
        assert held[("GPU-21f6a090", at(1.5))].data["whoHeld"] == []
        timeline = await history_scenario.system.device_history(["GPU-21f6a090"], start=at(0), end=at(9))  # fmt: skip
        assert [t["allocations"] for t in timeline["GPU-21f6a090"].data["deviceHistory"]] == [[]]
    finally:
        await east.close()


# --- what is right already, in the same places ----------------------------------------------


SERVED = ("devices", "device.status", "device.holders", "device.remaining", "device.taints",
          "device.uuid", "device.node", "counts", "claims", "claim", "whoHolds", "slice")  # fmt: skip


async def test_shared_counters_block_siblings_as_the_oracle_says(each_store):
    chosen = each_store
    devices = [o.device("gpu-0", consumes={"cs": {"mem": "4"}}), o.device("mig-a", consumes={"cs": {"mem": "2"}}), o.device("mig-b", consumes={"cs": {"mem": "2"}})]  # fmt: skip
    await chosen.show(o.slice_("n1-gpu", GPU, "n1", devices, node_name="n1", counters={"cs": {"mem": "4"}}))  # fmt: skip
    await chosen.show(o.claim("a", results=[o.result("gpu", GPU, "n1", "mig-a")]))
    truth = chosen.truth()
    assert {k[2]: d.status for k, d in truth.devices.items()} == {"gpu-0": "blocked", "mig-a": "held", "mig-b": "free"}  # fmt: skip
    assert await chosen.mismatches(*SERVED) == []


async def test_a_relist_replaces_the_state_and_a_new_generation_replaces_the_devices(scenario):
    await scenario.show(SLICE, HELD)
    regenerated = o.slice_("n1-gpu", GPU, "n1", [o.device("gpu-1", uuid="GPU-2")], generation=2, node_name="n1")  # fmt: skip
    scenario.objects[scenario.key(regenerated)] = regenerated
    scenario.objects.pop(scenario.key(HELD))
    scenario.step += 1
    await scenario.system.relist("ResourceSlice", [regenerated], at=scenario.now())
    await scenario.system.relist("ResourceClaim", [], at=scenario.now())
    assert await scenario.mismatches(*SERVED) == []
