"""What a subject may see: clusters, namespaces in them (or every one), and history.

    AccessScope.admin()                       everything, history included
    AccessScope.parse(["east/ml", "west/*"])  namespace ml of east; every namespace of west
    AccessScope.parse(["*/team-a"])           namespace team-a of every cluster
    AccessScope.parse([], clusters=["east"])  east's cluster-scoped objects, no namespace
    AccessScope.nothing()                     nothing at all (a subject with no grant)

Rules (the same everywhere the mirror answers):

* a namespaced object (claim, template, pod) is visible when its cluster and namespace are
  granted; outside the scope it does not exist for the subject;
* cluster-scoped objects (device classes, slices, devices, nodes) are visible for every
  cluster the scope names at all (a grant of any namespace there, or `clusters`);
* `history` says whether history and audits may be asked at all; what they aggregate is still
  only what `allows` allows.

`allows(cluster, namespace="")` is the one question readers ask (`schema.reader.ScopedReader`
calls it for every record); it is a dictionary lookup, cheap enough for every row of a page.
Scopes are immutable and hashable; `union` joins the grants of several groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import AccessConfigError

ANY = "*"


@dataclass(frozen=True)
class AccessScope:
    """Grants per cluster: a cluster maps to the namespaces granted there (ANY: every one)."""

    grants: Mapping[str, frozenset[str]] = field(default_factory=dict)
    history: bool = False
    is_admin: bool = False

    @classmethod
    def admin(cls) -> AccessScope:
        return cls(grants={ANY: frozenset({ANY})}, history=True, is_admin=True)

    @classmethod
    def everything(cls) -> AccessScope:
        """What a mirror without authentication serves (`--insecure-no-auth`, tests)."""
        return cls.admin()

    @classmethod
    def nothing(cls) -> AccessScope:
        return cls()

    @classmethod
    def parse(
        cls,
        namespaces: Iterable[str] = (),
        *,
        clusters: Iterable[str] = (),
        history: bool = False,
        where: str = "scope",
    ) -> AccessScope:
        """Grants from `cluster/namespace` strings (either part may be `*`) and from cluster
        names whose cluster-scoped objects alone are visible. `where` names the place in the
        configuration for error messages."""
        grants: dict[str, set[str]] = {}
        for item in namespaces:
            if not isinstance(item, str) or item.count("/") != 1:
                raise AccessConfigError(
                    f"{where}: {item!r} is not cluster/namespace (either may be *)"
                )
            cluster, namespace = (part.strip() for part in item.split("/"))
            if not cluster or not namespace:
                raise AccessConfigError(f"{where}: {item!r} names no cluster or no namespace")
            grants.setdefault(cluster, set()).add(namespace)
        for cluster in clusters:
            if not isinstance(cluster, str) or not cluster.strip() or "/" in cluster:
                raise AccessConfigError(f"{where}: cluster {cluster!r} is not a cluster name")
            grants.setdefault(cluster.strip(), set())
        return cls(grants={c: frozenset(ns) for c, ns in grants.items()}, history=history)

    @classmethod
    def from_config(cls, value: Any, *, where: str) -> AccessScope:
        """A scope as the configuration writes it:

        {admin: true}
        {namespaces: [east/ml, "west/*"], clusters: [east], history: true}"""
        if not isinstance(value, Mapping):
            raise AccessConfigError(f"{where}: expected a mapping (namespaces, clusters, history)")
        unknown = set(value) - {"admin", "namespaces", "clusters", "history"}
        if unknown:
            raise AccessConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
        if value.get("admin") is True:
            return cls.admin()
        if value.get("admin") not in (None, False):
            raise AccessConfigError(f"{where}.admin: expected true or false")
        history = value.get("history", False)
        if not isinstance(history, bool):
            raise AccessConfigError(f"{where}.history: expected true or false")
        lists = {}
        for key in ("namespaces", "clusters"):
            items = value.get(key) or []
            if not isinstance(items, list):
                raise AccessConfigError(f"{where}.{key}: expected a list")
            lists[key] = items
        return cls.parse(
            lists["namespaces"], clusters=lists["clusters"], history=history, where=where
        )

    # -- questions ---------------------------------------------------------------------

    def _namespaces(self, cluster: str) -> frozenset[str] | None:
        exact = self.grants.get(cluster)
        wildcard = self.grants.get(ANY)
        if exact is None:
            return wildcard
        if wildcard is None:
            return exact
        return exact | wildcard

    def allows(self, cluster: str, namespace: str = "") -> bool:
        """May the subject see objects of `cluster` in `namespace` ("" = cluster-scoped)?"""
        if self.is_admin:
            return True
        granted = self._namespaces(cluster)
        if granted is None:
            return False
        return not namespace or ANY in granted or namespace in granted

    def allows_cluster(self, cluster: str) -> bool:
        return self.allows(cluster, "")

    def may_hide(self) -> bool:
        """Whether `allows` can say no (the reads of the graph filter only then)."""
        return not (self.is_admin or ANY in self.grants.get(ANY, frozenset()))

    def all_namespaces(self, cluster: str) -> bool:
        """Does the scope see every namespace of `cluster` (so aggregates over the whole
        cluster may be shown as they are)?"""
        if self.is_admin:
            return True
        granted = self._namespaces(cluster)
        return granted is not None and ANY in granted

    def namespaces(self, cluster: str) -> frozenset[str] | None:
        """The namespaces granted in `cluster`: None when every one is (or the cluster is not
        in the scope at all: ask `allows_cluster` first)."""
        if self.is_admin:
            return None
        granted = self._namespaces(cluster)
        if granted is None or ANY in granted:
            return None
        return granted

    def namespace_grants(self) -> Mapping[str, frozenset[str]] | None:
        """The grants, for readers that filter by them themselves (the history's SQL): None
        when every namespace of every cluster is visible."""
        return None if not self.may_hide() else self.grants

    @property
    def sees_everything(self) -> bool:
        return self.is_admin or (self.history and self.all_namespaces(ANY))

    @property
    def empty(self) -> bool:
        return not self.is_admin and not self.grants

    def union(self, other: AccessScope) -> AccessScope:
        if self.is_admin or other.is_admin:
            return AccessScope.admin()
        grants = {c: set(ns) for c, ns in self.grants.items()}
        for cluster, namespaces in other.grants.items():
            grants.setdefault(cluster, set()).update(namespaces)
        return AccessScope(
            grants={c: frozenset(ns) for c, ns in grants.items()},
            history=self.history or other.history,
        )

    def describe(self) -> str:
        """One line for logs and `/readyz`: `admin`, or `east/ml, west/*; history`."""
        if self.is_admin:
            return "admin"
        if not self.grants:
            return "nothing"
        parts = []
        for cluster in sorted(self.grants):
            namespaces = sorted(self.grants[cluster])
            parts += [f"{cluster}/{n}" for n in namespaces] or [f"{cluster} (cluster-scoped)"]
        return ", ".join(parts) + ("; history" if self.history else "")

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.grants.items())), self.history, self.is_admin))
