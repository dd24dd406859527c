"""Records decoded together share their equal values, and equal unshared records exactly."""

from __future__ import annotations

import msgspec
import orjson

from dra_mirror.service.model.decode import decode_list, decode_watch_line
from dra_mirror.service.model.records import ClaimRecord, PodRecord, SliceRecord
from dra_mirror.service.model.sharing import SharedValues

DRIVER = "gpu.example.com"


def _slice(node: str, uuids: list[str]) -> dict:
    return {
        "metadata": {"name": f"{node}-slice", "resourceVersion": "1"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {
                        "uuid": {"string": uuid},
                        "productName": {"string": "Example GPU 80GB"},
                        "driverVersion": {"version": "1.2.3"},
                        "index": {"int": i},
                    },
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i, uuid in enumerate(uuids)
            ],
        },
    }


def _claim(name: str, node: str) -> dict:
    selector = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        ]
    }
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": "d"}]
                },
                "nodeSelector": selector,
            }
        },
    }


def _page(kind: str, items: list[dict]) -> bytes:
    return orjson.dumps(
        {"kind": f"{kind}List", "metadata": {"resourceVersion": "9"}, "items": items}
    )


def test_slices_of_a_page_share_equal_attributes_and_capacities() -> None:
    body = _page("ResourceSlice", [_slice("n1", ["u1", "u2"]), _slice("n2", ["u3"])])
    records = decode_list("ResourceSlice", body, cluster="c").records
    devices = [d for r in records if isinstance(r, SliceRecord) for d in r.devices]
    key = f"{DRIVER}/productName"
    assert len({id(d.attributes[key]) for d in devices}) == 1
    assert len({id(d.capacity[f"{DRIVER}/memory"]) for d in devices}) == 1
    assert len({id(d.attributes[f"{DRIVER}/uuid"]) for d in devices}) == 3
    assert devices[0].attributes[f"{DRIVER}/index"] is devices[2].attributes[f"{DRIVER}/index"]
    # exactly the records each object decodes to on its own
    alone = [
        decode_list("ResourceSlice", _page("ResourceSlice", [s]), cluster="c").records[0]
        for s in (_slice("n1", ["u1", "u2"]), _slice("n2", ["u3"]))
    ]
    assert records == alone


def test_node_selectors_are_shared_across_pages_and_watch_events_of_one_watcher() -> None:
    shared = SharedValues()
    first = decode_list(
        "ResourceClaim", _page("ResourceClaim", [_claim("a", "n1")]), cluster="c", shared=shared
    ).records[0]
    second = decode_list(
        "ResourceClaim", _page("ResourceClaim", [_claim("b", "n1")]), cluster="c", shared=shared
    ).records[0]
    line = orjson.dumps({"type": "MODIFIED", "object": _claim("c", "n1")})
    third = decode_watch_line("ResourceClaim", line, cluster="c", shared=shared).record
    other = decode_list(
        "ResourceClaim", _page("ResourceClaim", [_claim("d", "n2")]), cluster="c", shared=shared
    ).records[0]
    claims = [first, second, third, other]
    assert all(isinstance(c, ClaimRecord) and c.allocation is not None for c in claims)
    selectors = [c.allocation.node_selector for c in claims]  # type: ignore[union-attr]
    assert selectors[0] is selectors[1] is selectors[2]
    assert selectors[3] is not selectors[0] and selectors[3] != selectors[0]
    assert [c.allocation.node_name for c in claims] == ["n1", "n1", "n1", "n2"]  # type: ignore[union-attr]


def test_a_different_selector_for_the_same_node_is_kept_as_it_came() -> None:
    shared = SharedValues()
    plain = _claim("a", "n1")
    wider = _claim("b", "n1")
    wider["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "extra"
    ] = "kept"
    records = decode_list(
        "ResourceClaim", _page("ResourceClaim", [plain, wider]), cluster="c", shared=shared
    ).records
    assert records[1].allocation.node_selector != records[0].allocation.node_selector  # type: ignore[union-attr]
    assert (
        records[1].allocation.node_selector["nodeSelectorTerms"][0]["matchFields"][0]["extra"]  # type: ignore[union-attr,index]
        == "kept"
    )


