"""decode_list / decode_watch_line: agree with normalize, isolate malformed items."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from dra_mirror.service.model.decode import decode_list, decode_object, decode_watch_line
from dra_mirror.service.model.normalize import MalformedObject, normalize
from tests.model.conftest import mirrored


def test_decode_agrees_with_normalize_on_every_fixture(upstream_fixtures: list[Path]) -> None:
    count = 0
    for path in upstream_fixtures:
        if path.suffix == ".md":
            continue
        for doc in mirrored(path):
            kind = doc["kind"]
            expected = normalize(kind, doc, cluster="east")
            body = orjson.dumps(
                {"kind": f"{kind}List", "metadata": {"resourceVersion": "9"}, "items": [doc]}
            )
            page = decode_list(kind, body, cluster="east")
            assert page.records == [expected] and page.malformed == []
            line = orjson.dumps({"type": "MODIFIED", "object": doc})
            item = decode_watch_line(kind, line, cluster="east")
            assert item.type == "MODIFIED" and item.record == expected
            assert item.resource_version == expected.meta.resource_version
            count += 1
    assert count > 20


def _pod(name: str, rv: str, **spec: object) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "spec": spec}


def test_malformed_item_is_reported_and_the_rest_decoded() -> None:
    items = [
        _pod("a", "1", nodeName="n1"),
        _pod("b", "2", containers="not a list"),
        {"metadata": {"namespace": "ns"}},  # no name at all
        _pod("c", "3"),
        {"metadata": ["garbage"]},
    ]
    body = json.dumps(
        {
            "kind": "PodList",
            "metadata": {"resourceVersion": "42", "continue": "tok"},
            "items": items,
        }
    ).encode()
    page = decode_list("Pod", body, cluster="east")
    assert [r.meta.name for r in page.records] == ["a", "c"]
    assert [m.ref for m in page.malformed] == ["east/Pod/ns/b", "east/Pod/ns/?", "east/Pod/?"]
    # Each names its own resourceVersion where its metadata can be read: a relist that meets
    # the same broken object again is not news, a new version of it is.
    assert [m.resource_version for m in page.malformed] == ["2", "", ""]
    assert page.resource_version == "42" and page.continue_token == "tok"
    assert page.records[0].node_name == "n1"


def test_last_page_has_no_continue_token() -> None:
    body = b'{"kind":"NodeList","metadata":{"resourceVersion":"5","continue":""},"items":null}'
    page = decode_list("Node", body, cluster="c")
    assert page == ([], [], "5", None)


def test_a_body_that_is_not_a_list_is_malformed() -> None:
    with pytest.raises(MalformedObject) as caught:
        decode_list("Pod", b"<html>502 Bad Gateway</html>", cluster="c")
    assert caught.value.ref == "c/Pod"


def test_watch_events() -> None:
    bookmark = b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"77","annotations":{"k8s.io/initial-events-end":"true"}}}}'
    assert decode_watch_line("Pod", bookmark, cluster="c") == ("BOOKMARK", None, "77", None, None)
    gone = b'{"type":"ERROR","object":{"kind":"Status","status":"Failure","reason":"Expired","code":410}}'
    item = decode_watch_line("Pod", gone, cluster="c")
    assert item.type == "ERROR" and item.error is not None and item.error["code"] == 410
    deleted = orjson.dumps({"type": "DELETED", "object": _pod("a", "80")})
    item = decode_watch_line("Pod", deleted, cluster="c")
    assert item.type == "DELETED" and item.record is not None and item.resource_version == "80"
    broken = orjson.dumps({"type": "ADDED", "object": _pod("b", "81", containers=5)})
    item = decode_watch_line("Pod", broken, cluster="c")
    assert item.record is None and item.resource_version == "81"
    assert item.malformed is not None and item.malformed.ref == "c/Pod/ns/b"
    with pytest.raises(MalformedObject):
        decode_watch_line("Pod", b"{truncated", cluster="c")


def test_decode_object_of_an_unmirrored_kind_is_malformed() -> None:
    with pytest.raises(MalformedObject):
        decode_object("Deployment", b"{}", cluster="c")


REQUIRED_AFFINITY = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H200"]},
                {"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["3"]},
            ]
        },
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
    ]
}


def test_a_pods_node_constraints_decode_as_they_normalize() -> None:
    pinned = _pod(
        "trainer",
        "7",
        nodeSelector={"kubernetes.io/hostname": "n1"},
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": REQUIRED_AFFINITY,
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": []}}
                ],
            },
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
        },
    )
    free = _pod("loose", "8", affinity={"podAffinity": {}})
    for raw, selector, required in (
        (pinned, {"kubernetes.io/hostname": "n1"}, REQUIRED_AFFINITY),
        (free, {}, None),
    ):
        expected = normalize("Pod", raw, cluster="east")
        assert (expected.node_selector, expected.required_node_affinity) == (selector, required)
        assert decode_object("Pod", orjson.dumps(raw), cluster="east") == expected
        body = orjson.dumps(
            {"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": [raw]}
        )
        assert decode_list("Pod", body, cluster="east").records == [expected]
        line = orjson.dumps({"type": "ADDED", "object": raw})
        assert decode_watch_line("Pod", line, cluster="east").record == expected
