"""The pieces of the reset and stall detection on their own: comparing resourceVersions as
KEP-5504 allows, the cluster-level reset signal, and the stream watchdog under fake time."""

from __future__ import annotations

import asyncio

import pytest

from dra_mirror.service.clusters.resets import ClusterResets, comparable, older
from dra_mirror.service.clusters.stalls import PositionGone, StallWatch
from tests.clusters.conftest import FakeTime, eventually


@pytest.mark.parametrize(
    ("version", "ok"),
    [("1", True), ("123456789012345678901234567890", True), ("0", False), ("", False),
     (None, False), ("0123", False), ("12a", False), ("\u00b2", False), ("-5", False),
     ("\uff11\uff12", False)],  # fullwidth digits are digits to str.isdigit()
)  # fmt: skip
def test_only_kep_5504_versions_are_comparable(version: str | None, ok: bool) -> None:
    assert comparable(version) is ok


def test_older_compares_as_integers_without_converting() -> None:
    assert older("99", "100") and older("100", "101") and not older("101", "100")
    assert not older("100", "100")
    assert older("9" * 40, "1" + "0" * 40)  # beyond 64 bits
    assert not older("abc", "def") and not older("5", "opaque") and not older("", "5")


async def test_a_reset_is_reported_once_however_many_kinds_see_it() -> None:
    resets = ClusterResets("east")
    woken: list[int] = []
    seen = {"Node": 0, "Pod": 0, "ResourceClaim": 0}

    async def waiter(kind: str) -> None:
        await resets.wait_beyond(lambda: seen[kind])
        woken.append(resets.generation)

    claims = asyncio.create_task(waiter("ResourceClaim"))
    await asyncio.sleep(0)
    seen["Node"] = resets.report("Node", "too large resource version", seen=seen["Node"])
    # the pods notice the same reset before they relisted after it: not a new one
    seen["Pod"] = resets.report("Pod", "too large resource version", seen=seen["Pod"])
    assert (resets.generation, seen["Node"], seen["Pod"]) == (1, 1, 1)
    await asyncio.wait_for(claims, 1)
    assert woken == [1] and resets.reason == "Node: too large resource version"
    # a watcher that caught up and sees evidence again: a second reset
    assert resets.report("Pod", "list at resourceVersion 3 after 90", seen=1) == 2


async def test_a_waiter_that_handled_the_report_itself_keeps_waiting() -> None:
    resets = ClusterResets("east")
    seen = [0]
    task = asyncio.create_task(resets.wait_beyond(lambda: seen[0]))
    await asyncio.sleep(0)
    seen[0] = resets.report("Node", "evidence", seen=seen[0])  # its own report, handled
    await asyncio.sleep(0.01)
    assert not task.done()
    task.cancel()


async def test_a_stream_silent_for_the_limit_is_stalled(fake_time: FakeTime) -> None:
    stall = StallWatch(limit=120.0, clock=fake_time.clock, sleep=fake_time.sleep)
    forever = asyncio.get_running_loop().create_future()
    watched = asyncio.create_task(stall.run(forever))
    await eventually(lambda: fake_time.waiting == 1)
    fake_time.advance(100)
    stall.heard()  # a bookmark at 100 s
    fake_time.advance(21)  # 121 s since the start, 21 s since the bookmark
    await asyncio.sleep(0.01)
    assert not watched.done()
    fake_time.advance(100)  # 121 s since the bookmark
    assert await asyncio.wait_for(watched, 1) is None
    assert forever.cancelled()


async def test_a_reader_held_by_its_consumer_is_not_stalled(fake_time: FakeTime) -> None:
    stall = StallWatch(limit=120.0, clock=fake_time.clock, sleep=fake_time.sleep)
    release = asyncio.Event()

    async def reading() -> int:
        with stall.held():  # waiting for a full queue, say
            await release.wait()
        await asyncio.get_running_loop().create_future()  # then the server is silent
        return 0

    watched = asyncio.create_task(stall.run(reading()))
    await eventually(lambda: fake_time.waiting == 1)
    for _ in range(5):
        fake_time.advance(121)
        await asyncio.sleep(0.01)
    assert not watched.done()
    release.set()
    await asyncio.sleep(0.01)
    fake_time.advance(119)  # the silence counts from the release
    await asyncio.sleep(0.01)
    assert not watched.done()
    fake_time.advance(15)  # the watchdog looks again at least every tenth of the limit
    assert await asyncio.wait_for(watched, 1) is None


async def test_what_the_reading_returns_or_raises_comes_through(fake_time: FakeTime) -> None:
    stall = StallWatch(limit=120.0, clock=fake_time.clock, sleep=fake_time.sleep)

    async def lines(n: int) -> int:
        if n < 0:
            raise ValueError("bad line")
        return n

    assert await stall.run(lines(3)) == 3
    with pytest.raises(ValueError):
        await stall.run(lines(-1))
    assert (
        await StallWatch(limit=0, clock=fake_time.clock, sleep=fake_time.sleep).run(lines(2)) == 2
    )


async def test_a_silent_stream_is_said_quiet_once_and_its_position_checked(
    fake_time: FakeTime,
) -> None:
    """Past the bookmark deadline (75 s) `on_quiet` is called once per silence; every 10 s of
    silence the position is checked; a check that finds it gone ends the stream."""
    quiet: list[float] = []
    checks: list[float] = []
    gone = [False]

    async def on_quiet(seconds: float) -> None:
        quiet.append(seconds)

    async def check() -> bool:
        checks.append(fake_time.now)
        return gone[0]

    stall = StallWatch(limit=120.0, clock=fake_time.clock, sleep=fake_time.sleep,
                       quiet_after=75.0, on_quiet=on_quiet, check_every=10.0, check=check)  # fmt: skip
    forever = asyncio.get_running_loop().create_future()
    watched = asyncio.create_task(stall.run(forever))
    for _ in range(8):  # 80 s of silence, 10 s at a time
        await eventually(lambda: fake_time.waiting == 1)
        fake_time.advance(10)
        await asyncio.sleep(0.01)
    assert quiet == [75.0] or quiet == [80.0], quiet
    assert checks == [10.0 * i for i in range(1, 9)], checks
    stall.heard()  # a bookmark: heard again, no check for the next 10 s
    await eventually(lambda: fake_time.waiting == 1)
    fake_time.advance(5)
    await asyncio.sleep(0.01)
    assert len(checks) == 8 and not watched.done()
    gone[0] = True
    for _ in range(3):
        fake_time.advance(5)
        await asyncio.sleep(0.01)
    with pytest.raises(PositionGone):
        await asyncio.wait_for(watched, 1)
    assert forever.cancelled() and quiet[-1] < 80.0 + 1
