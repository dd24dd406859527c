"""The history's answers beside the intervals the oracle derives from the same sequence.

Three questions, as users ask them: `deviceHistory` of each device that was ever held (by
"driver/pool/device"): its allocation intervals must be the oracle's, since and until;
`claimHistory` of each claim that ever held one: the same intervals, per incarnation (uid);
and `whoHeld` by the device's uuid just after every step: the holdings the oracle saw then.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tests.oracle.compare import Mismatch
from tests.oracle.intervals import Timeline
from tests.oracle.system import System


def _instant(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _later(at: str, seconds: float) -> str:
    moment = _instant(at)
    assert moment is not None
    return (
        (moment + timedelta(seconds=seconds))
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


async def history_mismatches(system: System, timeline: Timeline, *, end: str) -> list[Mismatch]:
    found: list[Mismatch] = []
    intervals = timeline.intervals()
    if not timeline.steps:
        return found
    start = timeline.steps[0][0]
    by_device: dict[str, list[Any]] = {}
    for i in intervals:
        by_device.setdefault(f"{i.holding.driver}/{i.holding.pool}/{i.holding.device}", []).append(
            i
        )
    instants = [_later(step_at, 0.5) for step_at, _ in timeline.steps]
    uuids = {u: "/".join(k) for k, u in timeline.uuids.items() if "/".join(k) in by_device}
    timelines = await system.device_history(by_device, start=start, end=end)
    held = await system.who_held(uuids, instants)
    for device, expected in by_device.items():
        answer = timelines[device]
        if answer.errors:
            found.append(Mismatch("history", "history.error", device, [], answer.errors))
            continue
        want = sorted(
            (i.holding.namespace, i.holding.claim, i.holding.claim_uid, i.holding.request,
             i.holding.share_id, _instant(i.since), _instant(i.until))
            for i in expected
        )  # fmt: skip
        got = sorted(
            (a["namespace"], a["claim"], a["claimUid"], a["request"], a["shareID"],
             _instant(a["since"]), _instant(a["until"]))
            for timeline_ in answer.data["deviceHistory"] for a in timeline_["allocations"]
            if f"{a['driver']}/{a['pool']}/{a['device']}" == device
        )  # fmt: skip
        if want != got:
            found.append(Mismatch("history", "history.intervals", device, want, got))
    by_claim: dict[tuple[str, str], list[Any]] = {}
    for i in intervals:
        by_claim.setdefault((i.holding.namespace, i.holding.claim), []).append(i)
    for (ns, name), answer in (await system.claim_history(by_claim)).items():
        if answer.errors:
            found.append(Mismatch("history", "history.error", f"{ns}/{name}", [], answer.errors))
            continue
        want = sorted(
            (i.holding.claim_uid, i.holding.driver, i.holding.pool, i.holding.device,
             i.holding.request, i.holding.share_id, _instant(i.since), _instant(i.until))
            for i in by_claim[(ns, name)]
        )  # fmt: skip
        got = sorted(
            (inc["uid"], a["driver"], a["pool"], a["device"], a["request"], a["shareID"],
             _instant(a["since"]), _instant(a["until"]))
            for inc in answer.data["claimHistory"] for a in inc["allocations"]
        )  # fmt: skip
        if want != got:
            found.append(Mismatch("history", "history.claim", f"{ns}/{name}", want, got))
    for uuid, device in uuids.items():
        key = tuple(device.split("/", 2))
        for instant in instants:
            answer = held[(uuid, instant)]
            want = sorted(
                (h.namespace, h.claim, h.request, h.share_id)
                for h in timeline.held_at(instant)
                if (h.driver, h.pool, h.device) == key
            )
            got = sorted(
                (h["namespace"], h["claim"], h["request"], h["shareID"])
                for h in (answer.data or {}).get("whoHeld") or []
            ) if not answer.errors else answer.errors  # fmt: skip
            if want != got:
                found.append(Mismatch("history", "history.whoHeld", f"{uuid}@{instant}", want, got))
    return found
