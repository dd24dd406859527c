"""The registry of kinds (`service.model.kinds`) is the one table: every record type, wire
Struct, converter, index hook and collection the package uses for a kind comes from its one
entry, and the entries agree with the record types' own tags."""

from __future__ import annotations

from typing import get_args

from dra_mirror.service.clusters.resources import GRANTED, WATCHED
from dra_mirror.service.model import kinds
from dra_mirror.service.model.normalize import WIRE_TYPES
from dra_mirror.service.model.records import KIND_OF, Record


def test_every_record_type_is_registered_once_under_its_own_tag() -> None:
    registered = [k.record for k in kinds.REGISTRY]
    assert sorted(registered, key=str) == sorted(get_args(Record), key=str)
    for kind in kinds.REGISTRY:
        assert kind.record.__struct_config__.tag == kind.kind
        assert KIND_OF[kind.record] == kind.kind


def test_the_tables_the_package_reads_are_views_of_the_registry() -> None:
    assert kinds.KINDS == tuple(k.kind for k in kinds.REGISTRY)
    assert WIRE_TYPES == {k.kind: k.wire for k in kinds.REGISTRY}
    assert set(WATCHED) == {(k.resource.group, k.resource.plural) for k in kinds.REGISTRY}
    assert GRANTED == {(k.resource.group, k.resource.plural): k.verbs for k in kinds.REGISTRY}
    assert kinds.OPTIONAL == {k.kind for k in kinds.REGISTRY if k.optional}
    assert not kinds.OPTIONAL & {r.kind for r in kinds.CORE_DRA}


def test_an_optional_kind_has_versions_of_its_own_and_the_release_serving_each() -> None:
    rule = kinds.BY_KIND["DeviceTaintRule"]
    assert rule.optional and rule.versions == ("v1", "v1beta2", "v1alpha3")
    assert rule.versions_at(32) == ()
    assert rule.versions_at(35) == ("v1alpha3",)
    assert rule.versions_at(36) == ("v1beta2", "v1alpha3")
    assert rule.versions_at(37) == ("v1", "v1beta2", "v1alpha3")


def test_versions_are_ordered_as_the_api_server_prefers_them() -> None:
    assert kinds.newest_first(["v1alpha3", "v1beta1", "v1", "v1beta2", "v2alpha1"]) == [
        "v1", "v1beta2", "v1beta1", "v2alpha1", "v1alpha3",
    ]  # fmt: skip
    assert kinds.ALL_DRA_VERSIONS == ("v1", "v1beta2", "v1beta1", "v1alpha3")
