"""explainClaim on the simulator's shipped `demo` world: the mirror's records of cluster `east`
(normalized and indexed by the model, as the reactor would) diagnose what the scenario built —
one trainer replica Pending because its node's GPUs are held (one of them idle), the idle
hand-made notebook claim, and healthy allocated claims."""

from __future__ import annotations

from dra_mirror.service.diagnostics.cluster import eligible_nodes
from tests.diagnostics.conftest import Cluster


def test_the_pending_trainer_replica(east: Cluster) -> None:
    [waiting] = [p for p in east.pods if p.phase == "Pending"]
    assert waiting.meta.name.startswith("trainer-") and waiting.reason == "Unschedulable"
    claim = east.claim("training", waiting.meta.name)
    # The deployment is pinned to east-h200-1 by nodeSelector, which the pod's record carries
    # (the product derives the eligible nodes from it: service.questions.diagnosis).
    assert waiting.node_selector == {"kubernetes.io/hostname": "east-h200-1"}
    assert eligible_nodes(waiting.node_selector, east.nodes) == ["east-h200-1"]
    d = east.explain(claim, eligible_nodes=["east-h200-1"])
    assert d.verdict == "all-held"
    [v] = d.requests
    # east-h200-1: four H200s — one idle notebook claim, two trainers, one cut into MIG.
    assert (v.class_matched, v.selector_matches[0][1], v.free_or_shareable) == (4, 4, 0)
    assert [h.claim.name.split("-")[0] for h in d.holders] == [
        "mig",
        "notebook",
        "trainer",
        "trainer",
    ]
    assert [h.claim.name for h in d.holders if h.idle] == ["notebook-gpu"]
    others = ", ".join(f"{h.claim.namespace}/{h.claim.name}" for h in d.holders if not h.idle)
    # The pin is stated, and the H200s free on the node the pod may not use are named.
    assert d.message.endswith(
        f"held by research/notebook-gpu (idle), {others}; 1 of them idle; its pods may use "
        f"1 of {len(east.nodes)} nodes (east-h200-1) by pod {waiting.meta.name}: nodeSelector "
        "kubernetes.io/hostname=east-h200-1; matching devices are free on nodes its pods may "
        "not use: east-h200-0"
    )
    # Not told the pin, the pure diagnosis names the devices free on east-h200-0 are named, and the pod's state.
    loose = east.explain(claim)
    assert loose.verdict == "allocatable"
    assert "on node east-h200-0" in loose.message and "is Unschedulable" in loose.message


def test_the_idle_notebook_claim(east: Cluster) -> None:
    d = east.explain(east.claim("research", "notebook-gpu"))
    assert d.verdict == "idle"
    assert (
        d.message == "allocated (gpu.nvidia.com/east-h200-1/gpu-0) but no consumer pod is Running"
    )


def test_healthy_claims_pass_the_checklist(east: Cluster) -> None:
    shared = east.explain(east.claim("inference", "shared-h200"))
    assert shared.verdict == "ok"
    assert len(shared.pods) == 3  # the three inference-server replicas share it
    assert all(c.ok for c in shared.checks)
    mig = east.explain(east.claim("research", "mig-worker-"))
    assert mig.verdict == "ok"
    assert mig.checks[2].detail.count("-mig-") == 3
