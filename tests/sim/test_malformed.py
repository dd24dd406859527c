"""Malformed objects are refused with a Status (400/422), never an unexpected exception."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.sim.resources import RESOURCES
from service.sim.store import ApiError, ClusterStore

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
    plural=st.sampled_from(sorted(RESOURCES)),
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
        store.update(plural, made, subresource="status" if RESOURCES[plural].has_status else None)
    except ApiError as error:
        assert error.code in (400, 404, 409, 422), error.status()
