"""Scopes: grants per cluster and namespace, wildcards, union, the configuration's shape."""

from __future__ import annotations

import pytest

from dra_mirror.service.access.errors import AccessConfigError
from dra_mirror.service.access.scope import AccessScope


def test_a_namespace_grant_shows_that_namespace_and_the_clusters_objects():
    scope = AccessScope.parse(["east/ml"])
    assert scope.allows("east", "ml")
    assert scope.allows("east")  # cluster-scoped objects of east
    assert not scope.allows("east", "team-a")
    assert not scope.allows("west")
    assert not scope.allows("west", "ml")
    assert scope.namespaces("east") == {"ml"}
    assert not scope.all_namespaces("east")


def test_wildcards_for_clusters_and_namespaces():
    every_ml = AccessScope.parse(["*/ml"])
    assert every_ml.allows("east", "ml") and every_ml.allows("west", "ml")
    assert not every_ml.allows("west", "other")
    west = AccessScope.parse(["west/*", "east/a"])
    assert west.all_namespaces("west") and west.namespaces("west") is None
    assert west.allows("west", "anything") and west.allows("east", "a")
    both = AccessScope.parse(["*/ml", "east/a"])
    assert both.namespaces("east") == {"ml", "a"}


def test_cluster_only_grant_and_nothing_and_admin():
    cluster_only = AccessScope.parse([], clusters=["east"])
    assert cluster_only.allows("east") and not cluster_only.allows("east", "ml")
    assert AccessScope.nothing().empty and not AccessScope.nothing().allows("east")
    admin = AccessScope.admin()
    assert admin.allows("any", "where") and admin.history and admin.sees_everything


def test_union_joins_grants_and_history():
    joined = AccessScope.parse(["east/a"]).union(AccessScope.parse(["east/b"], history=True))
    assert joined.namespaces("east") == {"a", "b"} and joined.history
    assert AccessScope.parse(["east/a"]).union(AccessScope.admin()).is_admin


def test_from_config_and_its_errors():
    scope = AccessScope.from_config(
        {"namespaces": ["east/ml"], "clusters": ["west"], "history": True}, where="x"
    )
    assert scope.allows("east", "ml") and scope.allows("west") and scope.history
    assert AccessScope.from_config({"admin": True}, where="x").is_admin
    for bad, words in [
        ({"namespaces": ["east"]}, "not cluster/namespace"),
        ({"namespaces": ["/ml"]}, "names no cluster"),
        ({"namespaces": "east/ml"}, "expected a list"),
        ({"history": "yes"}, "history: expected true or false"),
        ({"teams": []}, "unknown keys teams"),
        ([], "expected a mapping"),
        ({"clusters": ["a/b"]}, "is not a cluster name"),
    ]:
        with pytest.raises(AccessConfigError, match=words):
            AccessScope.from_config(bad, where="tokens[0].scope")


def test_describe_is_one_line():
    assert AccessScope.admin().describe() == "admin"
    assert AccessScope.parse(["east/ml"], clusters=["west"], history=True).describe() == (
        "east/ml, west (cluster-scoped); history"
    )
