"""The Helm chart without Helm (it cannot be installed here): the shipped values validate
against values.schema.json and bad ones do not; every value a template reads exists in
values.yaml and in the schema; template blocks balance and every include is defined; the
ClusterRole grants exactly get/list/watch on what the watchers watch; the Kubernetes access
method's grants (system:auth-delegator, list namespaces) only when asked for."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "helm" / "dra-mirror"
TEMPLATES = sorted((CHART / "templates").glob("*"))
VALUE_REFERENCE = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
ACTION = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.DOTALL)


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _with(values: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(values)
    *parents, leaf = path.split(".")
    node = changed
    for key in parents:
        node = node[key]
    node[leaf] = value
    return changed


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "dra-mirror"
    assert chart["type"] == "application"


def test_shipped_values_are_valid(
    values: dict[str, Any], validator: jsonschema.Draft7Validator
) -> None:
    assert sorted(error.message for error in validator.iter_errors(values)) == []


GOOD_VARIANTS = [
    ("mode", "split", "redis.urlSecret.name", "redis-url"),
    ("clusters.kubeconfigSecret", {"name": "clusters", "key": "config"},
     "clusters.contexts", ["east", "west"]),
    ("redis.urlSecret", {"name": "redis", "key": "url"}, "allInOne.replicas", 2),
    ("ingress.enabled", True, "ingress.tls", {"enabled": True, "secretName": "dra-mirror-tls"}),
    ("mode", "split", "redis.deploy.enabled", True),  # the chart's own Redis
    ("redis.deploy.enabled", True, "allInOne.replicas", 2),
    ("redis.deploy.enabled", True, "redis.deploy.persistence",
     {"size": "20Gi", "storageClassName": "fast-ssd"}),
    ("access.kubernetesReview", True, "access.config", "/etc/dra-mirror/access.yaml"),
    ("alerts.configMap", {"name": "dra-mirror-alerts", "key": "alerts.yaml"},
     "slack.botToken", {"secretName": "slack", "key": "bot-token"}),
    ("access.secret", {"name": "dra-mirror-access", "key": "access.yaml"},
     "access.insecureNoAuth", False),
    ("slack.signingSecret", {"secretName": "slack", "key": "signing-secret"},
     "alerts.prometheusRule.selfHealth",
     {"enabled": True, "watchLagSeconds": 120, "outboxBacklog": 5000, "for": "15m"}),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "path2", "value2"), GOOD_VARIANTS)
def test_good_variants_are_valid(
    values: dict[str, Any],
    validator: jsonschema.Draft7Validator,
    path: str,
    value: Any,
    path2: str,
    value2: Any,
) -> None:
    variant = _with(_with(values, path, value), path2, value2)
    assert sorted(error.message for error in validator.iter_errors(variant)) == []


BAD_VALUES = [
    ("mode", "both"),
    ("mode", "split"),  # split without a Redis URL Secret
    ("watchers.replicas", 1),  # watchers need a standby for the lease
    ("api.replicas", 0),
    ("image.repository", ""),
    ("image.pullPolicy", "Sometimes"),
    ("service.port", 70000),
    ("service.port", "8000"),
    ("log.json", "yes"),
    ("database.retentionDays", -1),
    ("database.peakWarmDays", "35"),
    ("log.level", "CHATTY"),
    ("securityContext.readOnlyRootFilesystem", False),
    ("podSecurityContext.runAsNonRoot", False),
    ("serviceMonitor.interval", "soon"),
    ("ingress.path", "graphql"),
    ("ingress.tls", {"enabled": True, "secretName": ""}),
    ("clusters.contexts", ["east"]),  # contexts without a kubeconfig Secret
    ("clusters.kubeconfigSecret", {"name": "clusters"}),
    ("allInOne.replicas", 2),  # two in-memory copies of the state without Redis
    ("redis.urlSecret", {"name": "redis", "key": ""}),
    ("allInOne.resources", {"requests": {"memory": "a lot"}}),
    ("replicaCount", 3),  # unknown top-level key
    ("redis.deploy.persistence", {"size": "a lot", "storageClassName": ""}),
    ("redis.deploy.image", {"repository": "redis", "tag": "", "pullPolicy": "Always"}),
    ("redis.deploy.appendonly", False),  # persistence is not optional
    ("access.kubernetesReview", "yes"),
    ("slack.botToken", {"secretName": "slack", "key": ""}),
    ("access.secret", {"name": "dra-mirror-access", "key": ""}),
    ("slack.token", "xoxb-1"),  # a token only from a Secret, never in values
    ("alerts.configMap", {"name": "dra-mirror-alerts", "key": ""}),
    ("alerts.prometheusRule.selfHealth", {"enabled": True, "for": "soon"}),
    ("alerts.prometheusRule.selfHealth", {"outboxBacklog": 0}),
]


@pytest.mark.parametrize(("path", "value"), BAD_VALUES, ids=[f"{p}={v!r}" for p, v in BAD_VALUES])
def test_bad_values_are_rejected(
    values: dict[str, Any], validator: jsonschema.Draft7Validator, path: str, value: Any
) -> None:
    assert list(validator.iter_errors(_with(values, path, value))), f"{path}={value!r} accepted"


def test_the_alerts_file_and_slack_secrets_reach_the_process() -> None:
    """The ConfigMap is mounted where DRA_MIRROR_ALERTS_CONFIG points; the Slack token and
    signing secret come from Secrets as the variables the alerts and Slack read."""
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert "mountPath: /etc/dra-mirror/alerts\n" in helpers
    assert "value: /etc/dra-mirror/alerts/{{ .Values.alerts.configMap.key }}" in helpers
    assert "configMap:\n    name: {{ .Values.alerts.configMap.name }}" in helpers
    # The access file likewise, from a Secret.
    assert "mountPath: /etc/dra-mirror/access\n" in helpers
    assert "value: /etc/dra-mirror/access/{{ .Values.access.secret.key }}" in helpers
    assert "secret:\n    secretName: {{ .Values.access.secret.name }}" in helpers
    for variable, value in (
        ("DRA_MIRROR_SLACK_BOT_TOKEN", "botToken"),
        ("DRA_MIRROR_SLACK_SIGNING_SECRET", "signingSecret"),
    ):
        block = helpers[helpers.index(f"- name: {variable}\n") :]
        assert block.split("\n", 5)[1:5] == [
            "  valueFrom:",
            "    secretKeyRef:",
            f"      name: {{{{ .Values.slack.{value}.secretName }}}}",
            f"      key: {{{{ .Values.slack.{value}.key }}}}",
        ]


def _referenced_value_paths() -> set[str]:
    return {
        match.group(1).lstrip(".")
        for template in TEMPLATES
        for match in VALUE_REFERENCE.finditer(template.read_text())
    }


def test_templates_read_values() -> None:
    assert {"mode", "service.port", "clusters.contexts"} <= _referenced_value_paths()


@pytest.mark.parametrize("path", sorted(_referenced_value_paths()))
def test_referenced_value_exists(values: dict[str, Any], path: str) -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    node: Any = values
    schema_node: dict[str, Any] = schema
    for key in path.split("."):
        assert isinstance(node, dict) and key in node, f".Values.{path}: no {key!r} in values.yaml"
        node = node[key]
        properties = schema_node.get("properties", {})
        assert key in properties, f".Values.{path}: no {key!r} in values.schema.json"
        schema_node = properties[key]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: path.name)
def test_template_blocks_balance_and_includes_are_defined(template: Path) -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    defined = set(re.findall(r'\{\{-?\s*define\s+"([^"]+)"', helpers))
    depth = 0
    for action in ACTION.findall(template.read_text()):
        if action.startswith("/*"):
            continue
        keyword = action.split(maxsplit=1)[0] if action else ""
        if keyword in {"if", "range", "with", "define"}:
            depth += 1
        elif keyword == "end":
            depth -= 1
            assert depth >= 0, f"{template.name}: `end` without an open block"
        for name in re.findall(r'include\s+"([^"]+)"', action):
            assert name in defined, f"{template.name}: include of undefined {name!r}"
    assert depth == 0, f"{template.name}: {depth} block(s) left open"


def _cluster_role_rules() -> list[dict[str, Any]]:
    text = (CHART / "templates" / "clusterrole.yaml").read_text()
    # The rules are literal; only names and labels are templated.
    document = yaml.safe_load(ACTION.sub("templated", text))
    assert document["kind"] == "ClusterRole"
    return document["rules"]


def test_cluster_role_is_read_only() -> None:
    for rule in _cluster_role_rules():
        assert sorted(rule["verbs"]) == ["get", "list", "watch"]
        assert set(rule) == {"apiGroups", "resources", "verbs"}, "no resourceNames, no URLs"


def test_cluster_role_grants_the_verbs_each_kind_registers() -> None:
    from dra_mirror.service.clusters.resources import GRANTED

    granted = {
        (group, resource): sorted(rule["verbs"])
        for rule in _cluster_role_rules()
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert granted == {resource: sorted(verbs) for resource, verbs in GRANTED.items()}


def test_cluster_role_grants_exactly_what_is_watched() -> None:
    try:
        from dra_mirror.service.clusters.resources import WATCHED
    except ImportError as error:
        pytest.fail(
            "service.clusters.resources.WATCHED (a tuple of (group, plural)) is missing: "
            f"the clusters package must expose what it watches ({error})",
            pytrace=False,
        )
    granted = {
        (group, resource)
        for rule in _cluster_role_rules()
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert granted == set(WATCHED)


def _redis_template() -> dict[str, Any]:
    """The chart's own Redis StatefulSet, templating replaced by placeholders."""
    text = ACTION.sub("templated", (CHART / "templates" / "redis.yaml").read_text())
    # lines that were only template actions (blocks, comments) are dropped
    text = "\n".join(line for line in text.splitlines() if line.strip() != "templated")
    documents = list(yaml.safe_load_all(text))
    (stateful,) = [d for d in documents if d and d.get("kind") == "StatefulSet"]
    return stateful


