"""The review APIs of a simulated cluster, answered from its scenario's `access:` (`rbac.Access`).

    POST /apis/authentication.k8s.io/v1/tokenreviews              who is this token?
    POST /apis/authorization.k8s.io/v1/subjectaccessreviews       may user U do this?
    POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews   may I do this?
    POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews    what may I do in namespace N?

As kube-apiserver: the caller is the request's bearer token (401 for a token the server does
not know; no token is `system:anonymous`); TokenReview and SubjectAccessReview need `create`
on them (e.g. the `system:auth-delegator` ClusterRole), otherwise 403; the self reviews are
open to every authenticated user. Answers are 201 with the review object and its `status`.
A body that is not the review asked for is a 400 naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dra_mirror.service.sim.errors import ApiError, bad_request
from dra_mirror.service.sim.rbac import Access, Attributes, User

AUTHN = "authentication.k8s.io"
AUTHZ = "authorization.k8s.io"


def caller(access: Access, request: Request) -> User:
    header = request.headers.get("authorization", "")
    token = None
    if header:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise ApiError(401, "Unauthorized", "Unauthorized")
        token = value.strip()
    user = access.authenticate(token)
    if user is None:
        raise ApiError(401, "Unauthorized", "Unauthorized")
    return user


def _may_create(access: Access, user: User, group: str, resource: str) -> None:
    if not access.allows(user.name, user.groups, Attributes("create", group, resource)):
        raise ApiError(
            403,
            "Forbidden",
            f'{resource}.{group} is forbidden: User "{user.name}" cannot create resource '
            f'"{resource}" in API group "{group}" at the cluster scope',
        )


async def _review(request: Request, group: str, kind: str) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as error:
        raise bad_request(f"the body is not JSON: {error}") from error
    if not isinstance(body, dict) or body.get("kind") not in (None, kind):
        raise bad_request(f"expected a {kind} ({group}/v1)")
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise bad_request(f"{kind}.spec: required")
    return body


def _answer(group: str, kind: str, spec: dict[str, Any], status: dict[str, Any]) -> Response:
    review = {"kind": kind, "apiVersion": f"{group}/v1", "metadata": {"creationTimestamp": None},
              "spec": spec, "status": status}  # fmt: skip
    return Response(orjson.dumps(review), status_code=201, media_type="application/json")


def _attributes(spec: dict[str, Any]) -> Attributes:
    resource = spec.get("resourceAttributes")
    other = spec.get("nonResourceAttributes")
    if isinstance(resource, dict) == isinstance(other, dict):
        raise bad_request("spec: exactly one of resourceAttributes and nonResourceAttributes")
    if isinstance(other, dict):
        return Attributes(verb=str(other.get("verb") or ""), path=str(other.get("path") or "/"))
    assert isinstance(resource, dict)
    return Attributes(
        verb=str(resource.get("verb") or ""), group=str(resource.get("group") or ""),
        resource=str(resource.get("resource") or ""),
        subresource=str(resource.get("subresource") or ""), name=str(resource.get("name") or ""),
        namespace=str(resource.get("namespace") or ""),
    )  # fmt: skip


def _decision(allowed: bool) -> dict[str, Any]:
    if allowed:
        return {"allowed": True, "reason": "RBAC: allowed by a binding"}
    return {"allowed": False}


def review_routes(access: Callable[[], Access], guarded: Callable) -> list[Route]:
    """The review endpoints; `access()` is the cluster's current `Access`, `guarded` the
    server's wrapper turning `ApiError` into Status answers."""

    async def token_reviews(request: Request) -> Response:
        rbac = access()
        _may_create(rbac, caller(rbac, request), AUTHN, "tokenreviews")
        body = await _review(request, AUTHN, "TokenReview")
        spec = body["spec"]
        token = spec.get("token")
        if not isinstance(token, str):
            raise bad_request("TokenReview.spec.token: required")
        user = rbac.tokens.get(token)
        status: dict[str, Any] = {"authenticated": user is not None}
        if user is not None:
            status["user"] = user.as_status()
            if spec.get("audiences"):
                status["audiences"] = list(spec["audiences"])
        else:
            status["error"] = "invalid bearer token"
        return _answer(AUTHN, "TokenReview", spec, status)

    async def access_reviews(request: Request) -> Response:
        rbac = access()
        _may_create(rbac, caller(rbac, request), AUTHZ, "subjectaccessreviews")
        body = await _review(request, AUTHZ, "SubjectAccessReview")
        spec = body["spec"]
        user, groups = spec.get("user") or "", list(spec.get("groups") or [])
        if not user and not groups:
            raise bad_request("SubjectAccessReview.spec: at least one of user or groups")
        allowed = rbac.allows(str(user), [str(g) for g in groups], _attributes(spec))
        return _answer(AUTHZ, "SubjectAccessReview", spec, _decision(allowed))

    async def self_access_reviews(request: Request) -> Response:
        rbac = access()
        me = caller(rbac, request)
        body = await _review(request, AUTHZ, "SelfSubjectAccessReview")
        spec = body["spec"]
        allowed = rbac.allows(me.name, me.groups, _attributes(spec))
        return _answer(AUTHZ, "SelfSubjectAccessReview", spec, _decision(allowed))

    async def self_rules_reviews(request: Request) -> Response:
        rbac = access()
        me = caller(rbac, request)
        body = await _review(request, AUTHZ, "SelfSubjectRulesReview")
        spec = body["spec"]
        namespace = spec.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            raise bad_request("SelfSubjectRulesReview.spec.namespace: required")
        rules = rbac.rules(me.name, me.groups, namespace)
        resource_rules = [{k: list(r.get(k) or []) for k in
                           ("verbs", "apiGroups", "resources", "resourceNames")}
                          for r in rules if not r.get("nonResourceURLs")]  # fmt: skip
        non_resource = [{"verbs": list(r.get("verbs") or []),
                         "nonResourceURLs": list(r["nonResourceURLs"])}
                        for r in rules if r.get("nonResourceURLs")]  # fmt: skip
        status = {"resourceRules": resource_rules, "nonResourceRules": non_resource,
                  "incomplete": False}  # fmt: skip
        return _answer(AUTHZ, "SelfSubjectRulesReview", spec, status)

    base = f"/apis/{AUTHZ}/v1"
    return [
        Route(f"/apis/{AUTHN}/v1/tokenreviews", guarded(token_reviews), methods=["POST"]),
        Route(f"{base}/subjectaccessreviews", guarded(access_reviews), methods=["POST"]),
        Route(f"{base}/selfsubjectaccessreviews", guarded(self_access_reviews), methods=["POST"]),
        Route(f"{base}/selfsubjectrulesreviews", guarded(self_rules_reviews), methods=["POST"]),
    ]