def test_tables_are_bounded() -> None:
    shared = SharedValues(limit=2)
    body = _page("ResourceSlice", [_slice("n1", ["u1", "u2", "u3", "u4", "u5"])])
    records = decode_list("ResourceSlice", body, cluster="c", shared=shared).records
    assert (
        len(shared.attributes) <= 2
        and len(shared.keys) <= 2
        and len(shared.layouts) <= 2
        and len(shared.maps) <= 2
    )
    assert records == decode_list("ResourceSlice", body, cluster="c").records


def _pod(name: str, cpu: object = "2") -> dict:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "train"}},
        "spec": {
            "nodeName": "n1",
            "containers": [
                {"name": "main", "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "g"}]}}
            ],
            "resourceClaims": [{"name": "g", "resourceClaimName": f"{name}-g"}],
        },
    }


def _opaque_claim(name: str, replicas: object) -> dict:
    claim = _claim(name, "n1")
    claim["spec"]["devices"]["config"] = [
        {"opaque": {"driver": DRIVER, "parameters": {"replicas": replicas}}}
    ]
    return claim


def test_claims_of_a_watcher_share_equal_maps_specs_and_tuples() -> None:
    items = [_claim(f"c{i}", "n1") for i in range(3)]
    for item in items:
        item["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
        item["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    records = decode_list("ResourceClaim", _page("ResourceClaim", items), cluster="c").records
    claims = [r for r in records if isinstance(r, ClaimRecord)]
    assert len({id(c.meta.annotations) for c in claims}) == 1
    assert len({id(c.meta.finalizers) for c in claims}) == 1
    assert len({id(c.meta.labels) for c in claims}) == 1 and claims[0].meta.labels == {}
    assert len({id(c.requests) for c in claims}) == 1
    alone = [
        decode_list("ResourceClaim", _page("ResourceClaim", [item]), cluster="c").records[0]
        for item in items
    ]
    assert records == alone


def test_specs_with_untyped_json_are_converted_each_as_written() -> None:
    # 1 and 1.0 are equal in Python but not the same JSON: opaque parameters are kept as written.
    items = [_opaque_claim("a", 1), _opaque_claim("b", 1.0), _opaque_claim("c", True)]
    records = decode_list("ResourceClaim", _page("ResourceClaim", items), cluster="c").records
    written = [
        msgspec.json.encode(r.config[0]["opaque"]["parameters"])  # type: ignore[union-attr]
        for r in records
    ]
    assert written == [b'{"replicas":1}', b'{"replicas":1.0}', b'{"replicas":true}']


def test_pods_of_a_workload_share_containers_and_labels() -> None:
    items = [_pod("p1"), _pod("p2"), _pod("p3", cpu="4")]
    records = decode_list("Pod", _page("Pod", items), cluster="c").records
    pods = [r for r in records if isinstance(r, PodRecord)]
    assert pods[0].containers is pods[1].containers
    assert pods[2].containers is not pods[0].containers
    assert pods[2].containers[0].requests == {"cpu": "4"}
    assert pods[0].meta.labels is pods[2].meta.labels
    assert [p.claims[0].containers for p in pods] == [("main",), ("main",), ("main",)]
    alone = [decode_list("Pod", _page("Pod", [item]), cluster="c").records[0] for item in items]
    assert records == alone


def test_a_quantity_map_is_looked_up_only_as_text() -> None:
    # `True == 1`: a map written with numbers is never found again for another written so.
    items = [_pod("p1", cpu=1), _pod("p2", cpu=True), _pod("p3", cpu=1.0)]
    page = decode_list("Pod", _page("Pod", items), cluster="c")
    assert [r.meta.name for r in page.records] == ["p1", "p3"]
    assert [m.ref for m in page.malformed] == ["c/Pod/ns/p2"]
    assert page.records[0].containers[0].requests == {"cpu": "1"}  # type: ignore[union-attr]
