"""The simulated API server through the real kubernetes_asyncio client: discovery, CRUD,
status subresource, finalizers, Status errors, paged LIST, selectors, version conversion."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from dra_mirror.service.sim.store import ClusterStore
from tests.sim.conftest import claim_body, deleted, slice_body

GROUP = "resource.k8s.io"
MERGE = "application/merge-patch+json"


def status_of(error: ApiException) -> dict:
    return json.loads(error.body)


async def test_discovery(api: client.ApiClient):
    version = await client.VersionApi(api).get_code()
    assert version.major == "1" and version.minor == "35"
    groups = await client.ApisApi(api).get_api_versions()
    dra = next(g for g in groups.groups if g.name == GROUP)
    assert [v.version for v in dra.versions] == ["v1", "v1beta2", "v1beta1"]
    assert dra.preferred_version.version == "v1"
    resources = await client.ResourceV1Api(api).get_api_resources()
    by_name = {r.name: r for r in resources.resources}
    assert by_name["resourceclaims"].namespaced and not by_name["resourceslices"].namespaced
    assert by_name["resourceclaims"].kind == "ResourceClaim"
    assert "watch" in by_name["deviceclasses"].verbs
    assert "resourceclaims/status" in by_name and "resourceslices/status" not in by_name
    core = await client.CoreV1Api(api).get_api_resources()
    pods = next(r for r in core.resources if r.name == "pods")
    assert pods.short_names == ["po"] and pods.namespaced


async def test_crud_status_subresource_and_finalizers(api: client.ApiClient):
    custom = client.CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(
        GROUP, "v1", "default", "resourceclaims", claim_body("shared")
    )
    meta = created["metadata"]
    assert meta["uid"] and meta["generation"] == 1 and meta["resourceVersion"]
    assert created["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1

    allocation = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-0", "device": "gpu-0"}
            ]
        }
    }
    status = await custom.patch_namespaced_custom_object_status(
        GROUP,
        "v1",
        "default",
        "resourceclaims",
        "shared",
        {"status": {"allocation": allocation}},
        _content_type=MERGE,
    )
    assert status["status"]["allocation"] == allocation
    # The main resource ignores status; the status subresource ignores everything else.
    main = await custom.patch_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "resourceclaims",
        "shared",
        {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}, "status": None},
        _content_type=MERGE,
    )
    assert main["status"]["allocation"] == allocation
    assert main["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]

    deleting = await custom.delete_namespaced_custom_object(
        GROUP, "v1", "default", "resourceclaims", "shared"
    )
    assert deleting["metadata"]["deletionTimestamp"]
    claims = client.ResourceV1Api(api)
    typed = await claims.read_namespaced_resource_claim("shared", "default")
    assert typed.metadata.deletion_timestamp is not None
    assert typed.status.allocation.devices.results[0].device == "gpu-0"
    await custom.patch_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "resourceclaims",
        "shared",
        {"metadata": {"finalizers": None}},
        _content_type=MERGE,
    )
    with pytest.raises(ApiException) as error:
        await claims.read_namespaced_resource_claim("shared", "default")
    body = status_of(error.value)
    assert error.value.status == 404
    assert body["kind"] == "Status" and body["reason"] == "NotFound"
    assert body["details"] == {"name": "shared", "group": GROUP, "kind": "resourceclaims"}


async def test_errors_are_status_objects(api: client.ApiClient):
    custom = client.CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(
        GROUP, "v1", "default", "resourceclaims", claim_body("one")
    )
    with pytest.raises(ApiException) as error:
        await custom.create_namespaced_custom_object(
            GROUP, "v1", "default", "resourceclaims", claim_body("one")
        )
    assert error.value.status == 409 and status_of(error.value)["reason"] == "AlreadyExists"

    stale = await custom.get_namespaced_custom_object(
        GROUP, "v1", "default", "resourceclaims", "one"
    )
    await custom.patch_namespaced_custom_object(
        GROUP,
        "v1",
        "default",
        "resourceclaims",
        "one",
        {"metadata": {"labels": {"a": "b"}}},
        _content_type=MERGE,
    )
    with pytest.raises(ApiException) as error:
        await custom.replace_namespaced_custom_object(
            GROUP, "v1", "default", "resourceclaims", "one", stale
        )
    assert error.value.status == 409 and status_of(error.value)["reason"] == "Conflict"

    bad = slice_body("Not_A_Name", "node-0", devices=129)
    with pytest.raises(ApiException) as error:
        await custom.create_cluster_custom_object(GROUP, "v1", "resourceslices", bad)
    body = status_of(error.value)
    assert error.value.status == 422 and body["reason"] == "Invalid"
    fields = {c["field"] for c in body["details"]["causes"]}
    assert {"metadata.name", "spec.devices"} <= fields


async def test_dry_run_and_field_manager(api: client.ApiClient, store: ClusterStore):
    custom = client.CustomObjectsApi(api)
    dry = await custom.create_namespaced_custom_object(
        GROUP, "v1", "default", "resourceclaims", claim_body("dry"), dry_run="All"
    )
    assert (
        dry["metadata"]["name"] == "dry" and store.get("resourceclaims", "default", "dry") is None
    )
    await custom.create_namespaced_custom_object(
        GROUP, "v1", "default", "resourceclaims", claim_body("real"), field_manager="tester"
    )
    await custom.patch_namespaced_custom_object_status(
        GROUP,
        "v1",
        "default",
        "resourceclaims",
        "real",
        {"status": {"devices": []}},
        field_manager="kube-scheduler",
        _content_type=MERGE,
    )
    managed = store.get("resourceclaims", "default", "real")["metadata"]["managedFields"]
    assert [(m["manager"], m.get("subresource")) for m in managed] == [
        ("tester", None),
        ("kube-scheduler", "status"),
    ]
    assert managed[1]["fieldsV1"] == {"f:status": {".": {}, "f:devices": {}}}
    applied = await api.call_api(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/real",
        "PATCH",
        query_params=[("fieldManager", "applier")],
        header_params={"Content-Type": "application/apply-patch+yaml"},
        body={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "real", "labels": {"owner": "applier"}},
        },
        response_types_map={200: "object"},
        _return_http_data_only=True,
    )
    assert applied["metadata"]["labels"] == {"owner": "applier"}
    last = applied["metadata"]["managedFields"][-1]
    assert (last["manager"], last["operation"]) == ("applier", "Apply")


async def test_paged_list_is_a_consistent_snapshot(api: client.ApiClient, store: ClusterStore):
    for i in range(7):
        store.create("resourceslices", slice_body(f"slice-{i}", f"node-{i}"))
    slices = client.ResourceV1Api(api)
    first = await slices.list_resource_slice(limit=3)
    assert [s.metadata.name for s in first.items] == ["slice-0", "slice-1", "slice-2"]
    assert first.metadata.remaining_item_count == 4
    # Changes after the first page do not show in later pages of the same list.
    store.delete("resourceslices", None, "slice-5")
    store.create("resourceslices", slice_body("slice-9", "node-9"))
    names, token = [s.metadata.name for s in first.items], first.metadata._continue
    while token:
        page = await slices.list_resource_slice(limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        names += [s.metadata.name for s in page.items]
        token = page.metadata._continue
    assert names == [f"slice-{i}" for i in range(7)]
    fresh = await slices.list_resource_slice()
    assert [s.metadata.name for s in fresh.items][-2:] == ["slice-6", "slice-9"]


async def test_selectors_and_namespaces(api: client.ApiClient, store: ClusterStore):
    store.create("namespaces", {"metadata": {"name": "team-a"}})
    store.create("resourceclaims", claim_body("a1", namespace="team-a", labels={"app": "web"}))
    store.create("resourceclaims", claim_body("a2", namespace="team-a", labels={"app": "db"}))
    store.create("resourceclaims", claim_body("d1", labels={"app": "web", "tier": "x"}))
    store.create("resourceslices", slice_body("s1", "node-1"))
    store.create("resourceslices", slice_body("s2", "node-2", driver="nic.example.com"))
    claims = client.ResourceV1Api(api)

    async def names(**kwargs) -> list[str]:
        found = await claims.list_resource_claim_for_all_namespaces(**kwargs)
        return [c.metadata.name for c in found.items]

    assert await names(label_selector="app=web") == ["d1", "a1"]
    assert await names(label_selector="app in (db, web),!tier") == ["a1", "a2"]
    assert await names(label_selector="app!=web") == ["a2"]
    assert await names(label_selector="tier") == ["d1"]
    assert await names(field_selector="metadata.namespace=team-a,metadata.name!=a1") == ["a2"]
    in_ns = await claims.list_namespaced_resource_claim("team-a")
    assert [c.metadata.name for c in in_ns.items] == ["a1", "a2"]
    by_node = await claims.list_resource_slice(field_selector="spec.nodeName=node-2")
    assert [s.metadata.name for s in by_node.items] == ["s2"]
    by_driver = await claims.list_resource_slice(field_selector="spec.driver=gpu.nvidia.com")
    assert [s.metadata.name for s in by_driver.items] == ["s1"]
    with pytest.raises(ApiException) as error:
        await claims.list_resource_slice(field_selector="spec.pool.name=x")
    assert error.value.status == 400


async def test_v1beta1_conversion_both_ways(api: client.ApiClient, store: ClusterStore):
    custom = client.CustomObjectsApi(api)
    beta_slice = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "beta"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-0",
            "pool": {"name": "node-0", "generation": 0, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "basic": {"attributes": {"type": {"string": "gpu"}}}}],
        },
    }
    await custom.create_cluster_custom_object(GROUP, "v1beta1", "resourceslices", beta_slice)
    stored = store.get("resourceslices", None, "beta")
    assert stored["spec"]["devices"] == [
        {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}
    ]
    as_v1 = await client.ResourceV1Api(api).read_resource_slice("beta")
    assert as_v1.spec.devices[0].attributes["type"].string == "gpu"
    as_beta = await client.ResourceV1beta1Api(api).read_resource_slice("beta")
    assert as_beta.api_version == "resource.k8s.io/v1beta1"
    assert as_beta.spec.devices[0].basic.attributes["type"].string == "gpu"

    store.create("resourceclaims", claim_body("c"))
    beta_claim = await custom.get_namespaced_custom_object(
        GROUP, "v1beta1", "default", "resourceclaims", "c"
    )
    assert beta_claim["spec"]["devices"]["requests"] == [
        {
            "name": "gpu",
            "deviceClassName": "gpu.nvidia.com",
            "allocationMode": "ExactCount",
            "count": 1,
        }
    ]
    flat = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "flat"},
        "spec": {"devices": {"requests": [{"name": "r", "deviceClassName": "x.com", "count": 2}]}},
    }
    await custom.create_namespaced_custom_object(
        GROUP, "v1beta1", "default", "resourceclaims", flat
    )
    assert store.get("resourceclaims", "default", "flat")["spec"]["devices"]["requests"] == [
        {
            "name": "r",
            "exactly": {"deviceClassName": "x.com", "count": 2, "allocationMode": "ExactCount"},
        }
    ]
    beta2 = await client.ResourceV1beta2Api(api).list_resource_claim_for_all_namespaces()
    assert beta2.api_version == "resource.k8s.io/v1beta2"
    assert beta2.items[0].spec.devices.requests[0].exactly.device_class_name == "gpu.nvidia.com"


async def test_core_resources(api: client.ApiClient, store: ClusterStore):
    core = client.CoreV1Api(api)
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="work")))
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(generate_name="web-", labels={"app": "web"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="busybox")]),
    )
    made = await core.create_namespaced_pod("work", pod)
    assert made.metadata.name.startswith("web-") and made.status.phase == "Pending"
    await core.patch_namespaced_pod_status(
        made.metadata.name, "work", {"status": {"phase": "Running"}}
    )
    running = await core.list_pod_for_all_namespaces(field_selector="status.phase=Running")
    assert [p.metadata.name for p in running.items] == [made.metadata.name]
    await core.delete_namespace("work")
    terminating = await core.read_namespace("work")
    assert terminating.status.phase == "Terminating"
    # The namespace controller empties and removes it shortly after.
    await deleted(store, "namespaces", None, "work")
    assert (await core.list_pod_for_all_namespaces()).items == []


async def test_garbage_collection_by_owner(api: client.ApiClient, store: ClusterStore):
    core = client.CoreV1Api(api)
    node = store.create("nodes", {"metadata": {"name": "node-0"}})
    owned = slice_body("node-0-gpu", "node-0")
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": "node-0",
            "uid": node["metadata"]["uid"],
            "controller": True,
        }
    ]
    store.create("resourceslices", owned)
    store.create("resourceslices", slice_body("other", "node-1"))
    pod = store.create(
        "pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    claim = claim_body("p-gpu-abcde")
    claim["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "p",
            "uid": pod["metadata"]["uid"],
            "controller": True,
        }
    ]
    store.create("resourceclaims", claim)

    await core.delete_node("node-0")
    await deleted(store, "resourceslices", None, "node-0-gpu")
    assert store.get("resourceslices", None, "other") is not None

    second = store.create(
        "pods", {"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    claim = claim_body("q-gpu-fghij")
    claim["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "q", "uid": second["metadata"]["uid"]}
    ]
    store.create("resourceclaims", claim)
    await core.delete_namespaced_pod("p", "default", propagation_policy="Orphan")
    await core.delete_namespaced_pod("q", "default")
    # q's claim goes; by then a collection for p (scheduled earlier) would have run too.
    await deleted(store, "resourceclaims", "default", "q-gpu-fghij")
    assert store.get("resourceclaims", "default", "p-gpu-abcde") is not None


async def test_server_side_table(api: client.ApiClient, store: ClusterStore):
    store.create("resourceslices", slice_body("s1", "node-1"))
    table = await api.call_api(
        "/apis/resource.k8s.io/v1beta1/resourceslices",
        "GET",
        query_params=[("includeObject", "Object")],
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
        response_types_map={200: "object"},
        _return_http_data_only=True,
    )
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Node", "Driver", "Pool", "Age"]
    (row,) = table["rows"]
    assert row["cells"][:4] == ["s1", "node-1", "gpu.nvidia.com", "node-1"]
    assert row["object"]["apiVersion"] == "resource.k8s.io/v1beta1"
    assert "basic" in row["object"]["spec"]["devices"][0]
