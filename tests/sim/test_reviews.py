"""The simulator's review APIs: TokenReview and (Self)SubjectAccessReview / SelfSubjectRulesReview
answered from the RBAC objects of the `access` scenario, over HTTP, as kube-apiserver answers."""

from __future__ import annotations

import httpx
import pytest
import yaml

from dra_mirror.service.sim.rbac import Access, Attributes, rule_allows
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.scenario import (
    ScenarioError,
    build_world,
    load_scenario,
    parse_scenario,
)

REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
TOKENS = "/apis/authentication.k8s.io/v1/tokenreviews"


def sar(user: str, groups: list[str], **attributes) -> dict:
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
    }


@pytest.fixture
async def east(tmp_path):
    world = build_world(load_scenario("access"))
    async with Simulator(world.specs, kubeconfig_path=tmp_path / "kubeconfig") as sim:
        yield sim


def client(sim, token: str | None = "mirror-east") -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=sim.url("east"), headers=headers)


async def test_the_kubeconfig_carries_each_clusters_token(east, tmp_path):
    config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
    users = {u["name"]: u["user"] for u in config["users"]}
    assert users == {"east": {"token": "mirror-east"}, "west": {"token": "mirror-west"}}


async def test_token_review(east):
    async with client(east) as http:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": "alice-token", "audiences": ["dra-mirror"]},
        }
        answer = await http.post(TOKENS, json=body)
        assert answer.status_code == 201
        status = answer.json()["status"]
        assert status["authenticated"] is True
        assert status["user"]["username"] == "alice"
        assert status["user"]["groups"] == ["ml-team", "system:authenticated"]
        body["spec"]["token"] = "forged"
        assert (await http.post(TOKENS, json=body)).json()["status"]["authenticated"] is False
        sa = dict(body, spec={"token": "grafana-east"})
        user = (await http.post(TOKENS, json=sa)).json()["status"]["user"]
        assert user["username"] == "system:serviceaccount:monitoring:grafana"
        assert "system:serviceaccounts:monitoring" in user["groups"]


async def test_subject_access_review_follows_role_and_cluster_role_bindings(east):
    async with client(east) as http:

        async def allowed(user, groups, **attributes) -> bool:
            answer = await http.post(REVIEWS, json=sar(user, groups, **attributes))
            assert answer.status_code == 201, answer.text
            return answer.json()["status"]["allowed"]

        claims = {"verb": "list", "group": "resource.k8s.io", "resource": "resourceclaims"}
        assert await allowed("alice", ["ml-team"], namespace="ml", **claims)
        assert not await allowed("alice", ["ml-team"], namespace="research", **claims)
        assert not await allowed("alice", ["ml-team"], **claims)  # not cluster-wide
        assert await allowed("bob", ["platform"], **claims)
        assert await allowed("bob", ["platform"], namespace="research", **claims)
        assert not await allowed(
            "bob",
            ["platform"],
            namespace="ml",
            verb="delete",
            group="resource.k8s.io",
            resource="resourceclaims",
        )
        assert not await allowed("carol", [], namespace="ml", **claims)
        slices = {"verb": "list", "group": "resource.k8s.io", "resource": "resourceslices"}
        assert await allowed("system:serviceaccount:monitoring:grafana", [], **slices)
        history = {
            "spec": {
                "user": "bob",
                "nonResourceAttributes": {"path": "/dra-mirror/history", "verb": "get"},
            }
        }
        assert (await http.post(REVIEWS, json=history)).json()["status"]["allowed"]
        history["spec"]["user"] = "alice"
        assert not (await http.post(REVIEWS, json=history)).json()["status"]["allowed"]


async def test_callers_need_a_known_token_and_the_right_to_review(east):
    body = sar("alice", [], verb="list", resource="pods")
    async with client(east, token="nonsense") as http:
        answer = await http.post(REVIEWS, json=body)
        assert answer.status_code == 401 and answer.json()["reason"] == "Unauthorized"
        assert (await http.get("/api/v1/namespaces")).status_code == 401
    async with client(east, token="alice-token") as http:
        answer = await http.post(REVIEWS, json=body)
        assert answer.status_code == 403
        assert (
            'User "alice" cannot create resource "subjectaccessreviews"' in answer.json()["message"]
        )
    async with client(east, token=None) as http:
        assert (await http.post(TOKENS, json=body)).status_code == 403  # system:anonymous
    async with client(east) as http:
        bad = await http.post(REVIEWS, json={"kind": "SubjectAccessReview", "spec": {"user": "x"}})
        assert bad.status_code == 400 and "exactly one of" in bad.json()["message"]
        assert (await http.post(REVIEWS, content=b"[")).status_code == 400


async def test_self_reviews_answer_for_the_caller(east):
    async with client(east, token="alice-token") as http:
        own = {
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": "list",
                    "group": "resource.k8s.io",
                    "resource": "resourceclaims",
                    "namespace": "ml",
                }
            },
        }
        answer = await http.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=own)
        assert answer.status_code == 201 and answer.json()["status"]["allowed"]
        rules = await http.post(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            json={"kind": "SelfSubjectRulesReview", "spec": {"namespace": "ml"}},
        )
        found = rules.json()["status"]["resourceRules"]
        assert {
            "verbs": ["list"],
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims"],
            "resourceNames": [],
        } in found


def test_rule_matching_as_the_rbac_authorizer():
    rule = {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods", "pods/log"]}
    assert rule_allows(rule, Attributes("list", "", "pods"))
    assert rule_allows(rule, Attributes("get", "", "pods", subresource="log"))
    assert not rule_allows(rule, Attributes("get", "", "pods", subresource="exec"))
    assert not rule_allows(rule, Attributes("list", "apps", "pods"))
    named = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "resourceNames": ["a"]}
    assert rule_allows(named, Attributes("delete", "x", "y", name="a"))
    assert not rule_allows(named, Attributes("delete", "x", "y", name="b"))
    urls = {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/metrics/*"]}
    assert rule_allows(urls, Attributes("get", path="/metrics/cadvisor"))
    assert not rule_allows(urls, Attributes("get", path="/version"))


def test_bad_access_sections_are_scenario_errors():
    base = {"clusters": [{"name": "c", "access": {}}]}
    for access, words in [
        ({"tokens": [{"token": "t"}]}, "token and user are required"),
        ({"kubeconfigToken": "missing"}, "not one of the tokens"),
        ({"rbac": [{"kind": "Pod", "metadata": {"name": "x"}}]}, "expected a named"),
        (
            {
                "rbac": [
                    {
                        "kind": "RoleBinding",
                        "metadata": {"name": "x"},
                        "roleRef": {"kind": "Role", "name": "r"},
                    }
                ]
            },
            "needs metadata.namespace",
        ),
        ({"users": []}, "unknown keys users"),
    ]:
        base["clusters"][0]["access"] = access
        with pytest.raises(ScenarioError, match=words):
            parse_scenario(base)
    assert Access.from_scenario({}, cluster="c").authenticate(None).name == "system:anonymous"
