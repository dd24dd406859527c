"""Records decoded together share their equal values, and equal unshared records exactly."""

from __future__ import annotations

import orjson

from dra_mirror.service.model.decode import decode_list, decode_watch_line
from dra_mirror.service.model.records import ClaimRecord, SliceRecord
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
    assert len(shared.attributes) <= 2 and len(shared.keys) <= 2
    assert records == decode_list("ResourceSlice", body, cluster="c").records
