"""The scheduler / kubelet / claim-controller emulation, driven through the store as a client
(kubectl) would drive it, and churn's determinism."""

from __future__ import annotations

import pytest

from dra_mirror.service.model.records import DELETE_PROTECTION_FINALIZER
from dra_mirror.service.sim.churn import ChurnShape, ChurnSpec, schedule
from dra_mirror.service.sim.claim_controller import generate_name
from dra_mirror.service.sim.scenario import World, build_world, load_scenario, parse_scenario
from dra_mirror.service.sim.shapes import pod_object
from dra_mirror.service.sim.store import ClusterStore


@pytest.fixture
def demo() -> World:
    return build_world(load_scenario("demo"))


def pods_named(store: ClusterStore, prefix: str) -> list[dict]:
    return [p for p in store.list("pods") if p["metadata"]["name"].startswith(prefix)]


def claim_names(pod: dict) -> list[str]:
    return [s["resourceClaimName"] for s in pod["status"].get("resourceClaimStatuses") or []]


def test_generate_name_follows_the_claim_controller():
    assert generate_name("web-0", "gpu") == "web-0-gpu-"
    pod, claim = "a" * 50, "b" * 20  # base 72 > 57: both cut to 39 and 15, no trailing dash
    assert generate_name(pod, claim) == "a" * 39 + "-" + "b" * 15
    assert len(generate_name("p" * 253, "c" * 63)) <= 57


def test_a_kubectl_style_pod_is_scheduled_and_allocated(demo: World):
    east = demo.stores["east"]
    pod = pod_object(
        "notebook-2", "research", claims=[{"name": "gpu", "resourceClaimTemplateName": "a100"}]
    )
    east.create("pods", pod)  # what `kubectl apply -f pod.yaml` does
    pod = east.get("pods", "research", "notebook-2")
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == "east-a100-0"
    assert pod["status"]["podIP"] and pod["status"]["containerStatuses"][0]["ready"] is True
    (name,) = claim_names(pod)
    assert name.startswith("notebook-2-gpu-")
    claim = east.get("resourceclaims", "research", name)
    result = claim["status"]["allocation"]["devices"]["results"][0]
    # gpu-0 of east-a100-0 belongs to the demo's notebook already: the next one is taken.
    assert (result["pool"], result["device"]) == ("east-a100-0", "gpu-1")
    assert claim["status"]["reservedFor"][0]["uid"] == pod["metadata"]["uid"]


def test_deleting_a_pod_releases_and_the_pending_one_takes_its_gpu(demo: World):
    east = demo.stores["east"]
    trainers = pods_named(east, "trainer-")
    running = [p for p in trainers if p["status"]["phase"] == "Running"]
    waiting = next(p for p in trainers if p["status"]["phase"] == "Pending")
    victim = running[0]
    (victim_claim,) = claim_names(victim)
    freed = east.get("resourceclaims", "training", victim_claim)["status"]["allocation"]
    events: list[tuple[str, str, str]] = []
    east.add_listener(
        lambda kind, plural, obj: events.append((kind, plural, obj["metadata"]["name"]))
    )
    east.delete("pods", "training", victim["metadata"]["name"])
    assert east.get("resourceclaims", "training", victim_claim) is None
    # The claim went through the steps Kubernetes takes: unreserved, deletion requested
    # (finalizer), deallocated, finalizer removed -> gone.
    claim_events = [k for k, p, n in events if p == "resourceclaims" and n == victim_claim]
    assert claim_events[0] == "MODIFIED" and claim_events[-1] == "DELETED"
    waiting = east.get("pods", "training", waiting["metadata"]["name"])
    assert waiting["status"]["phase"] == "Running"
    (claim,) = claim_names(waiting)
    allocation = east.get("resourceclaims", "training", claim)["status"]["allocation"]
    assert allocation["devices"]["results"] == freed["devices"]["results"]


