"""What the API server would refuse, found offline: the served version's request shape, CEL
that does not compile, counts and list limits, names — in `lint` (no cluster needed) and in
`plan` (never "placeable")."""

from __future__ import annotations

from typing import Any

import pytest

from dra_mirror.service.diagnostics.api_validation import problems
from dra_mirror.service.diagnostics.lint import lint_manifests


def claim(requests: list[dict[str, Any]], *, version: str = "v1", **meta: str) -> dict:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": meta or {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": requests}},
    }


def exactly(**fields: Any) -> dict:
    return {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", **fields}}


def rules(doc: dict) -> list[tuple[str, str]]:
    return [(p.rule, p.path) for p in problems(doc)]


def test_a_v1beta1_shaped_request_under_v1_is_refused() -> None:
    flat = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}
    found = problems(claim([flat]))
    assert [(p.rule, p.path) for p in found] == [
        ("api-invalid", "spec.devices.requests[0].deviceClassName"),
        ("api-invalid", "spec.devices.requests[0]"),
    ]
    assert "resource.k8s.io/v1beta1's request shape" in found[0].message
    assert problems(claim([flat], version="v1beta1")) == []  # v1beta1's own shape


def test_a_cel_syntax_error_is_cel_invalid_in_offline_lint() -> None:
    broken = claim([exactly(selectors=[{"cel": {"expression": "device.driver == "}}])])
    [finding] = lint_manifests([broken])  # no cluster facts: offline
    assert (finding.rule, finding.severity) == ("cel-invalid", "error")
    assert finding.path == "spec.devices.requests[0].exactly.selectors[0].cel.expression"
    assert finding.message.startswith("compilation failed: ")
    fine = claim([exactly(selectors=[{"cel": {"expression": "device.driver == 'x'"}}])])
    assert lint_manifests([fine]) == []


def test_a_generate_name_claim_is_valid() -> None:
    assert problems(claim([exactly()], generateName="train-", namespace="ns")) == []
    assert rules(claim([exactly()], namespace="ns")) == [("api-invalid", "metadata.name")]


@pytest.mark.parametrize(
    ("requests", "path"),
    [
        ([exactly(count=0)], "spec.devices.requests[0].exactly.count"),
        ([exactly(allocationMode="Some")], "spec.devices.requests[0].exactly.allocationMode"),
        ([exactly(allocationMode="All", count=2)], "spec.devices.requests[0].exactly.count"),
        ([exactly(), exactly()], "spec.devices.requests[1].name"),
        ([{**exactly(), "name": "GPU_0"}], "spec.devices.requests[0].name"),
        ([exactly() | {"name": f"r{i}"} for i in range(33)], "spec.devices.requests"),
        ([{"name": "gpu", "firstAvailable": [{"name": f"s{i}", "deviceClassName": "c"}
                                              for i in range(9)]}],
         "spec.devices.requests[0].firstAvailable"),
        ([exactly(tolerations=[{"operator": "Exists"}] * 17)],
         "spec.devices.requests[0].exactly.tolerations"),
        ([{"name": "gpu"}], "spec.devices.requests[0]"),
        ([exactly(deviceClassName="")], "spec.devices.requests[0].exactly.deviceClassName"),
    ],
)  # fmt: skip
def test_counts_limits_and_names(requests: list[dict], path: str) -> None:
    assert ("api-invalid", path) in rules(claim(requests))


def test_a_template_is_read_at_its_inner_spec() -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "x"}]}}},
    }
    assert ("api-invalid", "spec.spec.devices.requests[0].deviceClassName") in rules(template)
