"""Each alert rule driven over the demo's mirrored state, with fake time, delivered to a fake
Slack Web API on loopback (chat.postMessage, chat.update) and exported as Prometheus series."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from dra_mirror.service.alerts.config import AlertsConfigError, SlackTarget, parse
from dra_mirror.service.alerts.engine import Alert, AlertEngine
from dra_mirror.service.alerts.metrics import AlertsCollector
from dra_mirror.service.alerts.rules import Condition
from dra_mirror.service.alerts.slack import SlackNotifier, screen_link
from dra_mirror.service.model.normalize import normalize
from dra_mirror.service.model.records import DEVICE_TAINT_RULE, RESOURCE_SLICE
from tests.alerts.conftest import FakeSlack
from tests.feeding import feed
from tests.plan.conftest import World, demo_world

LOADED = datetime(2026, 11, 30, tzinfo=UTC)  # the world is folded at this time (idle marks)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def engine_for(
    world: World, rules: dict, clock: Clock, slack: FakeSlack | None = None
) -> AlertEngine:
    target = None
    if slack is not None:
        rules_doc = {"rules": rules, "webUrl": "https://mirror.example",
                     "slack": {"channel": "#gpu", "channels": {"east/training": "#training"}}}  # fmt: skip
        config = parse(rules_doc, environ={"DRA_MIRROR_SLACK_BOT_TOKEN": "xoxb-1"})
        assert config.slack is not None
        target = SlackTarget(token="xoxb-1", api_url=f"{slack.url}api/", channel="#gpu",
                             channels=config.slack.channels)  # fmt: skip
    else:
        config = parse({"rules": rules})
    notifier = SlackNotifier(target, web_url=config.web_url) if target else None
    return AlertEngine(config, sources=lambda: {n: world.store.index(n) for n in ("east", "west")},
                       notifier=notifier, clock=clock)  # fmt: skip


def firing(engine: AlertEngine, rule: str) -> dict[str, str]:
    return {
        f"{k[1]}/{k[2]}/{k[3]}": a.condition.summary
        for k, a in engine.firing.items()
        if k[0] == rule
    }


async def test_idle_holder_after_its_hours_then_resolved_in_slack(fake_slack: FakeSlack) -> None:
    world = await demo_world()
    clock = Clock(LOADED + timedelta(hours=3))
    engine = engine_for(world, {"idle-holder": {"hours": 4}}, clock, fake_slack)
    await engine.tick()
    assert not engine.firing and not fake_slack.calls  # idle for 3 h only
    clock.now = LOADED + timedelta(hours=5)
    await engine.tick()
    assert "east/research/notebook-gpu" in firing(engine, "idle-holder")
    posts = [b for m, b in fake_slack.calls if m == "chat.postMessage"]
    [post] = [p for p in posts if "notebook-gpu" in p["text"]]
    assert post["channel"] == "#gpu"
    button = post["blocks"][2]["elements"][0]
    assert (
        button["url"]
        == "https://mirror.example/ui/claim?cluster=east&namespace=research&name=notebook-gpu"
    )
    await engine.tick()
    assert len([m for m, _ in fake_slack.calls if m == "chat.postMessage"]) == len(posts)  # once
    # A pod starts using the claim: no longer idle -> resolved, once, in the message's thread.
    index = world.store.index("east")
    claim = index.get(next(k for k in index.idle_claims() if k.name == "notebook-gpu"))
    await feed(world.store, "east", deletes=[claim], at="2026-11-30T06:00:00Z")
    await engine.tick()
    assert "east/research/notebook-gpu" not in firing(engine, "idle-holder")
    updates = [b for m, b in fake_slack.calls if m == "chat.update"]
    assert updates and updates[-1]["blocks"][0]["text"]["text"].startswith("[RESOLVED]")
    assert fake_slack.calls[-1][1]["thread_ts"] == updates[-1]["ts"]


async def test_pending_behind_idle_names_the_waiting_claim_and_the_holder() -> None:
    world = await demo_world()
    clock = Clock(datetime.now(UTC) + timedelta(minutes=11))  # the world's claims are minutes old
    engine = engine_for(world, {"pending-behind-idle": {"minutes": 10}}, clock)
    await engine.tick()
    found = firing(engine, "pending-behind-idle")
    # The third trainer replica waits on east-h200-1, where notebook-gpu holds an H200 idle.
    [(_subject, summary)] = [(k, s) for k, s in found.items() if "/training/trainer-" in k]
    assert "research/notebook-gpu" in summary
    early = engine_for(world, {"pending-behind-idle": {"minutes": 10}}, Clock(datetime.now(UTC)))
    await early.tick()
    assert not early.firing


async def test_gpu_node_without_slices_after_minutes_seen() -> None:
    world = await demo_world()
    clock = Clock(LOADED)
    engine = engine_for(world, {"gpu-node-without-slices": {"minutes": 15}}, clock)
    await engine.tick()
    assert not engine.firing
    clock.now += timedelta(minutes=16)
    await engine.tick()
    assert set(firing(engine, "gpu-node-without-slices")) == {"east//east-legacy-0"}


async def test_pool_incomplete_and_tainted_while_held() -> None:
    world = await demo_world()
    clock = Clock(LOADED)
    engine = engine_for(world, {"pool-incomplete": {"minutes": 0}, "tainted-while-held": {}}, clock)
    await engine.tick()
    assert not engine.firing
    raw = next(s for s in world.raw["east"]["resourceslices"]
               if s["spec"]["pool"]["name"] == "east-h200-1"
               and any(d["name"] == "gpu-0" for d in s["spec"].get("devices") or []))  # fmt: skip
    tainted = copy.deepcopy(raw)
    tainted["spec"]["pool"]["resourceSliceCount"] += 1  # one more slice, never published
    device = next(d for d in tainted["spec"]["devices"] if d["name"] == "gpu-0")
    device["taints"] = [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoExecute"}]
    await feed(world.store, "east", upserts=[normalize(RESOURCE_SLICE, tainted, cluster="east")],
               at="2026-11-30T00:01:00Z")  # fmt: skip
    await engine.tick()
    assert set(firing(engine, "pool-incomplete")) == {"east//gpu.nvidia.com/east-h200-1"}
    [summary] = firing(engine, "tainted-while-held").values()
    assert "gpu-0" in summary and "research/notebook-gpu" in summary and "NoExecute" in summary
    registry = CollectorRegistry()
    registry.register(AlertsCollector(engine))
    text = generate_latest(registry).decode()
    assert (
        'dra_mirror_alerts{cluster="east",name="gpu.nvidia.com/east-h200-1/gpu-0",namespace="",rule="tainted-while-held",severity="critical"} 1.0'
        in text
    )
    await feed(world.store, "east", upserts=[normalize(RESOURCE_SLICE, raw, cluster="east")],
               at="2026-11-30T00:02:00Z")  # fmt: skip
    await engine.tick()
    assert not engine.firing
    assert "dra_mirror_alerts{" not in generate_latest(registry).decode()


async def test_a_device_taint_rule_on_a_held_device_fires_tainted_while_held() -> None:
    """A DeviceTaintRule (an admin's drain) taints the devices it selects as a driver's taint
    does: the held one fires, naming the rule; deleting the rule resolves it."""
    world = await demo_world()
    clock = Clock(LOADED)
    engine = engine_for(world, {"tainted-while-held": {}}, clock)
    await engine.tick()
    assert not engine.firing
    drain = normalize(DEVICE_TAINT_RULE, {
        "apiVersion": "resource.k8s.io/v1beta2", "kind": DEVICE_TAINT_RULE,
        "metadata": {"name": "drain-gpu-0", "uid": "uid-drain", "resourceVersion": "7"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "east-h200-1",
                               "device": "gpu-0"},
            "taint": {"key": "example.com/drain", "value": "rma", "effect": "NoExecute",
                      "timeAdded": "2026-11-30T00:01:00Z"},
        },
    }, cluster="east")  # fmt: skip
    await feed(world.store, "east", upserts=[drain], at="2026-11-30T00:01:00Z")
    clock.now += timedelta(minutes=2)
    await engine.tick()
    [(name, summary)] = firing(engine, "tainted-while-held").items()
    assert name == "east//gpu.nvidia.com/east-h200-1/gpu-0"
    assert "example.com/drain=rma:NoExecute by DeviceTaintRule drain-gpu-0" in summary
    assert "research/notebook-gpu" in summary
    [alert] = engine.firing.values()
    assert alert.condition.since == "2026-11-30T00:01:00Z"
    assert alert.condition.details["rule"] == "drain-gpu-0"
    await feed(world.store, "east", deletes=[drain], at="2026-11-30T00:02:00Z")
    await engine.tick()
    assert not engine.firing


async def test_a_failed_post_is_retried_never_repeated(fake_slack: FakeSlack) -> None:
    world = await demo_world()
    engine = engine_for(
        world, {"gpu-node-without-slices": {"minutes": 0}}, Clock(LOADED), fake_slack
    )
    fake_slack.fail = True
    await engine.tick()
    assert engine.notifications["failed"] == 1 and not fake_slack.calls
    fake_slack.fail = False
    await engine.tick()
    await engine.tick()
    assert [m for m, _ in fake_slack.calls] == ["chat.postMessage"]


async def test_clusters_no_longer_watched_here_are_dropped_silently(fake_slack: FakeSlack) -> None:
    world = await demo_world()
    watched = {"east", "west"}
    engine = engine_for(
        world, {"gpu-node-without-slices": {"minutes": 0}}, Clock(LOADED), fake_slack
    )
    engine.sources = lambda: {n: world.store.index(n) for n in watched}
    await engine.tick()
    assert engine.firing
    watched.discard("east")  # this replica lost east's lease
    await engine.tick()
    assert not engine.firing
    assert [m for m, _ in fake_slack.calls] == ["chat.postMessage"]  # no resolved message


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"rules": {"idle-holdr": {}}}, "unknown key(s) idle-holdr"),
        (
            {"rules": {"idle-holder": {"hours": "four"}}},
            "rules.idle-holder.hours: expected a number",
        ),
        ({"rules": {"idle-holder": {"hours": 1, "minutes": 2}}}, "minutes or hours, not both"),
        ({"rules": {}}, "list at least one"),
        ({"rules": {"idle-holder": {}}, "slack": {"channel": "#x"}}, "no bot token"),
        ({"rules": {"idle-holder": {}}, "slack": {"channel": "gpu"}, "x": 1}, "unknown key(s) x"),
        ({"rules": {"idle-holder": {}}, "webUrl": "mirror"}, "webUrl: expected an http(s) URL"),
    ],
)
def test_configuration_mistakes_are_named(doc: dict, message: str) -> None:
    with pytest.raises(AlertsConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(doc, environ={})


def test_links_open_the_subjects_screen_with_what_it_reads() -> None:
    def link(rule: str, name: str, **details: str) -> str | None:
        condition = Condition(rule, "east", "", name, "s", details=details)
        return screen_link("https://mirror.example/", Alert(condition, fired_at=LOADED))

    # The device screen finds a published device (its taints, its slice) by its node.
    assert link("tainted-while-held", "gpu.nvidia.com/east-h200-1/gpu-0", driver="gpu.nvidia.com",
                pool="east-h200-1", device="gpu-0", node="east-h200-1") == (
        "https://mirror.example/ui/device?cluster=east&driver=gpu.nvidia.com&pool=east-h200-1"
        "&device=gpu-0&node=east-h200-1"
    )  # fmt: skip
    assert link("pool-incomplete", "gpu.nvidia.com/east-h200-1", driver="gpu.nvidia.com",
                pool="east-h200-1", node="east-h200-1") == (
        "https://mirror.example/ui/slices?cluster=east&driver=gpu.nvidia.com&node=east-h200-1"
    )  # fmt: skip
    assert link("gpu-node-without-slices", "east-legacy-0", node="east-legacy-0") == (
        "https://mirror.example/ui/slices?cluster=east&node=east-legacy-0"
    )
