"""The oracle itself, on small hand-made worlds whose answers are worked out by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tests.oracle import objects as o
from tests.oracle.reading import quantity
from tests.oracle.truth import Holder, answer

GPU, NIC = "gpu.nvidia.com", "nic.example.com"
GI = 1024**3


@pytest.mark.parametrize(
    ("text", "amount"),
    [("143771Mi", 143771 * 1024**2), ("40Gi", 40 * GI), ("1.5k", 1500), ("250m", Fraction(1, 4)),
     ("1e3", 1000), ("2E-1", Fraction(1, 5)), (12, 12), ("0", 0)],
)  # fmt: skip
def test_quantities(text, amount):
    assert quantity(text) == amount


def test_quantity_refuses_garbage():
    with pytest.raises(ValueError):
        quantity("12 GiB")


def test_a_device_held_but_not_published_is_answered_from_the_allocation():
    world = [o.claim("c", results=[o.result("gpu", GPU, "n9", "gpu-0")], node_name="n9")]
    device = answer(world).devices[(GPU, "n9", "gpu-0")]
    assert (device.published, device.slice, device.node, device.status) == (
        False,
        None,
        "n9",
        "held",
    )
    assert device.holders == (Holder("team-a", "c", "gpu", None, False),)


def test_remaining_capacity_compares_names_qualified():
    h200 = o.device("gpu-0", capacity={"memory": "143771Mi"}, shareable=True)
    world = [
        o.slice_("s", GPU, "n1", [h200], node_name="n1"),
        o.claim("a", results=[o.result("gpu", GPU, "n1", "gpu-0", share_id="1", consumed={"memory": "40Gi"})]),
        o.claim("b", results=[o.result("gpu", GPU, "n1", "gpu-0", share_id="2", consumed={f"{GPU}/memory": "20Gi"})]),
    ]  # fmt: skip
    device = answer(world).devices[(GPU, "n1", "gpu-0")]
    assert device.status == "shared" and len(device.holders) == 2
    assert device.remaining == {f"{GPU}/memory": 143771 * 1024**2 - 60 * GI}


def test_only_the_highest_generation_counts_and_an_incomplete_pool_has_no_counts():
    world = [
        o.slice_("old", GPU, "n1", [o.device("gpu-7")], generation=1, node_name="n1"),
        o.slice_("new-a", GPU, "n1", [o.device("gpu-0")], generation=2, count=2, node_name="n1"),
    ]
    truth = answer(world)
    assert set(truth.devices) == {(GPU, "n1", "gpu-0")}
    pool = truth.pools[(GPU, "n1")]
    assert (pool.generation, pool.complete, pool.total) == (2, False, None)
    assert pool.validation_error and pool.validation_error.startswith("PoolIncomplete:")
    assert truth.slice_complete == {"new-a": False}
    complete = answer([*world, o.slice_("new-b", GPU, "n1", [o.device("gpu-1")], generation=2, count=2, node_name="n1")])  # fmt: skip
    pool = complete.pools[(GPU, "n1")]
    assert (pool.complete, pool.resource_slice_count, pool.total, pool.available) == (True, 2, 2, 2)
    assert pool.node_name == "n1" and complete.slice_complete == {"new-a": True, "new-b": True}


def _mig_world(*held: str) -> list[dict]:
    devices = [
        o.device("gpu-0", consumes={"cs": {"mem": "4"}}),
        o.device("mig-a", consumes={"cs": {"mem": "2"}}),
        o.device("mig-b", consumes={"cs": {"mem": "2"}}),
    ]
    claims = [o.claim(f"c-{d}", results=[o.result("gpu", GPU, "n1", d)]) for d in held]
    return [
        o.slice_("s", GPU, "n1", devices, node_name="n1", counters={"cs": {"mem": "4"}}),
        *claims,
    ]


@pytest.mark.parametrize(
    ("held", "expected"),
    [((), {"gpu-0": "free", "mig-a": "free", "mig-b": "free"}),
     (("mig-a",), {"gpu-0": "blocked", "mig-a": "held", "mig-b": "free"}),
     (("gpu-0",), {"gpu-0": "held", "mig-a": "blocked", "mig-b": "blocked"}),
     (("mig-a", "mig-b"), {"gpu-0": "blocked", "mig-a": "held", "mig-b": "held"})],
)  # fmt: skip
def test_partitions_block_each_other_through_shared_counters(held, expected):
    truth = answer(_mig_world(*held))
    assert {k[2]: d.status for k, d in truth.devices.items()} == expected
    pool = truth.pools[(GPU, "n1")]
    assert (pool.total, pool.allocated, pool.available) == (3, len(held), 3 - len(held))


def test_admin_access_holds_without_consuming():
    world = [
        o.slice_("s", GPU, "n1", [o.device("gpu-0")], node_name="n1"),
        o.claim("watcher", results=[o.result("gpu", GPU, "n1", "gpu-0", admin=True)], admin=True),
    ]
    truth = answer(world)
    device = truth.devices[(GPU, "n1", "gpu-0")]
    assert device.status == "free" and device.holders[0].admin_access
    assert truth.pools[(GPU, "n1")].allocated == 0


def test_taints_from_slices_and_rules_make_devices_unavailable():
    world = [
        o.slice_("s", GPU, "n1", [
            o.device("gpu-0", taints=[("gpu.nvidia.com/xid", "79", "NoSchedule")]),
            o.device("gpu-1", taints=[("example.com/info", "", "None")]),
            o.device("gpu-2"), o.device("gpu-3"),
        ], node_name="n1"),
        o.taint_rule("drain-gpu-2", "example.com/drain", "NoExecute", driver=GPU, pool="n1", device_name="gpu-2"),
        o.taint_rule("no-selector", "example.com/all", "NoExecute"),
        o.claim("c", results=[o.result("gpu", GPU, "n1", "gpu-0")]),
    ]  # fmt: skip
    world[2]["spec"].pop("deviceSelector")  # "Without a selector, no devices are matched."
    truth = answer(world)
    tainted = {k[2]: d.tainted for k, d in truth.devices.items()}
    assert tainted == {"gpu-0": True, "gpu-1": False, "gpu-2": True, "gpu-3": False}
    assert truth.devices[(GPU, "n1", "gpu-2")].taints == (("example.com/drain", "", "NoExecute"),)
    pool = truth.pools[(GPU, "n1")]
    # a device both held and tainted is subtracted twice (KEP-5677, Alpha 1.37)
    assert (pool.total, pool.allocated, pool.unavailable, pool.available) == (4, 1, 2, 1)
    world[2]["spec"]["deviceSelector"] = {}  # "The empty selector matches all devices."
    assert all(d.tainted for d in answer(world).devices.values())


def test_a_shared_device_counts_once_and_an_unpublished_one_still_counts():
    nic = o.device("eth0", capacity={"bandwidth": "10G"}, shareable=True)
    world = [
        o.slice_("s", NIC, "n1", [nic], node_name="n1"),
        *[o.claim(f"c{i}", results=[o.result("nic", NIC, "n1", "eth0", share_id=str(i), consumed={"bandwidth": "1G"})]) for i in range(3)],
        o.claim("gone", results=[o.result("nic", NIC, "n1", "eth9")]),
    ]  # fmt: skip
    pool = answer(world).pools[(NIC, "n1")]
    assert (pool.total, pool.allocated, pool.available) == (1, 2, 0)


@pytest.mark.parametrize(
    ("claim", "kubectl", "state"),
    [(o.claim("c"), "pending", "pending"),
     (o.claim("c", results=[]), "allocated", "allocated"),
     (o.claim("c", results=[], reserved=[("p", "u")]), "allocated,reserved", "reserved"),
     (o.claim("c", results=[], reserved=[("p", "u")], deleting=True), "deleted,allocated,reserved", "deleting"),
     (o.claim("c", deleting=True), "deleted", "deleting")],
)  # fmt: skip
def test_claim_state_as_kubectl_prints_it(claim, kubectl, state):
    truth = answer([claim]).claims[("team-a", "c")]
    assert (truth.kubectl_state, truth.state) == (kubectl, state)


def test_consumers_and_idleness():
    held = [o.result("gpu", GPU, "n1", "gpu-0")]
    world = [
        o.claim("running", results=held, reserved=[("p1", "uid-p1")]),
        o.claim("stale", results=held, reserved=[("p2", "uid-old")]),  # p2 was recreated
        o.claim("group", results=held, podgroup="trainers"),
        o.claim("nobody", results=held),
        o.claim("waiting"),
        o.pod("p1", uid="uid-p1", claims=["running"], phase="Running"),
        o.pod("p2", uid="uid-new", claims=["stale"], phase="Running"),
        o.pod("w0", podgroup="trainers", phase="Running"),
        o.pod("w1", podgroup="trainers", phase="Pending"),
    ]
    claims = answer(world).claims
    seen = {name: (c.consumers, c.idle) for (_, name), c in claims.items()}
    assert seen == {
        "running": (("p1",), False),
        "stale": ((), True),
        "group": (("w0", "w1"), False),
        "nobody": ((), True),
        "waiting": ((), False),
    }


def test_pod_devices_follow_its_claims():
    world = [
        o.claim(
            "c", results=[o.result("gpu", GPU, "n1", "gpu-0"), o.result("gpu", GPU, "n9", "gpu-3")]
        ),
        o.pod("p", claims=["c", "missing"]),
    ]
    assert answer(world).pod_devices[("team-a", "p")] == (
        (GPU, "n1", "gpu-0"),
        (GPU, "n9", "gpu-3"),
    )


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_every_served_version_gives_the_same_answers(version):
    world = [*_mig_world("mig-a"), o.slice_("nic", NIC, "n1", [o.device("eth0", capacity={"bw": "10G"}, shareable=True)], node_name="n1")]  # fmt: skip
    world.append(o.claim("n", results=[o.result("nic", NIC, "n1", "eth0", share_id="1", consumed={"bw": "4G"})]))  # fmt: skip
    expected = answer(world)
    served = answer([o.render(obj, version) for obj in world])
    assert served.devices == expected.devices and served.pools == expected.pools
    assert served.claims == expected.claims


def test_v1alpha3_scalar_capacities():
    obj = o.render(o.slice_("s", GPU, "n1", [o.device("gpu-0", capacity={"memory": "80Gi"}, shareable=True)], node_name="n1"), "v1beta1")  # fmt: skip
    obj["apiVersion"] = "resource.k8s.io/v1alpha3"
    obj["spec"]["devices"][0]["basic"]["capacity"] = {"memory": "80Gi"}
    assert answer([obj]).devices[(GPU, "n1", "gpu-0")].remaining == {f"{GPU}/memory": 80 * GI}
