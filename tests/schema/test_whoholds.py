"""`whoHolds` in every form it accepts, answers checked against the claims' allocations."""

from __future__ import annotations

import pytest

from . import world

Q = """query($device: String!, $cluster: String) { whoHolds(device: $device, cluster: $cluster) {
  cluster request shareID consumedCapacity since
  device { cluster driver pool name uuid }
  claim { namespace name } pods { namespace name } } }"""


def truth(device_keys) -> list[tuple]:
    held = world.holders()
    return sorted(
        (k, ns, claim, share) for k in device_keys for ns, claim, share in held.get(k, [])
    )


def answer(data) -> list[tuple]:
    return sorted(
        (
            (
                h["device"]["cluster"],
                h["device"]["driver"],
                h["device"]["pool"],
                h["device"]["name"],
            ),
            h["claim"]["namespace"],
            h["claim"]["name"],
            h["shareID"],
        )
        for h in data["whoHolds"]
    )


def keys_where(predicate) -> list[tuple]:
    return [k for k, d in world.valid_devices().items() if predicate(k, d)]


@pytest.mark.parametrize(
    ("spec", "cluster", "devices"),
    [
        # a uuid (GPU- and MIG-)
        (
            "GPU-00000000-0000-0000-0000-00000000000b",
            None,
            lambda k, d: k[3] == "gpu-1" and k[2] == "n1",
        ),
        ("MIG-00000000-0000-0000-0000-0000000001a1", None, lambda k, d: k[3] == "gpu-0-mig-1g"),
        # node/device
        ("n2/gpu-1", None, lambda k, d: k[2] == "n2" and k[3] == "gpu-1"),
        ("w1/gpu-0", None, lambda k, d: k[0] == "west"),
        # driver/pool/device
        (
            "gpu.nvidia.com/n2/gpu-0",
            "east",
            lambda k, d: k[0] == "east" and k[2] == "n2" and k[3] == "gpu-0",
        ),
        ("cni.dra.networking.x-k8s.io/n1/eth1", None, lambda k, d: k[3] == "eth1"),
        # a bare name: ambiguous, across clusters and nodes
        ("gpu-0", None, lambda k, d: k[3] == "gpu-0"),
        ("gpu-1", None, lambda k, d: k[3] == "gpu-1"),
        ("gpu-0", "west", lambda k, d: k[3] == "gpu-0" and k[0] == "west"),
    ],
)
async def test_who_holds_forms(gql, spec, cluster, devices):
    data = await gql(Q, device=spec, cluster=cluster)
    expected = truth(keys_where(devices))
    assert expected, "the case must name held devices"
    assert answer(data) == expected
    for h in data["whoHolds"]:
        ns, claim = h["claim"]["namespace"], h["claim"]["name"]
        assert sorted(p["name"] for p in h["pods"]) == world.claim_consumers(
            h["cluster"], ns, claim
        )
        assert h["cluster"] == h["device"]["cluster"] and h["since"] is None


async def test_ambiguous_name_returns_every_match(gql):
    data = await gql(Q, device="gpu-0")
    clusters = sorted({h["cluster"] for h in data["whoHolds"]})
    assert clusters == ["east", "west"]


async def test_shared_device_lists_each_share(gql):
    data = await gql(Q, device="n1/eth1")
    assert [(h["claim"]["name"], h["shareID"]) for h in data["whoHolds"]] == [
        ("nic-a", "share-a"),
        ("nic-b", "share-b"),
    ]
    assert data["whoHolds"][0]["consumedCapacity"] == {f"{world.NIC}/bandwidth": "1G"}


@pytest.mark.parametrize(
    "spec",
    [
        "GPU-ffffffff-0000-0000-0000-000000000000",
        "n9/gpu-0",
        "nope",
        "gpu.nvidia.com/n1/gpu-0-mig-2g",
        "gpu-9",
    ],
)
async def test_free_or_unknown_devices_have_no_holders(gql, spec):
    # gpu-0-mig-2g is free; gpu-9 exists only in a superseded pool generation
    assert (await gql(Q, device=spec))["whoHolds"] == []
