"""The simulator serves DeviceTaintRule at the versions its Kubernetes version has: v1alpha3
from 1.33, v1beta2 from 1.36, v1 from 1.37; nowhere else. A scenario says its version
(`kubernetes: "1.37"`) and may hold rules; a client creates and deletes them."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from dra_mirror.service.sim.run import ClusterSpec, Simulator
from dra_mirror.service.sim.scenario import build_world
from dra_mirror.service.sim.scenario_file import ScenarioError, parse_scenario
from dra_mirror.service.sim.store import ClusterStore
from tests.sim.conftest import api_client_for

GROUP = "resource.k8s.io"


def rule_body(version: str) -> dict:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-0"},
            "taint": {"key": "example.com/drain", "effect": "NoExecute"},
        },
    }


@pytest.mark.parametrize(
    ("kubernetes", "served"),
    [
        (32, []),
        (35, ["v1alpha3"]),
        (36, ["v1beta2", "v1alpha3"]),
        (37, ["v1", "v1beta2", "v1alpha3"]),
    ],
)
async def test_rules_are_served_at_the_versions_of_the_kubernetes_version(
    tmp_path: Path, kubernetes: int, served: list[str]
) -> None:
    spec = ClusterSpec(ClusterStore("alpha"), versions=("v1",), kubernetes=kubernetes)
    async with Simulator([spec], kubeconfig_path=tmp_path / "kubeconfig") as sim:
        assert sim.kubeconfig_path is not None
        async with await api_client_for(sim.kubeconfig_path, "alpha") as api:
            assert (await client.VersionApi(api).get_code()).minor == str(kubernetes)
            custom = client.CustomObjectsApi(api)
            for version in ("v1", "v1beta2", "v1alpha3"):
                if version not in served:
                    with pytest.raises(ApiException) as error:
                        await custom.list_cluster_custom_object(GROUP, version, "devicetaintrules")
                    assert error.value.status == 404
                    continue
                created = await custom.create_cluster_custom_object(
                    GROUP, version, "devicetaintrules", rule_body(version)
                )
                assert created["apiVersion"] == f"{GROUP}/{version}"
                listed = await custom.list_cluster_custom_object(GROUP, served[0], "devicetaintrules")  # fmt: skip
                assert [r["metadata"]["name"] for r in listed["items"]] == ["drain"]
                await custom.delete_cluster_custom_object(
                    GROUP, version, "devicetaintrules", "drain"
                )
            assert sim.clusters["alpha"].count("devicetaintrules") == 0


def test_a_scenario_says_its_kubernetes_version_and_holds_rules() -> None:
    doc = {
        "name": "rules",
        "clusters": [{"name": "east", "kubernetes": "1.36", "objects": [rule_body("v1beta2")]}],
    }
    scenario = parse_scenario(doc)
    assert scenario.clusters[0].kubernetes == 36
    world = build_world(scenario)
    assert world.specs[0].kubernetes == 36
    assert world.specs[0].store.count("devicetaintrules") == 1
    with pytest.raises(ScenarioError, match=r"kubernetes: 'latest' is not a version like 1\.36"):
        parse_scenario({"name": "bad", "clusters": [{"name": "east", "kubernetes": "latest"}]})


@pytest.mark.parametrize(("kubernetes", "kept"), [(34, True), (35, False)])
async def test_a_rule_s_class_and_cel_selectors_are_served_by_1_34_and_tombstoned_in_1_35(
    tmp_path: Path, kubernetes: int, kept: bool
) -> None:
    body = rule_body("v1alpha3")
    extra = {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": "true"}}]}
    body["spec"]["deviceSelector"].update(extra)
    spec = ClusterSpec(ClusterStore("alpha"), versions=("v1",), kubernetes=kubernetes)
    async with Simulator([spec], kubeconfig_path=tmp_path / "kubeconfig") as sim:
        assert sim.kubeconfig_path is not None
        async with await api_client_for(sim.kubeconfig_path, "alpha") as api:
            custom = client.CustomObjectsApi(api)
            created = await custom.create_cluster_custom_object(
                GROUP, "v1alpha3", "devicetaintrules", body
            )
            listed = await custom.list_cluster_custom_object(GROUP, "v1alpha3", "devicetaintrules")
    for served in (created, listed["items"][0]):
        selector = served["spec"]["deviceSelector"]
        assert selector == ({**rule_body("v1alpha3")["spec"]["deviceSelector"], **extra} if kept else rule_body("v1alpha3")["spec"]["deviceSelector"])  # fmt: skip
