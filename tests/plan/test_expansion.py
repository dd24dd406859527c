"""What the controllers would create from manifests: pods per replica, claims named as the
resource-claim controller names them."""

from __future__ import annotations

from dra_mirror.service.diagnostics.expansion import claim_generate_name, expand
from dra_mirror.service.sim.claim_controller import generate_name


def _pod_spec(entry: dict) -> dict:
    return {"containers": [{"name": "c", "image": "x"}], "resourceClaims": [entry]}


def test_replicas_and_names_as_each_controller_makes_them():
    template = {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
    docs = [
        {"kind": "Deployment", "metadata": {"name": "web", "namespace": "ml"},
         "spec": {"replicas": 3, "template": {"spec": _pod_spec(template)}}},
        {"kind": "StatefulSet", "metadata": {"name": "db"},
         "spec": {"replicas": 2, "template": {"spec": _pod_spec(template)}}},
        {"kind": "Job", "metadata": {"name": "batch", "namespace": "ml"},
         "spec": {"parallelism": 5, "completions": 2, "completionMode": "Indexed",
                  "template": {"spec": _pod_spec(template)}}},
        {"kind": "Pod", "metadata": {"name": "solo", "namespace": "ml"},
         "spec": _pod_spec({"name": "gpu", "resourceClaimName": "shared"})},
        {"kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": {}},
        {"kind": "ConfigMap", "metadata": {"name": "cfg"}},
    ]  # fmt: skip
    found = expand(docs)
    names = [(p.kind, p.namespace, p.name, p.replica) for p in found.pods]
    assert names == [
        ("Deployment", "ml", "web-??????????-?????", 0),
        ("Deployment", "ml", "web-??????????-?????", 1),
        ("Deployment", "ml", "web-??????????-?????", 2),
        ("StatefulSet", "default", "db-0", 0),
        ("StatefulSet", "default", "db-1", 1),
        ("Job", "ml", "batch-0-?????", 0),  # parallelism capped by completions
        ("Job", "ml", "batch-1-?????", 1),
        ("Pod", "ml", "solo", 0),
    ]
    db0 = found.pods[3].claims[0]
    assert (db0.name, db0.template, db0.shared) == ("db-0-gpu-?????", "one-gpu", False)
    solo = found.pods[-1].claims[0]
    assert (solo.name, solo.shared) == ("shared", True)
    assert [s.split(":")[0] for s in found.skipped] == [
        "DaemonSet default/agent",
        "ConfigMap default/cfg",
    ]


def test_long_names_are_cut_as_the_claim_controller_cuts_them():
    pod, claim = "p" * 50, "c" * 20
    assert claim_generate_name(pod, claim) == generate_name(pod, claim)  # the simulator's own
    assert len(claim_generate_name(pod, claim)) <= 57
    assert claim_generate_name("web-0", "gpu") == "web-0-gpu-"


def test_a_malformed_workload_is_skipped_with_the_reason():
    found = expand([{"kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": -1}}])
    assert not found.pods
    assert "negative" in found.skipped[0]
