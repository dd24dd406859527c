"""The node filter the simulator's scheduler and explainClaim share, on raw pod specs: where the
required node affinity is read from, and what a malformed one admits (nothing)."""

from __future__ import annotations

from dra_mirror.service.diagnostics.node_affinity import admits, required_affinity_of

REQUIRED = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}


def test_required_affinity_is_read_from_the_pod_spec() -> None:
    spec = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": REQUIRED}}
    }
    assert required_affinity_of(spec) == REQUIRED
    preferred_only = {
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    }
    for without in ({}, {"affinity": None}, {"affinity": {"podAffinity": {}}}, preferred_only):
        assert required_affinity_of(without) is None
    assert required_affinity_of({"affinity": "nonsense"}) is None


def test_node_selector_and_affinity_both_apply() -> None:
    labels = {"a": "1", "zone": "z1"}
    assert admits(name="n", labels=labels, node_selector={"zone": "z1"}, required_affinity=REQUIRED)
    assert not admits(
        name="n", labels=labels, node_selector={"zone": "z2"}, required_affinity=REQUIRED
    )
    assert not admits(
        name="n", labels={"zone": "z1"}, node_selector={"zone": "z1"}, required_affinity=REQUIRED
    )
    assert admits(name="n", labels={}, node_selector={}, required_affinity=None)


def test_a_malformed_requirement_admits_no_node() -> None:
    def only(requirement: object) -> dict:
        return {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}

    labels = {"rank": "3"}
    for bad in (
        {"key": "rank", "operator": "Gt", "values": ["1", "2"]},  # Gt takes one value
        {"key": "rank", "operator": "Lt", "values": ["ten"]},  # not an integer
        {"key": "rank", "operator": "Near", "values": ["3"]},  # no such operator
        "rank > 1",  # not a requirement at all
    ):
        assert not admits(name="n", labels=labels, node_selector={}, required_affinity=only(bad))
    assert admits(name="n", labels=labels, node_selector={}, required_affinity=only(
        {"key": "rank", "operator": "Gt", "values": ["1"]}
    ))  # fmt: skip
