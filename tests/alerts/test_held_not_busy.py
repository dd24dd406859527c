"""`held-not-busy`: a claim held by a Running pod whose GPUs are not busy, after the rule's
duration counted from the run below the threshold, posted to the holder's namespace channel;
a source that cannot answer keeps the last answer (no flapping); resolved when it is busy."""

from __future__ import annotations

from datetime import timedelta

from dra_mirror.service.alerts.config import SlackTarget, parse
from dra_mirror.service.alerts.engine import AlertEngine
from dra_mirror.service.alerts.slack import SlackNotifier
from dra_mirror.service.questions.utilization import NotBusyRow
from dra_mirror.service.runtime.mirror import alerting
from tests.alerts.conftest import FakeSlack
from tests.alerts.test_alerts import LOADED, Clock, firing
from tests.plan.conftest import demo_world

SINCE = LOADED + timedelta(hours=1)


def row(claim: str = "training/trainer-0-gpu") -> NotBusyRow:
    namespace = claim.split("/")[0]
    return NotBusyRow(cluster="east", claim=claim, namespace=namespace, consumers=["trainer-0"],
                      node="east-h200-0", devices=["gpu-0"], busy=1.5,
                      since=SINCE.isoformat().replace("+00:00", "Z"), not_busy_seconds=0,
                      energy_kwh=None)  # fmt: skip


class Feed:
    def __init__(self) -> None:
        self.rows = {"east": [row()]}
        self.down = False
        self.asked: list[str] = []

    async def __call__(self, cluster: str) -> list[NotBusyRow]:
        self.asked.append(cluster)
        if self.down:
            raise OSError("prometheus unreachable")
        return self.rows.get(cluster, [])


async def test_after_two_hours_to_the_holders_channel_then_resolved(fake_slack: FakeSlack) -> None:
    world = await demo_world()
    clock = Clock(SINCE + timedelta(minutes=90))
    config = parse({"rules": {"held-not-busy": {"hours": 2}}, "slack": {"channel": "#gpu",
                    "channels": {"east/training": "#training"}}},
                   environ={"DRA_MIRROR_SLACK_BOT_TOKEN": "xoxb-1"})  # fmt: skip
    target = SlackTarget(token="xoxb-1", api_url=f"{fake_slack.url}api/", channel="#gpu",
                         channels={"east/training": "#training"})  # fmt: skip
    feed = Feed()
    engine = AlertEngine(config, sources=lambda: {n: world.store.index(n) for n in ("east", "west")},
                         notifier=SlackNotifier(target, web_url=None), clock=clock,
                         not_busy=feed)  # fmt: skip
    await engine.tick()  # evaluates, then asks the source for the next evaluation
    assert sorted(feed.asked) == ["east", "west"]
    await engine.tick()
    assert not firing(engine, "held-not-busy")  # not busy for 90 min only
    clock.now = SINCE + timedelta(hours=2)
    await engine.tick()
    assert list(firing(engine, "held-not-busy")) == ["east/training/trainer-0-gpu"]
    posts = [b for m, b in fake_slack.calls if m == "chat.postMessage"]
    assert [p["channel"] for p in posts] == ["#training"]  # the holder's namespace
    assert "training/trainer-0-gpu" in posts[0]["text"]
    feed.down = True  # the source cannot answer: the last answer stands
    clock.now += timedelta(minutes=5)
    await engine.tick()
    assert list(firing(engine, "held-not-busy")) == ["east/training/trainer-0-gpu"]
    assert not [m for m, _ in fake_slack.calls if m == "chat.update"]
    feed.down, feed.rows = False, {}  # busy again: read by the evaluation after the next
    await engine.tick()
    assert list(firing(engine, "held-not-busy")) == ["east/training/trainer-0-gpu"]
    await engine.tick()
    assert not firing(engine, "held-not-busy")
    updates = [b for m, b in fake_slack.calls if m == "chat.update"]
    assert updates and updates[-1]["blocks"][0]["text"]["text"].startswith("[RESOLVED]")


def test_the_runtime_asks_the_source_only_for_the_rule() -> None:
    on = parse({"rules": {"held-not-busy": {"hours": 2}}})
    off = parse({"rules": {"idle-holder": {"hours": 2}}})
    source = type("Source", (), {"not_busy_after": 1800.0})()
    assert alerting(on, dict, store=object(), utilization=source).not_busy is not None
    assert alerting(on, dict, store=object()).not_busy is None
    assert alerting(off, dict, store=object(), utilization=source).not_busy is None
