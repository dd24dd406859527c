"""NVIDIA ConsumableShares as the simulator publishes it: the driver's own cases
(`cmd/gpu-kubelet-plugin/consumable_shares_test.go`, SOURCES.md), and the `shared-gpus`
scenario with dozens of claims on one H200."""

from __future__ import annotations

from collections import Counter

import pytest

from dra_mirror.service.sim.scenario import (
    ScenarioError,
    build_world,
    load_scenario,
    parse_scenario,
)
from dra_mirror.service.sim.shares import apply_shares

GPU = {"name": "gpu-0", "attributes": {}, "capacity": {"memory": {"value": "16Gi"}}}


def memory_policy(device: dict) -> dict:
    return device["capacity"]["memory"]["requestPolicy"]


def test_disabled_publishes_the_device_unchanged():
    assert apply_shares(GPU, None) is GPU and apply_shares(GPU, "disabled") is GPU


def test_unlimited_shares_consume_no_memory_by_default():
    shared = apply_shares(GPU, "unlimited")
    assert shared["allowMultipleAllocations"] is True
    assert memory_policy(shared) == {
        "default": "0",
        "validRange": {"min": "0", "max": "16384Mi", "step": "1Mi"},
    }
    assert "allowMultipleAllocations" not in GPU  # the input is left alone


def test_unaligned_memory_is_rounded_down_to_a_whole_mib():
    odd = {"name": "gpu-0", "capacity": {"memory": {"value": str(1048576 * 10 + 500)}}}
    shared = apply_shares(odd, "unlimited")
    assert shared["capacity"]["memory"]["value"] == "10Mi"
    assert memory_policy(shared)["validRange"]["max"] == "10Mi"


def test_memory_shares_default_to_the_whole_gpu():
    assert memory_policy(apply_shares(GPU, "memory")) == {
        "default": "16384Mi",
        "validRange": {"min": "1Mi", "max": "16384Mi", "step": "1Mi"},
    }


def test_a_number_of_shares_adds_a_shares_capacity():
    shared = apply_shares(GPU, "4")
    assert memory_policy(shared)["default"] == "0"
    assert shared["capacity"]["shares"] == {
        "value": "4",
        "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}},
    }


@pytest.mark.parametrize("option", ["0", "-1", "half", "1.5"])
def test_options_the_driver_refuses(option):
    with pytest.raises(ValueError, match="consumable shares"):
        apply_shares(GPU, option)
    doc = {
        "clusters": [
            {
                "name": "a",
                "versions": ["v1"],
                "nodes": [{"name": "n", "devices": [{"profile": "nvidia-h200", "shares": option}]}],
            }
        ]
    }
    with pytest.raises(ScenarioError, match="shares"):
        parse_scenario(doc)


def test_shared_gpus_dozens_of_claims_per_h200():
    store = build_world(load_scenario("shared-gpus")).stores["shared"]
    phases = Counter(
        (p["metadata"]["name"].split("-")[0], p["status"]["phase"]) for p in store.list("pods")
    )
    # 143771Mi holds 35 shares of 4Gi (411Mi left); unlimited shares take no memory; "4"
    # shares admit four claims.
    assert phases == {
        ("inference", "Running"): 35,
        ("inference", "Pending"): 5,
        ("notebook", "Running"): 24,
        ("batch", "Running"): 4,
        ("batch", "Pending"): 2,
    }
    shares: Counter[str] = Counter()
    for claim in store.list("resourceclaims"):
        for result in (
            (claim.get("status") or {}).get("allocation", {}).get("devices", {}).get("results", [])
        ):
            shares[result["pool"]] += 1
            assert result["shareID"] and result["consumedCapacity"]["memory"] in ("0", "4Gi")
    assert shares == {"shared-h200-0": 35, "shared-h200-1": 24, "shared-h200-2": 4}