def test_the_charts_redis_keeps_an_append_only_file_on_a_volume() -> None:
    stateful = _redis_template()
    (container,) = stateful["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert pairs["--appendonly"] == "yes" and pairs["--appendfsync"] == "everysec"
    assert pairs["--maxmemory-policy"] == "noeviction" and pairs["--dir"] == "/data"
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
    (claim,) = stateful["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_charts_redis_url_reaches_the_pods_from_a_secret() -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    env = helpers[helpers.index('define "dra-mirror.env"') :]
    assert "redis.deploy.enabled" in env and "-redis-url" in env
    text = (CHART / "templates" / "redis.yaml").read_text()
    assert "kind: Secret" in text and "redis://" in text


def test_the_kubernetes_access_method_is_granted_only_when_asked_for() -> None:
    text = (CHART / "templates" / "access-rbac.yaml").read_text()
    actions = [a for a in ACTION.findall(text) if not a.startswith("/*")]
    assert actions[0] == "if .Values.access.kubernetesReview" and actions[-1] == "end"
    rendered = "\n".join(line for line in ACTION.sub("templated", text).splitlines()
                         if line.strip() != "templated")  # fmt: skip
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = {(d["kind"], d["roleRef"]["name"] if "roleRef" in d else None) for d in documents}
    assert kinds == {("ClusterRoleBinding", "system:auth-delegator"), ("ClusterRole", None),
                     ("ClusterRoleBinding", "templated-access-review")}  # fmt: skip
    (role,) = [d for d in documents if d["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}]
    for binding in (d for d in documents if d["kind"] == "ClusterRoleBinding"):
        (subject,) = binding["subjects"]
        assert subject["kind"] == "ServiceAccount"
    assert text.count('include "dra-mirror.serviceAccountName"') == 2
    # what the access code asks of the reviewing cluster with these grants
    from dra_mirror.service.access import kube_api, kubernetes

    assert '"/api/v1/namespaces"' in Path(kube_api.__file__).read_text()  # list, paged
    assert kubernetes.TOKEN_REVIEWS.endswith("/tokenreviews")  # system:auth-delegator's
    assert kubernetes.ACCESS_REVIEWS.endswith("/subjectaccessreviews")


def _readme_yaml_blocks() -> list[Any]:
    text = (CHART / "README.md").read_text()
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)]


def _merged(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        return {k: _merged(base.get(k), v) for k, v in override.items()} | {
            k: v for k, v in base.items() if k not in override
        }
    return copy.deepcopy(override)


def test_the_documented_redis_cluster_shape_is_accepted(
    values: dict[str, Any], validator: jsonschema.Draft7Validator
) -> None:
    """The chart's README points the chart at an operated Redis Cluster: its Secret's URL is
    one the mirror reads as a cluster, its values validate, name that Secret, and leave the
    chart's own Redis out."""
    from dra_mirror.service.settings import StoreSettings
    from dra_mirror.service.stores.redis_connect import is_cluster_url

    (secret,) = [b for b in _readme_yaml_blocks() if b.get("kind") == "Secret"]
    (override,) = [b for b in _readme_yaml_blocks() if "redis" in b and "kind" not in b]
    url = secret["stringData"]["url"]
    assert is_cluster_url(url) and StoreSettings(redis_url=url).redis_url == url
    variant = _merged(values, override)
    assert sorted(error.message for error in validator.iter_errors(variant)) == []
    assert variant["mode"] == "split" and variant["redis"]["deploy"]["enabled"] is False
    assert variant["redis"]["urlSecret"] == {"name": secret["metadata"]["name"], "key": "url"}


def test_a_url_secret_wins_over_the_charts_own_redis() -> None:
    """What the README promises of the rendering: with `redis.urlSecret` the pods read the URL
    from that Secret, and redis.yaml (the chart's own Redis) renders nothing."""
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    env = helpers[helpers.index('define "dra-mirror.env"') :]
    actions = [a for a in ACTION.findall(env) if "redis" in a]
    assert actions[:2] == ["if .Values.redis.urlSecret.name", ".Values.redis.urlSecret.name"]
    assert "else if .Values.redis.deploy.enabled" in actions
    assert actions.index("else if .Values.redis.deploy.enabled") > 1
    first = next(a for a in ACTION.findall((CHART / "templates" / "redis.yaml").read_text())
                 if not a.startswith("/*"))  # fmt: skip
    assert first == "if and .Values.redis.deploy.enabled (not .Values.redis.urlSecret.name)"
