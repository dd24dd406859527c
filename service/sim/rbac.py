"""Who a simulated cluster says a bearer token is, and what RBAC lets that user do.

A scenario cluster's `access:` section (scenarios/README.md) lists the bearer tokens the API
server accepts — static users (`--token-auth-file`) and ServiceAccount tokens — the token the
written kubeconfig carries, and RBAC manifests (Role, ClusterRole, RoleBinding,
ClusterRoleBinding, rbac.authorization.k8s.io/v1). `Access` answers as kube-apiserver's
authenticators and RBAC authorizer do (plugin/pkg/auth/authorizer/rbac):

* a token's user gets the group `system:authenticated`; a ServiceAccount token's user is
  `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts` and
  `system:serviceaccounts:<ns>`; no token is `system:anonymous` (`system:unauthenticated`);
* a rule allows a request when a verb, an API group and a resource (or `resource/subresource`)
  match, `*` matching anything, and `resourceNames` (when given) contains the name;
  `nonResourceURLs` match exactly or by a trailing `*`;
* a ClusterRoleBinding's rules hold in every namespace and cluster-wide; a RoleBinding's (to
  a Role of its namespace, or to a ClusterRole) only in its namespace;
* the bootstrap roles exist: `cluster-admin` (everything, bound to group `system:masters`)
  and `system:auth-delegator` (create tokenreviews and subjectaccessreviews).

Pure code: no I/O, no clock. Malformed sections raise `ValueError` naming the entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
ANONYMOUS = "system:anonymous"


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    def as_status(self) -> dict[str, Any]:
        return {"username": self.name, "uid": self.uid, "groups": list(self.groups)}


@dataclass(frozen=True)
class Attributes:
    """What a request (or a SubjectAccessReview) asks to do."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""
    path: str = ""  # a non-resource request when set

    @property
    def non_resource(self) -> bool:
        return bool(self.path)


def _matches(values: Iterable[str], wanted: str) -> bool:
    values = list(values)
    return "*" in values or wanted in values


def rule_allows(rule: Mapping[str, Any], a: Attributes) -> bool:
    if not _matches(rule.get("verbs") or (), a.verb):
        return False
    if a.non_resource:
        for url in rule.get("nonResourceURLs") or ():
            if url == "*" or url == a.path or (url.endswith("*") and a.path.startswith(url[:-1])):
                return True
        return False
    if not _matches(rule.get("apiGroups") or (), a.group):
        return False
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    resources = list(rule.get("resources") or ())
    if not ("*" in resources or resource in resources or (
            a.subresource and f"*/{a.subresource}" in resources)):  # fmt: skip
        return False
    names = rule.get("resourceNames") or ()
    return not names or a.name in names


BOOTSTRAP_CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ],
    "system:auth-delegator": [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
         "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
         "verbs": ["create"]},
    ],
}  # fmt: skip