def test_shared_claim_is_deallocated_when_its_last_pod_goes(demo: World):
    east = demo.stores["east"]
    replicas = pods_named(east, "inference-server-")
    for pod in replicas[:-1]:
        east.delete("pods", "inference", pod["metadata"]["name"])
    shared = east.get("resourceclaims", "inference", "shared-h200")
    assert [r["name"] for r in shared["status"]["reservedFor"]] == [
        replicas[-1]["metadata"]["name"]
    ]
    east.delete("pods", "inference", replicas[-1]["metadata"]["name"])
    shared = east.get("resourceclaims", "inference", "shared-h200")
    assert shared is not None, "a hand-made claim survives its pods"
    assert not (shared.get("status") or {}).get("allocation")  # back to pending
    assert DELETE_PROTECTION_FINALIZER not in (shared["metadata"].get("finalizers") or [])
    idle = east.get("resourceclaims", "research", "notebook-gpu")
    assert idle["status"]["allocation"], "the claim allocated by hand stays allocated (idle)"


def test_a_succeeded_pod_gives_back_its_devices(demo: World):
    east = demo.stores["east"]
    mig = pods_named(east, "mig-worker-")[0]
    (name,) = claim_names(mig)
    east.patch(
        "pods",
        "research",
        mig["metadata"]["name"],
        {"status": {"phase": "Succeeded"}},
        subresource="status",
    )
    assert east.get("resourceclaims", "research", name) is None
    assert east.get("pods", "research", mig["metadata"]["name"])["status"]["phase"] == "Succeeded"


def test_the_extended_resource_claim_goes_with_its_pod(demo: World):
    east = demo.stores["east"]
    pod = pods_named(east, "mig-ext-")[0]
    name = pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    east.delete("pods", "research", pod["metadata"]["name"])
    assert east.get("resourceclaims", "research", name) is None
    # A node with the device plugin's resource serves it the old way, without a claim.
    east.create("pods", pod_object("dp", "legacy", limits={"nvidia.com/gpu": "1"}))
    dp = east.get("pods", "legacy", "dp")
    assert (
        dp["spec"]["nodeName"] == "east-legacy-0"
        and "extendedResourceClaimStatus" not in dp["status"]
    )


