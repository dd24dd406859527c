"""Kubernetes bearer tokens: TokenReview says who, SubjectAccessReview says what they may see.

    kubernetes:
      context: east            # the cluster that reviews tokens (kubeconfig context; absent:
                               # the in-cluster service account's own cluster)
      clusters: [east, west]   # clusters whose RBAC decides what the subject sees there
                               # (default: only the reviewing one; others stay invisible)
      audiences: []            # TokenReview spec.audiences (e.g. the mirror's own audience)
      history: namespaces      # namespaces: history allowed, filtered like everything else;
                               # rbac: only for subjects that may `get` the non-resource URL
                               # /dra-mirror/history on the reviewing cluster; never
      cacheTtl: 30   cacheSize: 1000

For a token: one `TokenReview` (authentication.k8s.io/v1) on the reviewing cluster gives the
user (name, uid, groups, extra). Then, per cluster, `SubjectAccessReview`s
(authorization.k8s.io/v1) for that user answer the one question the mirror asks — may it
`list` `resourceclaims` (group resource.k8s.io) in namespace X:

* allowed with no namespace (every namespace): the whole cluster;
* otherwise each namespace of the cluster (listed with the mirror's credentials, cached a
  minute) is asked, eight at a time; the granted ones are the scope;
* may it `list` `resourceslices` (cluster-scoped), or any namespace granted: the cluster's
  cluster-scoped objects (classes, slices, devices, nodes) are visible.

SubjectAccessReview is the authorization API meant for this; SelfSubjectRulesReview is
documented by Kubernetes as incomplete and not to be used for authorization decisions.

Promises: decisions are cached per token (by its SHA-256, never the token itself) for
`cacheTtl` seconds in a bounded LRU (`cacheSize` tokens), refusals for 5 s; concurrent requests
with one token share one review; any outage of a reviewing API refuses the request
(`ReviewUnavailable`, 503: fail closed) and is not cached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from .errors import AccessConfigError, AccessError, Forbidden, Unauthenticated
from .kube_api import ReviewApi
from .scope import ANY, AccessScope
from .static import token_hash
from .subjects import Subject

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
HISTORY_PATH = "/dra-mirror/history"
HISTORY_MODES = ("namespaces", "rbac", "never")
REFUSAL_TTL = 5.0
PARALLEL_REVIEWS = 8


@dataclass(frozen=True)
class KubernetesSettings:
    context: str | None = None
    clusters: tuple[str, ...] = ()
    audiences: tuple[str, ...] = ()
    history: str = "namespaces"
    cache_ttl: float = 30.0
    cache_size: int = 1000
    namespaces_ttl: float = 60.0

    def __post_init__(self) -> None:
        if self.history not in HISTORY_MODES:
            raise AccessConfigError(f"kubernetes.history: one of {', '.join(HISTORY_MODES)}")
        if self.cache_ttl < 0 or self.cache_size < 1:
            raise AccessConfigError("kubernetes.cacheTtl >= 0 and cacheSize >= 1")


class KubernetesTokens:
    """The `Authenticator` of Kubernetes bearer tokens (see the module docstring).

    `reviewer` is the reviewing cluster's API; `clusters` maps every cluster whose RBAC counts
    (the reviewing one included when listed) to its API."""

    method = "kubernetes"

    def __init__(
        self,
        settings: KubernetesSettings,
        *,
        reviewer: ReviewApi,
        clusters: Mapping[str, ReviewApi],
    ) -> None:
        self.settings = settings
        self.reviewer = reviewer
        self.clusters = dict(clusters)
        self._subjects: TTLCache[str, Subject] = TTLCache(settings.cache_size, settings.cache_ttl)
        self._refused: TTLCache[str, AccessError] = TTLCache(settings.cache_size, REFUSAL_TTL)
        self._namespaces: TTLCache[str, list[str]] = TTLCache(
            max(len(self.clusters), 1), settings.namespaces_ttl
        )
        self._inflight: dict[str, asyncio.Future[Subject]] = {}
        self.reviews = 0  # TokenReviews sent (tests and metrics read it)

    def claims(self, token: str) -> bool:
        return True  # asked last: any token the others do not claim may be a cluster's

    def known(self, token: str) -> bool:
        """Whether `token` is answered without a review (its decision or refusal is cached, or
        its review is under way): the caller rate-limits reviews before asking for one."""
        key = token_hash(token)
        return key in self._subjects or key in self._refused or key in self._inflight

    async def authenticate(self, token: str) -> Subject:
        key = token_hash(token)
        if (subject := self._subjects.get(key)) is not None:
            return subject
        if (refusal := self._refused.get(key)) is not None:
            raise type(refusal)(refusal.message)  # a fresh error: no traceback to grow
        pending = self._inflight.get(key)
        if pending is None:
            pending = self._inflight[key] = asyncio.ensure_future(self._review(token))
            pending.add_done_callback(lambda _f: self._inflight.pop(key, None))
        try:
            subject = await asyncio.shield(pending)
        except (Unauthenticated, Forbidden) as refused:
            self._refused[key] = refused
            raise
        self._subjects[key] = subject
        return subject

    async def _review(self, token: str) -> Subject:
        self.reviews += 1
        body: dict[str, Any] = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        if self.settings.audiences:
            body["spec"]["audiences"] = list(self.settings.audiences)
        review = await self.reviewer.create(TOKEN_REVIEWS, body)
        status = review.get("status") or {}
        if not status.get("authenticated"):
            raise Unauthenticated(f"cluster {self.reviewer.cluster} did not accept the token")
        user = status.get("user") or {}
        name = user.get("username")
        if not isinstance(name, str) or not name:
            raise Unauthenticated("the token review named no user")
        scope = await self.scope_of(user)
        if scope.empty:
            raise Forbidden(
                f"{name} may list resourceclaims in no namespace of "
                f"{', '.join(sorted(self.clusters)) or 'any cluster'}"
            )
        return Subject(
            name=name, method=self.method, scope=scope, groups=tuple(user.get("groups") or ())
        )

    async def scope_of(self, user: Mapping[str, Any]) -> AccessScope:
        limit = asyncio.Semaphore(PARALLEL_REVIEWS)
        names = sorted(self.clusters)
        found = await asyncio.gather(
            *(self._cluster_grant(self.clusters[c], user, limit) for c in names)
        )
        grants = {c: g for c, g in zip(names, found, strict=True) if g is not None}
        history = self.settings.history == "namespaces"
        if self.settings.history == "rbac":
            history = await self._allowed(self.reviewer, user, None, limit, non_resource=True)
        return AccessScope(grants=grants, history=history and bool(grants))

    async def _cluster_grant(
        self, api: ReviewApi, user: Mapping[str, Any], limit: asyncio.Semaphore
    ) -> frozenset[str] | None:
        if await self._allowed(api, user, None, limit):
            return frozenset({ANY})
        namespaces = await self._cluster_namespaces(api)
        allowed = await asyncio.gather(*(self._allowed(api, user, n, limit) for n in namespaces))
        granted = frozenset(n for n, ok in zip(namespaces, allowed, strict=True) if ok)
        if granted or await self._allowed(api, user, None, limit, resource="resourceslices"):
            return granted
        return None

    async def _cluster_namespaces(self, api: ReviewApi) -> list[str]:
        cached = self._namespaces.get(api.cluster)
        if cached is None:
            cached = self._namespaces[api.cluster] = sorted(await api.namespaces())
        return cached

    async def _allowed(
        self,
        api: ReviewApi,
        user: Mapping[str, Any],
        namespace: str | None,
        limit: asyncio.Semaphore,
        *,
        resource: str = "resourceclaims",
        non_resource: bool = False,
    ) -> bool:
        spec: dict[str, Any] = {
            "user": user.get("username"),
            "groups": list(user.get("groups") or ()),
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        if non_resource:
            spec["nonResourceAttributes"] = {"path": HISTORY_PATH, "verb": "get"}
        else:
            attributes = {"verb": "list", "group": "resource.k8s.io", "resource": resource}
            if namespace is not None:
                attributes["namespace"] = namespace
            spec["resourceAttributes"] = attributes
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        async with limit:
            review = await api.create(ACCESS_REVIEWS, body)
        return bool((review.get("status") or {}).get("allowed"))

    async def close(self) -> None:
        for future in list(self._inflight.values()):
            future.cancel()


def review_clusters(settings: KubernetesSettings, reviewing: str) -> Sequence[str]:
    """The clusters whose RBAC counts: the configured ones, else the reviewing one."""
    return settings.clusters or (reviewing,)
