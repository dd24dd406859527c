"""Connections from a real kubeconfig file: contexts, their servers and tokens, exec plugins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from dra_mirror.service.clusters.config import ClusterPlan, close_all, connect, plan_clusters
from dra_mirror.service.clusters.errors import ConfigurationError


def write_kubeconfig(path: Path, users: dict[str, dict], current: str = "east") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [
            {"name": name, "cluster": {"server": f"http://127.0.0.1:{port}"}}
            for name, port in (("east", 1111), ("west", 2222))
        ],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name}} for name in ("east", "west")
        ],
    }
    path.write_text(yaml.safe_dump(config))
    return path


async def test_every_context_or_the_named_ones(tmp_path: Path) -> None:
    users = {"east": {"token": "t-east"}, "west": {"token": "t-west"}}
    kubeconfig = str(write_kubeconfig(tmp_path / "config", users))
    every = await connect(kubeconfig, None)
    try:
        assert [c.name for c in every] == ["east", "west"]
        assert [c.context for c in every] == ["east", "west"]
        hosts = [c.api_client.configuration.host for c in every]
        assert hosts == ["http://127.0.0.1:1111", "http://127.0.0.1:2222"]
        tokens = [
            await c.api_client.configuration.get_api_key_with_prefix("BearerToken") for c in every
        ]
        assert tokens == ["Bearer t-east", "Bearer t-west"]
        assert every[0].api_client is not every[1].api_client
    finally:
        await close_all(every)
    named = await connect(kubeconfig, ["west", "west"])
    try:
        assert [c.name for c in named] == ["west"]
    finally:
        await close_all(named)


async def test_unknown_context_and_missing_file_are_configuration_errors(tmp_path: Path) -> None:
    kubeconfig = str(write_kubeconfig(tmp_path / "config", {"east": {}, "west": {}}))
    with pytest.raises(ConfigurationError, match=r"no context .north.*east, west"):
        await connect(kubeconfig, ["north"])
    with pytest.raises(ConfigurationError, match="kubeconfig"):
        await connect(str(tmp_path / "absent"), None)


async def test_exec_plugin_tokens_are_refreshed_when_they_expire(tmp_path: Path) -> None:
    # An exec credential plugin (as EKS/GKE use) whose tokens are already expired: every
    # request must run it again and carry the new token.
    counter = tmp_path / "count"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        "'kind': 'ExecCredential', 'status': {'token': f'token-{n}', "
        "'expirationTimestamp': '2000-01-01T00:00:00Z'}}))\n"
    )
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    kubeconfig = str(write_kubeconfig(tmp_path / "config", {"east": exec_user, "west": {}}))
    [east] = await connect(kubeconfig, ["east"])
    try:
        configuration = east.api_client.configuration
        first = await configuration.get_api_key_with_prefix("BearerToken")
        second = await configuration.get_api_key_with_prefix("BearerToken")
        assert first == "Bearer token-2"  # token-1 came with load_kube_config
        assert second == "Bearer token-3"
    finally:
        await east.close()


async def test_in_cluster_without_a_service_account_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As in a pod whose service account token is not mounted (automountServiceAccountToken:
    # false): the kubelet still sets the service host and port.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigurationError, match="in-cluster configuration"):
        await connect(None, None)


BAD_KUBECONFIGS = {
    "garbage": ("{{{ not: yaml", "is not YAML"),
    "empty": ("", "is empty"),
    "a-list": ("- a\n- b\n", "is not a kubeconfig"),
    "no-contexts": ("apiVersion: v1\nkind: Config\nclusters: []\n", "has no contexts"),
    "contexts-not-a-list": ("contexts: {a: b}\n", "contexts is not a list"),
    "nameless-context": ("contexts: [{context: {cluster: c}}]\n", "entry without a name"),
}


@pytest.mark.parametrize("name", sorted(BAD_KUBECONFIGS))
async def test_unusable_kubeconfigs_are_one_line_configuration_errors(
    tmp_path: Path, name: str
) -> None:
    text, problem = BAD_KUBECONFIGS[name]
    path = tmp_path / name
    path.write_text(text)
    for contexts in (None, ["east"]):
        with pytest.raises(ConfigurationError) as raised:
            plan_clusters(str(path), contexts)
        message = str(raised.value)
        if contexts and name == "no-contexts":
            problem = "has no context 'east'"
        assert problem in message and str(path) in message and "\n" not in message
        with pytest.raises(ConfigurationError):
            await connect(str(path), contexts)


def test_a_dangling_current_context_does_not_matter(tmp_path: Path) -> None:
    # kubectl accepts a kubeconfig whose current-context is gone when --context names one
    path = write_kubeconfig(tmp_path / "config", {"east": {}, "west": {}}, current="gone")
    assert plan_clusters(str(path), ["west"]) == ClusterPlan(str(path), ("west",))
    assert plan_clusters(str(path), None).contexts == ("east", "west")


async def test_a_dangling_current_context_connects(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {"east": {}, "west": {}}, current="gone")
    [west] = await connect(str(path), ["west"])
    try:
        assert west.api_client.configuration.host == "http://127.0.0.1:2222"
    finally:
        await west.close()


def test_contexts_must_name_clusters_with_servers_and_existing_users(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", {"east": {}})  # no user "west"
    with pytest.raises(ConfigurationError, match="names user 'west', which is not in it"):
        plan_clusters(str(path), ["west"])
    config = yaml.safe_load(path.read_text())
    config["clusters"][0]["cluster"] = {}
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigurationError, match="cluster 'east', which is not in it or has no"):
        plan_clusters(str(path), ["east"])


def test_no_kubeconfig_at_all_says_how_to_give_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigurationError) as raised:
        plan_clusters(None, None)
    message = str(raised.value)
    assert message.startswith(f"no kubeconfig found at {tmp_path}/.kube/config")
    assert "--kubeconfig" in message and "KUBECONFIG" in message and "pod" in message


def test_a_kubeconfig_path_list_merges_as_kubectl_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write_kubeconfig(tmp_path / "first", {"east": {}, "west": {}})
    second = tmp_path / "second"
    second.write_text(
        yaml.safe_dump(
            {"clusters": [{"name": "north", "cluster": {"server": "http://127.0.0.1:3333"}}],
             "contexts": [{"name": "north", "context": {"cluster": "north"}},
                          {"name": "east", "context": {"cluster": "nowhere"}}]}
        )
    )  # fmt: skip
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'absent'}:{second}")
    plan = plan_clusters(None, None)
    assert plan.contexts == ("east", "west", "north")  # east from the first file wins


async def test_the_environment_s_proxy_is_read_once_and_no_proxy_is_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = str(write_kubeconfig(tmp_path / "config", {"east": {}, "west": {}}))
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://someone:secret@proxy.example:3128")
    [east] = await connect(kubeconfig, ["east"])
    try:
        rest = east.api_client.rest_client
        assert rest.proxy == "http://proxy.example:3128"
        assert rest.proxy_headers == {"Proxy-Authorization": "Basic c29tZW9uZTpzZWNyZXQ="}
        assert rest.pool_manager.trust_env is False  # nothing read again per request
    finally:
        await east.close()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    [east] = await connect(kubeconfig, ["east"])
    try:
        assert east.api_client.rest_client.proxy is None
    finally:
        await east.close()