@dataclass
class Access:
    tokens: dict[str, User] = field(default_factory=dict)
    kubeconfig_token: str | None = None
    cluster_roles: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: dict(BOOTSTRAP_CLUSTER_ROLES)
    )
    roles: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    # (namespace or "" for cluster bindings, roleRef kind, roleRef name, subjects)
    bindings: list[tuple[str, str, str, list[dict[str, Any]]]] = field(
        default_factory=lambda: [("", "ClusterRole", "cluster-admin",
                                  [{"kind": "Group", "name": "system:masters"}])]
    )  # fmt: skip

    @classmethod
    def from_scenario(cls, doc: Mapping[str, Any], *, cluster: str) -> Access:
        where = f"cluster {cluster}: access"
        unknown = set(doc) - {"tokens", "serviceAccounts", "kubeconfigToken", "rbac"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
        access = cls()
        for i, entry in enumerate(doc.get("tokens") or []):
            token, user = entry.get("token"), entry.get("user")
            if not isinstance(token, str) or not token or not isinstance(user, str) or not user:
                raise ValueError(f"{where}.tokens[{i}]: token and user are required")
            groups = tuple(str(g) for g in entry.get("groups") or ())
            access._add_token(token, User(user, str(entry.get("uid") or f"uid-{user}"), groups))
        for i, entry in enumerate(doc.get("serviceAccounts") or []):
            ns, name, token = entry.get("namespace"), entry.get("name"), entry.get("token")
            if not all(isinstance(v, str) and v for v in (ns, name, token)):
                raise ValueError(f"{where}.serviceAccounts[{i}]: namespace, name, token required")
            user = User(f"system:serviceaccount:{ns}:{name}", f"uid-sa-{ns}-{name}",
                        ("system:serviceaccounts", f"system:serviceaccounts:{ns}"))  # fmt: skip
            access._add_token(token, user)
        access.kubeconfig_token = doc.get("kubeconfigToken") or None
        if access.kubeconfig_token is not None and access.kubeconfig_token not in access.tokens:
            raise ValueError(f"{where}.kubeconfigToken: not one of the tokens listed")
        for i, manifest in enumerate(doc.get("rbac") or []):
            access.add(manifest, where=f"{where}.rbac[{i}]")
        return access

    def _add_token(self, token: str, user: User) -> None:
        if token in self.tokens:
            raise ValueError(f"token of {user.name} is listed twice")
        self.tokens[token] = User(user.name, user.uid, (*user.groups, "system:authenticated"))

    def add(self, manifest: Mapping[str, Any], *, where: str) -> None:
        kind = manifest.get("kind")
        meta = manifest.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace") or ""
        if kind not in RBAC_KINDS or not name:
            raise ValueError(f"{where}: expected a named {', '.join(RBAC_KINDS)}")
        if kind == "ClusterRole":
            self.cluster_roles[name] = list(manifest.get("rules") or [])
        elif kind == "Role":
            if not namespace:
                raise ValueError(f"{where}: a Role needs metadata.namespace")
            self.roles[(namespace, name)] = list(manifest.get("rules") or [])
        else:
            ref = manifest.get("roleRef") or {}
            if ref.get("kind") not in ("Role", "ClusterRole") or not ref.get("name"):
                raise ValueError(f"{where}: roleRef needs kind Role|ClusterRole and a name")
            if kind == "RoleBinding" and not namespace:
                raise ValueError(f"{where}: a RoleBinding needs metadata.namespace")
            if kind == "ClusterRoleBinding" and ref["kind"] != "ClusterRole":
                raise ValueError(f"{where}: a ClusterRoleBinding refers to a ClusterRole")
            scope = namespace if kind == "RoleBinding" else ""
            self.bindings.append((scope, ref["kind"], ref["name"],
                                  list(manifest.get("subjects") or [])))  # fmt: skip

    # -- answers -----------------------------------------------------------------------

    def authenticate(self, token: str | None) -> User | None:
        """The user of `token`; None for a token this server does not know."""
        if token is None:
            return User(ANONYMOUS, "", ("system:unauthenticated",))
        return self.tokens.get(token)

    def _binds(self, subjects: list[dict[str, Any]], user: str, groups: Iterable[str]) -> bool:
        groups = set(groups)
        for s in subjects:
            kind, name = s.get("kind"), s.get("name")
            if kind == "User" and name == user:
                return True
            if kind == "Group" and name in groups:
                return True
            if kind == "ServiceAccount" and user == (
                    f"system:serviceaccount:{s.get('namespace', '')}:{name}"):  # fmt: skip
                return True
        return False

    def rules(self, user: str, groups: Iterable[str], namespace: str) -> list[dict[str, Any]]:
        """Every rule that holds for the user in `namespace` ("" = cluster-wide only)."""
        groups = tuple(groups)
        found: list[dict[str, Any]] = []
        for scope, ref_kind, ref_name, subjects in self.bindings:
            if scope and scope != namespace:
                continue
            if not self._binds(subjects, user, groups):
                continue
            if ref_kind == "ClusterRole":
                found += self.cluster_roles.get(ref_name, [])
            else:
                found += self.roles.get((scope, ref_name), [])
        return found

    def allows(self, user: str, groups: Iterable[str], attributes: Attributes) -> bool:
        namespace = "" if attributes.non_resource else attributes.namespace
        return any(rule_allows(r, attributes) for r in self.rules(user, groups, namespace))
