"""PodGroups beside the oracle (KEP-5729), over each store: a group's claims (named, or
generated from a template and recorded in its status), its pods, the claims it holds and
whether it holds them idle — a claim reserved for a PodGroup stays reserved until the group
is deleted, even with no pod of the group left — and the groups each claim names."""

from __future__ import annotations

from tests.oracle import objects as o

GPU = "gpu.nvidia.com"
SLICE = o.slice_("n1-gpu", GPU, "n1", [o.device("gpu-0"), o.device("gpu-1")], node_name="n1")
NAMED = o.claim("shared", results=[o.result("gpu", GPU, "n1", "gpu-0")], node_name="n1",
                podgroup="trainers")  # fmt: skip
GENERATED = o.claim("trainers-gen-x7k2p", results=[o.result("gpu", GPU, "n1", "gpu-1")],
                    node_name="n1", podgroup="trainers")  # fmt: skip
GROUP = o.pod_group("trainers", claim="shared")
WITH_TEMPLATE = o.pod_group("trainers", template="gpu-template", generated="trainers-gen-x7k2p")
AREAS = ("podGroup", "podGroups", "claim.podGroups", "claim.idle", "claim.consumers")


def member(name: str, phase: str) -> dict:
    return o.pod(name, claims=["shared"], phase=phase, node_name="n1", podgroup="trainers")


async def test_a_group_and_its_claims_agree_with_the_oracle_as_its_pods_come_and_go(each_store):
    await each_store.show(SLICE, NAMED, GROUP, member("w0", "Running"), member("w1", "Pending"))
    truth = each_store.truth().pod_groups[("team-a", "trainers")]
    assert (truth.held, truth.idle_held) == (("shared",), False)  # the oracle's own reading
    assert await each_store.mismatches(*AREAS) == []

    await each_store.show(member("w0", "Succeeded"))  # the job is done, the group stays
    assert each_store.truth().pod_groups[("team-a", "trainers")].idle_held
    assert await each_store.mismatches(*AREAS) == []

    await each_store.show(gone=(member("w0", "Succeeded"), member("w1", "Pending")))
    assert each_store.truth().pod_groups[("team-a", "trainers")].pods == ()
    assert await each_store.mismatches(*AREAS) == []


async def test_a_claim_generated_for_the_group_is_found_through_its_status(each_store):
    await each_store.show(SLICE, GENERATED, WITH_TEMPLATE)
    truth = each_store.truth()
    assert truth.claim_groups[("team-a", "trainers-gen-x7k2p")] == ("trainers",)
    assert truth.pod_groups[("team-a", "trainers")].idle_held  # no pod at all
    assert await each_store.mismatches(*AREAS) == []

    await each_store.show(gone=(WITH_TEMPLATE,))  # deleted: the claim names no group it sees
    assert each_store.truth().claim_groups[("team-a", "trainers-gen-x7k2p")] == ()
    assert await each_store.mismatches(*AREAS) == []
