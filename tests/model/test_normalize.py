"""normalize(): every real upstream object, version equivalence, and the derived fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from dra_mirror.service.model.normalize import MalformedObject, normalize
from dra_mirror.service.model.records import (
    ALLOCATED,
    DELETING,
    EXTENDED_RESOURCE,
    MANUAL,
    PENDING,
    RESERVED,
    TEMPLATE,
    ClaimRecord,
    NodeRecord,
    PodRecord,
    SliceRecord,
    TemplateRecord,
    key_of,
)
from tests.model.conftest import documents, mirrored


def records_of(path: Path, kind: str | None = None) -> list[Any]:
    return [
        normalize(doc["kind"], doc, cluster="east")
        for doc in mirrored(path)
        if kind is None or doc["kind"] == kind
    ]


def test_every_upstream_file_normalizes(upstream_fixtures: list[Path]) -> None:
    seen_kinds = set()
    for path in upstream_fixtures:
        if path.name == "SOURCES.md":
            continue
        docs = mirrored(path)
        assert docs, f"{path.name} has no mirrored object"
        for doc in docs:
            record = normalize(doc["kind"], doc, cluster="east")
            assert record.meta.cluster == "east"
            assert record.meta.name == doc["metadata"]["name"]
            assert key_of(record).kind == doc["kind"]
            seen_kinds.add(doc["kind"])
    assert seen_kinds == {
        "DeviceClass",
        "ResourceSlice",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "Pod",
    }


def test_v1_and_v1beta1_templates_give_equal_records(fixture_dir: Path) -> None:
    v1 = records_of(
        fixture_dir / "nvidia-quickstart-v1-gpu-test4-mig.yaml", "ResourceClaimTemplate"
    )
    beta = records_of(
        fixture_dir / "nvidia-quickstart-v1beta1-gpu-test4-mig.yaml", "ResourceClaimTemplate"
    )
    assert len(v1) == 1
    assert v1 == beta
    (template,) = v1
    assert isinstance(template, TemplateRecord)
    assert [r.name for r in template.requests] == [
        "mig-1g-5gb-0",
        "mig-1g-5gb-1",
        "mig-2g-10gb",
        "mig-3g-20gb",
    ]
    assert all(r.device_class_name == "mig.nvidia.com" and r.count == 1 for r in template.requests)
    assert template.constraints[0].match_attribute == "gpu.nvidia.com/parentUUID"


@pytest.mark.parametrize(
    "other",
    [
        "k8sapi-1.35-v1beta1.ResourceSlice.yaml",
        "k8sapi-1.35-v1.ResourceSlice.yaml",
        "k8sapi-master-v1.ResourceSlice.yaml",
    ],
)
def test_slice_versions_give_equal_records(fixture_dir: Path, other: str) -> None:
    v1 = records_of(fixture_dir / "k8sapi-1.35-v1.ResourceSlice.json")
    found = records_of(fixture_dir / other)
    if other.startswith("k8sapi-master"):  # 1.37 adds fields 1.35 does not have
        (newer,) = found
        assert isinstance(newer, SliceRecord)
        assert newer.partition_type_attribute == "partitionTypeAttributeValue"
        assert newer.skip_node_operations == ("skipNodeOperationsValue",)
        assert newer.devices[0].node_allocatable_resources is not None
        found = [
            replace(
                newer, partition_type_attribute=None, skip_node_operations=(),
                devices=tuple(replace(d, node_allocatable_resources=None) for d in newer.devices),
            )
        ]  # fmt: skip
    assert found == v1


def test_v1beta1_claim_requests_flatten_like_v1(fixture_dir: Path) -> None:
    (v1,) = records_of(fixture_dir / "k8sapi-1.35-v1.ResourceClaim.json")
    (beta,) = records_of(fixture_dir / "k8sapi-1.35-v1beta1.ResourceClaim.yaml")
    # The upstream round-trip data differs in one value only: the request count (4 vs 5).
    assert (v1.requests[0].count, beta.requests[0].count) == (4, 5)
    aligned = replace(beta, requests=(replace(beta.requests[0], count=4),))
    assert aligned == v1
    assert v1.requests[0].device_class_name == "deviceClassNameValue"
    assert v1.requests[0].first_available[0].name == "nameValue"
    assert v1.allocation is not None and v1.allocation.results[0].share_id == "shareIDValue"


def test_round_trip_slice_fields(fixture_dir: Path) -> None:
    (s,) = records_of(fixture_dir / "k8sapi-1.35-v1.ResourceSlice.json")
    assert isinstance(s, SliceRecord)
    assert s.meta.namespace == ""  # cluster-scoped, whatever the data says
    assert s.pool.generation == 2 and s.pool.resource_slice_count == 3
    device = s.devices[0]
    # Unqualified keys get the driver's domain; the first set member of an attribute wins.
    assert device.attributes["driverValue/attributesKey"].type == "int"
    assert device.capacity["driverValue/capacityKey"].value == "0"
    assert device.capacity["driverValue/capacityKey"].request_policy["validRange"]["min"] == "0"
    assert device.shareable and device.node_name == "nodeNameValue"
    assert device.consumes_counters[0].counters == {"countersKey": "0"}
    assert s.shared_counters[0].counters == {"countersKey": "0"}
    assert device.binding_conditions == ("bindingConditionsValue",)


def test_example_driver_slices_have_uuids(fixture_dir: Path) -> None:
    slices = records_of(fixture_dir / "dra-example-driver-readme-resourceslices.List.yaml")
    assert slices and all(isinstance(s, SliceRecord) for s in slices)
    devices = [d for s in slices for d in s.devices]
    assert devices
    for device in devices:
        assert device.uuid is not None
        assert device.uuid == device.attributes[f"{slices[0].driver}/uuid"].value


def test_generated_claim_is_template_origin_and_reserved(fixture_dir: Path) -> None:
    (claim,) = records_of(fixture_dir / "cni-dra-driver-demo.ResourceClaim.yaml")
    assert isinstance(claim, ClaimRecord)
    assert claim.origin == TEMPLATE
    assert claim.state == RESERVED
    assert claim.reserved_for and claim.reserved_for[0].resource == "pods"
    assert claim.allocation is not None and claim.allocation.node_name == "kind-worker"


def test_pods_resolve_template_claims_and_container_claims(fixture_dir: Path) -> None:
    pods = records_of(fixture_dir / "dra-example-driver-prioritized-alternatives.yaml", "Pod")
    assert {p.meta.name for p in pods} == {"pod0", "pod1"}
    for pod in pods:
        assert isinstance(pod, PodRecord)
        assert pod.meta.namespace  # manifests without a namespace land in "default"
        for claim in pod.claims:
            assert claim.template_name  # from resourceClaimTemplateName
            assert claim.claim_name is None  # no status yet: not created
            assert claim.containers  # some container uses each claim


def _claim(**status: Any) -> dict[str, Any]:
    meta = status.pop("metadata", {})
    return {
        "metadata": {"name": "c1", "namespace": "ns", "uid": "u", **meta},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": status,
    }


ALLOCATION = {
    "devices": {"results": [{"request": "r", "driver": "d", "pool": "p", "device": "g0"}]},
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n7"]}]}
        ]
    },
}


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        (_claim(), PENDING),
        (_claim(allocation=ALLOCATION), ALLOCATED),
        (
            _claim(
                allocation=ALLOCATION, reservedFor=[{"resource": "pods", "name": "p", "uid": "x"}]
            ),
            RESERVED,
        ),
        (
            _claim(metadata={"deletionTimestamp": "2026-01-01T00:00:00Z"}, allocation=ALLOCATION),
            DELETING,
        ),
        (_claim(metadata={"deletionTimestamp": "2026-01-01T00:00:00Z"}), DELETING),
    ],
)
def test_claim_state(raw: dict[str, Any], state: str) -> None:
    claim = normalize("ResourceClaim", raw, cluster="c")
    assert claim.state == state
    if claim.allocation is not None:
        assert claim.allocation.node_name == "n7"


POD_OWNER = {"kind": "Pod", "name": "p", "uid": "pu", "controller": True, "apiVersion": "v1"}


@pytest.mark.parametrize(
    ("metadata", "origin"),
    [
        ({}, MANUAL),
        ({"annotations": {"resource.kubernetes.io/pod-claim-name": "x"}}, MANUAL),  # no owner
        ({"ownerReferences": [POD_OWNER]}, MANUAL),  # no annotation
        (
            {
                "annotations": {"resource.kubernetes.io/pod-claim-name": "x"},
                "ownerReferences": [POD_OWNER],
            },
            TEMPLATE,
        ),
        (
            {
                "annotations": {"resource.kubernetes.io/pod-claim-name": "x"},
                "ownerReferences": [{**POD_OWNER, "controller": False}],
            },
            MANUAL,
        ),
        (
            {
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "ownerReferences": [POD_OWNER],
            },
            EXTENDED_RESOURCE,
        ),
    ],
)
def test_claim_origin(metadata: dict[str, Any], origin: str) -> None:
    assert normalize("ResourceClaim", _claim(metadata=metadata), cluster="c").origin == origin


@pytest.mark.parametrize(
    "selector",
    [
        None,
        {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]
        },
        {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
            ]
        },
        {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]},
            ]
        },
    ],
)
def test_wider_node_selectors_name_no_node(selector: dict[str, Any] | None) -> None:
    allocation = {**ALLOCATION, "nodeSelector": selector}
    claim = normalize("ResourceClaim", _claim(allocation=allocation), cluster="c")
    assert claim.allocation is not None and claim.allocation.node_name is None


def test_v1beta1_slice_unset_fields_and_v1alpha3_capacity() -> None:
    raw = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "metadata": {"name": "s", "managedFields": [{"manager": "x"}]},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": "p", "generation": 0, "resourceSliceCount": 1},
            "nodeName": "",
            "allNodes": False,
            "devices": [
                {
                    "name": "g0",
                    "basic": {
                        "capacity": {"memory": "9728Mi"},
                        "attributes": {"example.com/model": {"string": "X"}, "index": {"int": 0}},
                    },
                }
            ],
        },
    }
    s = normalize("ResourceSlice", raw, cluster="c")
    assert s.node_name is None and s.all_nodes is False
    d = s.devices[0]
    assert d.capacity["gpu.example.com/memory"].value == "9728Mi"
    assert set(d.attributes) == {"example.com/model", "gpu.example.com/index"}
    assert d.attributes["gpu.example.com/index"].value == 0


def test_pod_fields() -> None:
    raw = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "pu"},
        "spec": {
            "nodeName": "n1",
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "t"},
                {"name": "shared", "resourceClaimName": "manual"},
                {"name": "unneeded", "resourceClaimTemplateName": "t2"},
            ],
            "initContainers": [{"name": "init", "resources": {"claims": [{"name": "gpu"}]}}],
            "containers": [
                {
                    "name": "main",
                    "resources": {
                        "limits": {"nvidia.com/gpu": 1},
                        "claims": [{"name": "gpu", "request": "r"}, {"name": "shared"}],
                    },
                }
            ],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            "resourceClaimStatuses": [
                {"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"},
                {"name": "unneeded", "resourceClaimName": None},
            ],
        },
    }
    pod = normalize("Pod", raw, cluster="c")
    assert [(c.name, c.claim_name, c.template_name, c.containers) for c in pod.claims] == [
        ("gpu", "p-gpu-x7k2q", "t", ("init", "main")),
        ("shared", "manual", None, ("main",)),
        ("unneeded", None, "t2", ()),
    ]
    assert pod.containers[0].init and not pod.containers[1].init
    assert pod.containers[1].limits == {"nvidia.com/gpu": "1"}
    assert pod.reason == "Unschedulable" and pod.node_name == "n1"


def test_node_fields() -> None:
    raw = {
        "metadata": {"name": "n1", "labels": {"a": "b"}},
        "spec": {"unschedulable": True},
        "status": {
            "allocatable": {"cpu": "63", "nvidia.com/gpu": "8"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
            ],
        },
    }
    node = normalize("Node", raw, cluster="c")
    assert isinstance(node, NodeRecord)
    assert node.ready and node.unschedulable
    assert node.conditions == ({"type": "Ready", "status": "True"},)


@pytest.mark.parametrize(
    ("kind", "raw", "ref"),
    [
        (
            "ResourceSlice",
            {"metadata": {"name": "s"}, "spec": {"driver": "d"}},
            "c/ResourceSlice/s",
        ),
        (
            "ResourceSlice",
            {
                "metadata": {"name": "s"},
                "spec": {"driver": "d", "pool": {"name": "p"}, "devices": "oops"},
            },
            "c/ResourceSlice/s",
        ),
        (
            "Pod",
            {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [1]}},
            "c/Pod/ns/p",
        ),
        ("Pod", {"metadata": {"namespace": "ns"}}, "c/Pod/ns/?"),
        ("Pod", {"metadata": "bad"}, "c/Pod/?"),
        ("Pod", ["not", "an", "object"], "c/Pod/?"),
        ("Node", {"metadata": {"name": 7}}, "c/Node/7"),
        ("Deployment", {"metadata": {"name": "d"}}, "c/Deployment/?"),
        (
            "ResourceSlice",
            {
                "metadata": {"name": "s"},
                "spec": {
                    "driver": "d",
                    "pool": {"name": "p"},
                    "devices": [{"name": "g", "attributes": {"a": {}}}],
                },
            },
            "c/ResourceSlice/s",
        ),
    ],
)
def test_malformed_objects_name_themselves(kind: str, raw: Any, ref: str) -> None:
    with pytest.raises(MalformedObject) as caught:
        normalize(kind, raw, cluster="c")
    assert caught.value.ref == ref
    assert caught.value.reason


def test_every_fixture_document_is_counted(upstream_fixtures: list[Path]) -> None:
    # Namespaces and Deployments in the manifests are not mirrored; nothing else is skipped.
    skipped = {
        doc.get("kind")
        for path in upstream_fixtures
        if path.suffix != ".md"
        for doc in documents(path)
        if doc not in mirrored(path)
    }
    assert skipped == {"Namespace", "Deployment"}


def test_unquoted_yaml_timestamps_become_rfc3339_text() -> None:
    import yaml

    raw = yaml.safe_load(
        """
metadata:
  name: c
  namespace: ns
  creationTimestamp: 2026-11-01T10:00:00Z
status:
  allocation:
    allocationTimestamp: 2026-11-01T10:00:05Z
    devices: {results: [{request: r, driver: d, pool: p, device: g}]}
"""
    )
    claim = normalize("ResourceClaim", raw, cluster="c")
    assert claim.meta.created_at == "2026-11-01T10:00:00Z"
    assert claim.allocation is not None and claim.allocation.allocated_at == "2026-11-01T10:00:05Z"
    with pytest.raises(MalformedObject):  # still malformed when times were not the problem
        normalize("ResourceClaim", {**raw, "spec": "oops"}, cluster="c")
