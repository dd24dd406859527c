"""Alerts that never cry wolf: `pending-behind-idle` fires only for a claim a Pending pod
references, when that pod could be given the idle-held device under the allocator's own rule
(its node constraints and the device's taints included); device and node alerts reach the
owning teams' channels; a taint says who put it. The three real alarms still fire once each and
resolve once each."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec

from dra_mirror.service.alerts.slack import TITLES
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import (
    DEVICE_TAINT_RULE,
    RESOURCE_SLICE,
    ClaimRecord,
    Meta,
    PodRecord,
    Request,
)
from tests.alerts.conftest import FakeSlack
from tests.alerts.test_alerts import LOADED, Clock, engine_for, firing
from tests.feeding import feed
from tests.plan.conftest import World, demo_world

PENDING = {"pending-behind-idle": {"minutes": 0}}


def _waiting_trainer(world: World) -> PodRecord:
    index = world.store.index("east")
    assert index is not None
    [pod] = [
        p
        for p in index.records("Pod")
        if isinstance(p, PodRecord) and p.phase == "Pending" and p.meta.name.startswith("trainer-")
    ]
    return pod


async def _fired(world: World, rules: dict = PENDING) -> dict[str, str]:
    engine = engine_for(world, rules, Clock(datetime.now(UTC) + timedelta(minutes=1)))
    await engine.tick()
    return {k: v for k, v in firing(engine, "pending-behind-idle").items() if k.startswith("east/")}


async def test_the_real_alarm_holds_in_the_demo() -> None:
    world = await demo_world()
    [subject] = await _fired(world)
    assert "/training/trainer-" in subject


async def test_a_pod_pinned_to_another_node_is_not_blocked_by_an_idle_holder() -> None:
    world = await demo_world()
    pod = _waiting_trainer(world)
    # Pinned to east-h200-0: notebook-gpu idles on east-h200-1, which the pod may not use.
    moved = msgspec.structs.replace(pod, node_selector={"kubernetes.io/hostname": "east-h200-0"})
    await feed(world.store, "east", upserts=[moved], at="2026-11-30T00:01:00Z")
    assert await _fired(world) == {}


async def test_a_claim_no_pod_references_waits_for_nothing() -> None:
    world = await demo_world()
    pod = _waiting_trainer(world)
    await feed(world.store, "east", deletes=[pod], at="2026-11-30T00:01:00Z")
    orphan = ClaimRecord(
        meta=Meta(cluster="east", name="orphan", namespace="research", uid="uid-orphan",
                  created_at="2026-11-30T00:00:00Z"),
        requests=(Request(name="gpu", device_class_name="gpu.nvidia.com"),),
    )  # fmt: skip
    await feed(world.store, "east", upserts=[orphan], at="2026-11-30T00:01:00Z")
    assert await _fired(world) == {}


def _drain(device: str = "gpu-0", effect: str = "NoSchedule") -> object:
    return normalize(DEVICE_TAINT_RULE, {
        "apiVersion": "resource.k8s.io/v1beta2", "kind": DEVICE_TAINT_RULE,
        "metadata": {"name": "drain-h200-1", "uid": "uid-drain", "resourceVersion": "7"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "east-h200-1", "device": device},
            "taint": {"key": "example.com/drain", "value": "rma", "effect": effect,
                      "timeAdded": "2026-11-30T00:01:00Z"},
        },
    }, cluster="east")  # fmt: skip


async def test_an_idle_holders_tainted_device_is_no_use_to_an_intolerant_pod() -> None:
    world = await demo_world()
    # notebook-gpu's H200 is drained: released, the trainer still could not have it.
    await feed(world.store, "east", upserts=[_drain()], at="2026-11-30T00:01:00Z")
    assert await _fired(world) == {}


async def test_a_claim_alert_reaches_the_waiters_and_the_holders_channels(
    fake_slack: FakeSlack,
) -> None:
    world = await demo_world()
    engine = engine_for(world, PENDING, Clock(datetime.now(UTC) + timedelta(minutes=1)), fake_slack)
    await engine.tick()
    posts = [b for m, b in fake_slack.calls if m == "chat.postMessage"]
    pending = [p for p in posts if "is Pending" in p["text"] and "/trainer-" in p["text"]]
    # The waiter is in training (#training); its idle holder in research (the default).
    assert sorted(p["channel"] for p in pending) == ["#gpu", "#training"]


async def test_tainted_while_held_says_who_tainted() -> None:
    world = await demo_world()
    engine = engine_for(world, {"tainted-while-held": {}}, Clock(LOADED))
    index = world.store.index("east")
    assert index is not None
    raw = next(s for s in world.raw["east"]["resourceslices"]
               if s["spec"]["pool"]["name"] == "east-h200-1"
               and any(d["name"] == "gpu-0" for d in s["spec"].get("devices") or []))  # fmt: skip
    tainted = msgspec.json.decode(msgspec.json.encode(raw))
    device = next(d for d in tainted["spec"]["devices"] if d["name"] == "gpu-0")
    device["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]
    await feed(world.store, "east", upserts=[normalize(RESOURCE_SLICE, tainted, cluster="east")],
               at="2026-11-30T00:01:00Z")  # fmt: skip
    await engine.tick()
    [summary] = firing(engine, "tainted-while-held").values()
    assert "by its driver, in its ResourceSlice" in summary
    [alert] = engine.firing.values()
    assert alert.condition.details["namespaces"] == ["research"]
    assert "health check" not in TITLES["tainted-while-held"]


def _held_by_a_trainer(world: World) -> str:
    index = world.store.index("east")
    assert index is not None
    for claim in index.records("ResourceClaim"):
        if (
            isinstance(claim, ClaimRecord)
            and claim.meta.namespace == "training"
            and claim.allocation is not None
        ):
            for result in claim.allocation.results:
                if result.pool == "east-h200-1":
                    return result.device
    raise AssertionError("no trainer holds a device of east-h200-1")


async def test_the_three_real_alarms_fire_once_and_resolve_once(fake_slack: FakeSlack) -> None:
    world = await demo_world()
    rules = {"pending-behind-idle": {"minutes": 10}, "idle-holder": {"hours": 4},
             "tainted-while-held": {}}  # fmt: skip
    clock = Clock(datetime.now(UTC) + timedelta(hours=5))
    engine = engine_for(world, rules, clock, fake_slack)
    drain = _drain(_held_by_a_trainer(world), "NoExecute")
    await feed(world.store, "east", upserts=[drain], at="2026-11-30T00:01:00Z")
    for _ in range(3):
        await engine.tick()
        clock.now += timedelta(minutes=1)
    alerts = {k: a for k, a in engine.firing.items() if k[1] == "east"}
    assert sorted(k[0] for k in alerts) == [
        "idle-holder",
        "pending-behind-idle",
        "tainted-while-held",
    ]
    posts = [b for m, b in fake_slack.calls if m == "chat.postMessage"]
    for alert in alerts.values():
        channels = len(alert.receipt) // 2
        assert len([p for p in posts if p["text"].endswith(alert.condition.summary)]) == channels
    # The idle claim goes (its pod's work is done) and the drain is lifted: all three end.
    index = world.store.index("east")
    assert index is not None
    notebook = next(c for c in index.records("ResourceClaim")
                    if isinstance(c, ClaimRecord) and c.meta.name == "notebook-gpu")  # fmt: skip
    await feed(world.store, "east", deletes=[notebook, drain], at="2026-11-30T00:02:00Z")
    for _ in range(3):
        await engine.tick()
        clock.now += timedelta(minutes=1)
    assert not [k for k in engine.firing if k[1] == "east"]
    updates = [b for m, b in fake_slack.calls if m == "chat.update"]
    for alert in alerts.values():
        pairs = list(zip(alert.receipt[::2], alert.receipt[1::2], strict=True))
        assert sorted(u["ts"] for u in updates if u["text"].endswith(alert.condition.summary)) == (
            sorted(ts for _, ts in pairs)
        )


async def test_a_post_that_fails_in_one_channel_is_not_repeated_in_the_others(
    fake_slack: FakeSlack,
) -> None:
    world = await demo_world()
    engine = engine_for(world, PENDING, Clock(datetime.now(UTC) + timedelta(minutes=1)), fake_slack)
    notifier = engine.notifier
    assert notifier is not None
    post = notifier.client.chat_postMessage
    failed: list[str] = []

    async def flaky(**kwargs):  # the second channel refuses once
        if kwargs["channel"] == "#training" and not failed:
            failed.append(kwargs["channel"])
            raise RuntimeError("ratelimited")
        return await post(**kwargs)

    notifier.client.chat_postMessage = flaky
    await engine.tick()
    await engine.tick()
    posts = [b for m, b in fake_slack.calls if m == "chat.postMessage" and "/trainer-" in b["text"]]
    assert sorted(p["channel"] for p in posts) == ["#gpu", "#training"]  # each once
    [alert] = [
        a for k, a in engine.firing.items() if k[0] == "pending-behind-idle" and k[1] == "east"
    ]
    assert alert.notified and len(alert.receipt) == 4
