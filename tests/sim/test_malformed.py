"""Malformed objects are refused with a Status (400/415/422), never an unexpected exception
or a 500 answer."""

from __future__ import annotations

import httpx
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_mirror.service.model.kinds import BY_PLURAL
from dra_mirror.service.sim.served import ServedCluster
from dra_mirror.service.sim.server import build_app
from dra_mirror.service.sim.store import ApiError, ClusterStore

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 300) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)

# Keys the validators look at, so that generated objects reach deep into them.
FIELD_NAMES = st.sampled_from(
    [
        "devices",
        "requests",
        "exactly",
        "firstAvailable",
        "nodeName",
        "allNodes",
        "pool",
        "driver",
        "attributes",
        "capacity",
        "selectors",
        "cel",
        "name",
        "count",
        "containers",
        "resourceClaims",
        "sharedCounters",
        "consumesCounters",
        "taints",
        "spec",
        "metadata",
        "labels",
        "config",
        "opaque",
        "constraints",
        "reservedFor",
        "allocation",
        "results",
    ]
)
shaped = st.recursive(
    json_values,
    lambda inner: st.dictionaries(FIELD_NAMES, inner, max_size=5) | st.lists(inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plural=st.sampled_from(sorted(BY_PLURAL)),
    metadata=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"name": st.text(max_size=10)},
            optional={"labels": json_values, "namespace": st.text(max_size=5)},
        ),
    ),
    spec=shaped,
    status=shaped,
)
def test_create_and_update_never_crash(plural: str, metadata, spec, status):
    store = ClusterStore("fuzz")
    body = {"metadata": metadata, "spec": spec, "status": status}
    try:
        made = store.create(plural, body)
    except ApiError as error:
        assert error.code in (400, 404, 409, 422), error.status()
        return
    made["spec"] = status
    try:
        store.update(plural, made, subresource="status" if BY_PLURAL[plural].has_status else None)
    except ApiError as error:
        assert error.code in (400, 404, 409, 422), error.status()


PATHS = st.sampled_from(
    [
        "/api/v1/namespaces/default/pods",
        "/api/v1/namespaces",
        "/api/v1/nodes/n1",
        "/api/v1/namespaces/default/pods/p/status",
        "/apis/resource.k8s.io/v1/resourceslices",
        "/apis/resource.k8s.io/v1beta1/resourceslices",
        "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaims",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c",
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status",
        "/apis/resource.k8s.io/v1beta1/namespaces/default/resourceclaimtemplates/t",
        "/apis/resource.k8s.io/v1/deviceclasses/d",
    ]
)
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
        "application/apply-patch+yaml",
    ]
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.sampled_from(["POST", "PUT", "PATCH", "DELETE"]),
    path=PATHS,
    content_type=CONTENT_TYPES,
    body=st.one_of(shaped, st.binary(max_size=20)),
)
async def test_http_writes_never_answer_500(method, path, content_type, body):
    store = ClusterStore("fuzz-http")
    store.create(
        "resourceclaims", {"metadata": {"name": "c"}, "spec": {"devices": {"requests": []}}}
    )
    app = build_app(ServedCluster(store))
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://sim"
    ) as http:
        response = await http.request(
            method, path, content=content, headers={"Content-Type": content_type}
        )
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.json()["kind"] == "Status"
