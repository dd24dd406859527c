"""The object store of one simulated cluster: server-set fields, events, window, restart."""

from __future__ import annotations

import pytest

from dra_mirror.service.sim.store import ApiError, ClusterStore


def claim(name: str = "", *, generate: str = "", namespace: str = "default") -> dict:
    meta = {"namespace": namespace}
    if name:
        meta["name"] = name
    if generate:
        meta["generateName"] = generate
    return {
        "metadata": meta,
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.x.com"}}]}
        },
    }


def test_create_sets_server_fields_and_defaults():
    store = ClusterStore("a", seed=7)
    out = store.create("resourceclaims", claim(generate="web-0-gpu-"))
    meta = out["metadata"]
    assert meta["name"].startswith("web-0-gpu-") and len(meta["name"]) == len("web-0-gpu-") + 5
    assert meta["generation"] == 1 and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["resourceVersion"] == str(store.resource_version)
    assert meta["managedFields"][0]["fieldsType"] == "FieldsV1"
    assert out["apiVersion"] == "resource.k8s.io/v1" and out["kind"] == "ResourceClaim"
    assert out["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.x.com",
        "allocationMode": "ExactCount",
        "count": 1,
    }
    with pytest.raises(ApiError) as err:
        store.create("resourceclaims", claim(meta["name"]))
    assert (err.value.code, err.value.reason) == (409, "AlreadyExists")


def test_unknown_namespace_is_not_found():
    store = ClusterStore("a")
    with pytest.raises(ApiError) as err:
        store.create("resourceclaims", claim("c", namespace="nowhere"))
    assert err.value.code == 404
    store.create("resourceclaims", claim("c", namespace="nowhere"), validate=False)
    assert store.get("resourceclaims", "nowhere", "c") is not None


def test_update_conflict_generation_and_status_subresource():
    store = ClusterStore("a")
    created = store.create(
        "deviceclasses", {"metadata": {"name": "gpu.x.com"}, "spec": {"selectors": []}}
    )
    stale = dict(created, metadata=dict(created["metadata"]))
    changed = dict(created, spec={"selectors": [{"cel": {"expression": "true"}}]})
    updated = store.update("deviceclasses", changed)
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(ApiError) as err:
        store.update("deviceclasses", stale)
    assert (err.value.code, err.value.reason) == (409, "Conflict")

    c = store.create("resourceclaims", claim("c"))
    with_status = dict(c, status={"allocation": {"devices": {"results": []}}})
    same = store.update("resourceclaims", with_status)  # main resource ignores status
    assert (
        "status" not in same
        and same["metadata"]["resourceVersion"] == c["metadata"]["resourceVersion"]
    )
    after = store.update("resourceclaims", with_status, subresource="status")
    assert after["status"] == with_status["status"] and after["metadata"]["generation"] == 1
    with pytest.raises(ApiError) as err:
        store.patch("resourceclaims", "default", "c", {"spec": {"devices": {"requests": []}}})
    assert err.value.code == 422


def test_finalizers_delay_deletion():
    store = ClusterStore("a")
    events: list[tuple[str, str]] = []
    store.add_listener(lambda kind, plural, obj: events.append((kind, obj["metadata"]["name"])))
    store.create("resourceclaims", dict(claim("c"), metadata={"name": "c", "finalizers": ["f"]}))
    store.delete("resourceclaims", "default", "c")
    assert store.get("resourceclaims", "default", "c")["metadata"]["deletionTimestamp"]
    store.patch("resourceclaims", "default", "c", {"metadata": {"finalizers": None}})
    assert store.get("resourceclaims", "default", "c") is None
    assert events == [("ADDED", "c"), ("MODIFIED", "c"), ("DELETED", "c")]


def test_window_expiry_and_restart():
    store = ClusterStore("a", window=3)
    start = store.resource_version
    for i in range(5):
        store.create("resourceclaims", claim(f"c{i}"))
    with pytest.raises(ApiError) as err:
        store.events_after(start)
    assert err.value.code == 410 and err.value.reason == "Expired"
    assert [e.type for e in store.events_after(store.resource_version - 2)] == ["ADDED", "ADDED"]
    uid = store.get("resourceclaims", "default", "c0")["metadata"]["uid"]
    store.restart(base=1)
    after = store.get("resourceclaims", "default", "c0")
    assert after["metadata"]["uid"] == uid and int(after["metadata"]["resourceVersion"]) < start
    with pytest.raises(ApiError):
        store.events_after(start)


def test_bulk_load_and_consistent_state_at():
    store = ClusterStore("a")
    store.bulk_load("nodes", ({"metadata": {"name": f"n{i}"}, "status": {}} for i in range(3)))
    rv = store.resource_version
    assert [o["metadata"]["name"] for o in store.list("nodes")] == ["n0", "n1", "n2"]
    store.delete("nodes", None, "n1")
    store.create("nodes", {"metadata": {"name": "n3"}})
    before = store.state_at("nodes", rv)
    assert before[("", "n1")]["metadata"]["name"] == "n1" and before[("", "n3")] is None


def test_events_after_every_position_in_a_full_window():
    store = ClusterStore("a", window=10)
    for i in range(25):
        store.create("namespaces", {"metadata": {"name": f"n{i}"}})
    current = store.resource_version
    assert store.floor == current - 10
    for rv in range(store.floor, current + 1):
        assert [e.rv for e in store.events_after(rv)] == list(range(rv + 1, current + 1))
    with pytest.raises(ApiError):
        store.events_after(store.floor - 1)


def test_a_failing_listener_does_not_stop_the_write(caplog):
    store = ClusterStore("a")
    seen: list[str] = []

    def broken(kind: str, plural: str, obj: dict) -> None:
        raise RuntimeError("world bug")

    store.add_listener(broken)
    store.add_listener(lambda kind, plural, obj: seen.append(kind))
    store.add_waker(lambda: seen.append("woken"))
    store.create("resourceclaims", claim("c"))
    assert seen == ["ADDED", "woken"]
    assert "listener failed" in caplog.text