def test_unknown_claim_keeps_the_pod_pending_until_it_exists(demo: World):
    east = demo.stores["east"]
    claims = [
        {"name": "t", "resourceClaimTemplateName": "a100"},
        {"name": "c", "resourceClaimName": "later"},
    ]
    east.create("pods", pod_object("late", "research", claims=claims))
    late = east.get("pods", "research", "late")
    condition = late["status"]["conditions"][0]
    assert condition["reason"] == "Unschedulable" and "later" in condition["message"]
    (generated,) = claim_names(late)  # the template claim is made and recorded at once
    claim = {
        "metadata": {"name": "later", "namespace": "research"},
        "spec": {
            "devices": {
                "requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    east.create("resourceclaims", claim)  # the scheduler looks again at pods waiting for it
    late = east.get("pods", "research", "late")
    assert late["status"]["phase"] == "Running" and claim_names(late) == [generated]
    made = [
        c
        for c in east.list("resourceclaims", "research")
        if c["metadata"]["name"].startswith("late-")
    ]
    assert [c["metadata"]["name"] for c in made] == [generated]


def test_churn_plan_is_deterministic_and_seed_dependent():
    spec = ChurnSpec(rate=5, lifetime=2, seed=3, shapes=(ChurnShape("a"), ChurnShape("b", 2)))
    first = [s for _, s in zip(range(200), schedule(spec), strict=False)]
    again = [s for _, s in zip(range(200), schedule(spec), strict=False)]
    other = [
        s for _, s in zip(range(200), schedule(ChurnSpec(rate=5, lifetime=2, seed=4)), strict=False)
    ]
    assert first == again and first != other
    assert [s.at for s in first] == sorted(s.at for s in first)
    arrivals = [s for s in first if s.action == "arrive"]
    assert 5 * 0.6 < len(arrivals) / arrivals[-1].at < 5 * 1.4  # about `rate` per second
    assert {s.shape for s in arrivals} == {"a", "b"}


def _run_churn(seconds: float) -> list[tuple]:
    world = build_world(load_scenario("churn"))
    store = world.stores["churn"]
    log: list[tuple] = []

    def record(kind: str, plural: str, obj: dict) -> None:
        status = obj.get("status") or {}
        allocation = status.get("allocation") or {}
        devices = [
            (r["pool"], r["device"]) for r in (allocation.get("devices") or {}).get("results", [])
        ]
        log.append((kind, plural, obj["metadata"]["name"], status.get("phase"), tuple(devices)))

    store.add_listener(record)
    steps = world.churns["churn"].advance(seconds)
    assert steps and any(s.action == "leave" for s in steps)
    return log


def test_churn_runs_the_same_world_for_the_same_seed():
    first = _run_churn(40)
    assert first == _run_churn(40)
    kinds = {(k, p) for k, p, *_ in first}
    assert {
        ("ADDED", "pods"),
        ("DELETED", "pods"),
        ("ADDED", "resourceclaims"),
        ("DELETED", "resourceclaims"),
    } <= kinds
    assert any(devices for *_, devices in first)


def test_a_claim_serves_at_most_256_pods():
    doc = {
        "clusters": [
            {
                "name": "big",
                "deviceClasses": ["gpu.nvidia.com"],
                "nodes": [
                    {
                        "name": "n0",
                        "allocatable": {"pods": "400"},
                        "devices": [{"profile": "nvidia-a100-80gb-pcie", "count": 1}],
                    }
                ],
                "objects": [
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaim",
                        "metadata": {"name": "shared", "namespace": "default"},
                        "spec": {
                            "devices": {
                                "requests": [
                                    {
                                        "name": "gpu",
                                        "exactly": {"deviceClassName": "gpu.nvidia.com"},
                                    }
                                ]
                            }
                        },
                    }
                ],
                "workloads": [
                    {
                        "name": "w",
                        "replicas": 257,
                        "claims": [{"name": "g", "resourceClaimName": "shared"}],
                    }
                ],
            }
        ]
    }
    store = build_world(parse_scenario(doc)).stores["big"]
    claim = store.get("resourceclaims", "default", "shared")
    assert len(claim["status"]["reservedFor"]) == 256
    pending = [p for p in store.list("pods") if p["status"]["phase"] == "Pending"]
    assert len(pending) == 1
    assert "in use by too many pods" in pending[0]["status"]["conditions"][0]["message"]


def test_churn_goes_on_when_the_api_refuses_a_step(caplog):
    world = build_world(load_scenario("churn"))
    churn = world.churns["churn"]
    first = next(schedule(churn.spec))
    store = world.stores["churn"]
    store.create("pods", pod_object(first.pod, "jobs"))  # someone took the name
    with caplog.at_level("WARNING", logger="dra_mirror.service.sim.churn"):
        steps = churn.advance(first.at + 30)
    assert steps[0] == first and len(steps) > 10
    assert any("409" in r.getMessage() for r in caplog.records)


def test_a_pod_bound_by_hand_skips_the_scheduler(demo: World):
    east = demo.stores["east"]
    plain = pod_object("pinned", "research")
    plain["spec"]["nodeName"] = "east-a100-0"
    east.create("pods", plain)
    assert east.get("pods", "research", "pinned")["status"]["phase"] == "Running"
    # Its claim is not allocated: kubelet cannot prepare it, the pod waits.
    waiting = pod_object(
        "pinned-2", "research", claims=[{"name": "c", "resourceClaimName": "orphan"}]
    )
    waiting["spec"]["nodeName"] = "east-a100-0"
    claim = {
        "metadata": {"name": "orphan", "namespace": "research"},
        "spec": {
            "devices": {
                "requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    east.create("resourceclaims", claim)
    east.create("pods", waiting)
    pod = east.get("pods", "research", "pinned-2")
    assert pod["status"]["phase"] == "Pending" and not pod["status"].get("conditions")
