"""Validation limits of ../shared/docs/dra-api.md §2: each limit accepts its maximum and refuses one more."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from dra_mirror.service.sim.store import ApiError, ClusterStore
from tests.sim.conftest import claim_body, slice_body


def sliced(devices: int = 2, **device_extra) -> dict:
    body = slice_body("s", "node-0", devices)
    for device in body["spec"]["devices"]:
        device.update(copy.deepcopy(device_extra))
    return body


def with_spec(body: dict, **changes) -> dict:
    body = copy.deepcopy(body)
    for key, value in changes.items():
        if value is None:
            body["spec"].pop(key, None)
        else:
            body["spec"][key] = value
    return body


def requests(n: int, **exact) -> dict:
    body = claim_body("c")
    body["spec"]["devices"]["requests"] = [
        {"name": f"r{i}", "exactly": {"deviceClassName": "gpu.x.com", **exact}} for i in range(n)
    ]
    return body


def many_attributes(n: int) -> dict:
    return {f"a{i}": {"int": i} for i in range(n)}


TAINT = {"taints": [{"key": "k", "effect": "NoSchedule"}]}

# (id, plural, valid body, invalid body, field of the cause)
CASES: list[tuple[str, str, Callable[[], dict], Callable[[], dict], str]] = [
    ("devices-128", "resourceslices", lambda: sliced(128), lambda: sliced(129), "spec.devices"),
    (
        "devices-64-with-taints",
        "resourceslices",
        lambda: sliced(64, **TAINT),
        lambda: sliced(65, **TAINT),
        "spec.devices",
    ),
    (
        "attributes-and-capacities-32",
        "resourceslices",
        lambda: sliced(1, attributes=many_attributes(31)),
        lambda: sliced(1, attributes=many_attributes(32)),
        "spec.devices[0]",
    ),
    (
        "one-node-selection",
        "resourceslices",
        lambda: with_spec(sliced(), nodeName=None, allNodes=True),
        lambda: with_spec(sliced(), allNodes=True),
        "spec",
    ),
    (
        "no-node-selection",
        "resourceslices",
        lambda: with_spec(sliced(), nodeName=None, allNodes=True),
        lambda: with_spec(sliced(), nodeName=None),
        "spec",
    ),
    (
        "counters-or-devices",
        "resourceslices",
        lambda: with_spec(sliced(), devices=None, sharedCounters=[{"name": "cs", "counters": {}}]),
        lambda: with_spec(sliced(), sharedCounters=[{"name": "cs", "counters": {}}]),
        "spec",
    ),
    (
        "semver-version-attribute",
        "resourceslices",
        lambda: sliced(1, attributes={"driverVersion": {"version": "580.159.4"}}),
        lambda: sliced(1, attributes={"driverVersion": {"version": "580.159"}}),
        "spec.devices[0].attributes[driverVersion].version",
    ),
    (
        "string-attribute-64",
        "resourceslices",
        lambda: sliced(1, attributes={"s": {"string": "x" * 64}}),
        lambda: sliced(1, attributes={"s": {"string": "x" * 65}}),
        "spec.devices[0].attributes[s].string",
    ),
    (
        "requests-32",
        "resourceclaims",
        lambda: requests(32),
        lambda: requests(33),
        "spec.devices.requests",
    ),
    (
        "count-positive",
        "resourceclaims",
        lambda: requests(1, count=1),
        lambda: requests(1, count=0),
        "spec.devices.requests[0].exactly.count",
    ),
    (
        "no-count-with-all",
        "resourceclaims",
        lambda: requests(1, allocationMode="All"),
        lambda: requests(1, allocationMode="All", count=2),
        "spec.devices.requests[0].exactly.count",
    ),
    (
        "exactly-xor-first-available",
        "resourceclaims",
        lambda: requests(1),
        lambda: _both_request_kinds(),
        "spec.devices.requests[0]",
    ),
    (
        "name-format",
        "resourceclaims",
        lambda: claim_body("ok-name"),
        lambda: claim_body("Bad_Name"),
        "metadata.name",
    ),
]


def _both_request_kinds() -> dict:
    body = requests(1)
    body["spec"]["devices"]["requests"][0]["firstAvailable"] = [
        {"name": "a", "deviceClassName": "gpu.x.com"}
    ]
    return body


@pytest.mark.parametrize(
    ("plural", "valid", "invalid", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_limit(plural: str, valid: Callable[[], dict], invalid: Callable[[], dict], field: str):
    store = ClusterStore("v")
    store.create(plural, valid())
    store.delete(
        plural, "default", "s" if plural == "resourceslices" else valid()["metadata"]["name"]
    )
    with pytest.raises(ApiError) as error:
        store.create(plural, invalid())
    assert error.value.code == 422
    assert field in {c["field"] for c in error.value.details["causes"]}


def test_reserved_for_256():
    store = ClusterStore("v")
    store.create("resourceclaims", claim_body("c"))
    allocation = {
        "devices": {"results": [{"request": "gpu", "driver": "d.x", "pool": "p", "device": "g"}]}
    }

    def reserved(n: int) -> dict:
        refs = [{"resource": "pods", "name": f"p{i}", "uid": f"uid-{i}"} for i in range(n)]
        return {"status": {"allocation": allocation, "reservedFor": refs}}

    store.patch("resourceclaims", "default", "c", reserved(256), subresource="status")
    with pytest.raises(ApiError) as error:
        store.patch("resourceclaims", "default", "c", reserved(257), subresource="status")
    assert {c["field"] for c in error.value.details["causes"]} == {"status.reservedFor"}


def test_pod_claim_references_and_template_metadata():
    store = ClusterStore("v")
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "nic"}]}}],
        },
    }
    with pytest.raises(ApiError) as error:
        store.create("pods", pod)
    assert (
        error.value.details["causes"][0]["field"] == "spec.containers[0].resources.claims[0].name"
    )
    template = {
        "metadata": {"name": "t"},
        "spec": {"metadata": {"name": "x"}, "spec": claim_body("c")["spec"]},
    }
    with pytest.raises(ApiError) as error:
        store.create("resourceclaimtemplates", template)
    assert error.value.details["causes"][0]["field"] == "spec.metadata"


def test_claim_spec_is_immutable_but_defaults_do_not_count():
    store = ClusterStore("v")
    made = store.create("resourceclaims", claim_body("c"))
    resent = claim_body("c")  # without the defaulted allocationMode/count
    resent["metadata"]["resourceVersion"] = made["metadata"]["resourceVersion"]
    resent["metadata"]["labels"] = {"a": "b"}
    assert store.update("resourceclaims", resent)["metadata"]["labels"] == {"a": "b"}
    changed = store.get("resourceclaims", "default", "c")
    changed["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    with pytest.raises(ApiError) as error:
        store.update("resourceclaims", changed)
    assert error.value.details["causes"][0]["field"] == "spec"
