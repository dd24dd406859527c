"""The replies to the on-call questions, as Block Kit messages (`service.slack.blocks`).

* who holds: per holding the device (name, uuid, model), its cluster and node, the claim
  (namespace/name, origin, state), its consumer pods, since when it is held, and whether it
  is idle; an ambiguous name lists the held devices it names; a device no one the asker
  sees holds is said to be free, blocked (its counters are taken by sibling partitions),
  or held in another namespace (holders the asker may not see are counted, never named); a
  name that names no device says so;
* free devices (partitions of a free whole device listed beside it, not counted), waiting
  claims, idle holders, capacity per cluster and driver, a pod's devices.

Explanations, lint findings and history are in `service.slack.facts`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dra_mirror.service.questions.capacity import CapacityRow
from dra_mirror.service.questions.claims import Claims, duration
from dra_mirror.service.questions.free import Free
from dra_mirror.service.questions.holdings import HoldingRow, WhoHolds
from dra_mirror.service.questions.pods import PodDevices

from .blocks import Message, context, escape, lines_block, message, plain, section, when

MAX_HOLDINGS = 20  # holding sections in one reply (a shared device may have hundreds)
MAX_CANDIDATES = 40  # devices an ambiguous name lists
STATUS_WORDS = {
    "FREE": "free",
    "BLOCKED": "blocked: its counters are in use by sibling partitions (or by its parts)",
}


def device_label(h: HoldingRow) -> str:
    parts = [f"`{escape(h.device)}`"]
    if h.uuid:
        parts.append(escape(h.uuid))
    if h.model:
        parts.append(escape(h.model))
    return " · ".join(parts)


def holding_block(h: HoldingRow, now: datetime | None) -> dict[str, Any]:
    idle = f"yes, since {when(h.idle_since, now)}" if h.idle else "no"
    pods = ", ".join(escape(p) for p in h.pods) or "none"
    claim = f"{escape(h.claim)} ({h.origin.lower().replace('_', '-')}, {h.state.lower()})"
    if h.share_id:
        claim += f", share {escape(h.share_id)}"
    return section(
        f"*Device* {device_label(h)}",
        [
            f"*Cluster / node*\n{escape(h.cluster)} / {escape(h.node or 'network-attached')}",
            f"*Claim*\n{claim}",
            f"*Consumer pods*\n{pods}",
            f"*Holding since*\n{when(h.since, now)}",
            f"*Idle*\n{idle}",
            f"*Driver / pool*\n{escape(h.driver)} / {escape(h.pool)}",
        ],
    )


def elsewhere(count: int) -> str:
    return f"{count} allocation{'s' if count != 1 else ''} you may not see"


def _not_held(answer: WhoHolds, where: str) -> Message:
    """No holder the asker sees: unknown, held elsewhere, free or blocked — said as such."""
    if answer.unknown:
        text = f"No device is named `{answer.spec}`{where} (a uuid, node/device, driver/pool/device or a device name)."
        return message(text, [section(escape(text))])
    if answer.withheld:
        devices = len(answer.withheld)
        text = (
            f"`{answer.spec}`{where} is held in another namespace "
            f"({elsewhere(answer.held_elsewhere)}"
            + (f", on {devices} devices)." if devices > 1 else ").")
        )
        return message(text, [section(escape(text))])
    states = sorted({d.status or "GONE" for d in answer.devices})
    if len(answer.devices) == 1 or len(states) == 1:
        said = STATUS_WORDS.get(states[0], states[0].lower())
        many = f" ({len(answer.devices)} devices)" if len(answer.devices) > 1 else ""
        text = f"No claim holds `{answer.spec}`{where}{many}: it is {said}."
        return message(text, [section(escape(text))])
    counts = ", ".join(
        f"{sum(1 for d in answer.devices if (d.status or 'GONE') == s)} {s.lower()}" for s in states
    )
    text = (
        f"No claim holds `{answer.spec}`{where}: it names {len(answer.devices)} devices ({counts})."
    )
    return message(text, [section(escape(text))])


def render_who_holds(answer: WhoHolds, now: datetime | None = None) -> Message:
    spec = escape(answer.spec)
    where = f" in {answer.cluster}" if answer.cluster else ""
    if not answer.holdings:
        return _not_held(answer, where)
    where = escape(where)
    if answer.ambiguous:
        by_device: dict[tuple[str, str, str, str], list[HoldingRow]] = {}
        for h in answer.holdings:
            by_device.setdefault(h.device_ref, []).append(h)
        lines = []
        for ref in answer.held_devices[:MAX_CANDIDATES]:
            held = by_device[ref]
            first = held[0]
            claims = ", ".join(escape(h.claim) for h in held)
            node = escape(first.node or f"{first.driver}/{first.pool}")
            lines.append(
                f"• {escape(first.cluster)} · `{node}/{escape(first.device)}`"
                f"{' · ' + escape(first.uuid) if first.uuid else ''} — held by {claims}"
            )
        count = len(answer.held_devices)
        header = (
            f"`{spec}`{where} names {count} held devices. "
            "Ask again with one of them (`node/device` or the uuid):"
        )
        return message(
            f"{answer.spec} is ambiguous: {count} held devices", lines_block(header, lines, count)
        )
    blocks = [section(f"*Who holds* `{spec}`{where}")]
    blocks += [holding_block(h, now) for h in answer.holdings[:MAX_HOLDINGS]]
    if len(answer.holdings) > MAX_HOLDINGS:
        more = len(answer.holdings) - MAX_HOLDINGS
        blocks.append(context(f"…and {more} more holdings (`dra-mirror who-holds` lists all)"))
    claims = ", ".join(h.claim for h in answer.holdings)
    if answer.withheld:
        also = f"also held in another namespace ({elsewhere(answer.held_elsewhere)})"
        blocks.append(context(f"…{also}"))
        claims += f"; {also}"
    return message(f"{answer.spec} is held by {claims}", blocks)


def _scope(class_name: str | None, cluster: str | None) -> str:
    out = f" of class `{escape(class_name)}`" if class_name else ""
    return out + (f" in {escape(cluster)}" if cluster else "")


def render_free(answer: Free) -> Message:
    header = f"*{answer.total} free device{'s' if answer.total != 1 else ''}*" + _scope(
        answer.class_name, answer.cluster
    )
    if answer.partitions:
        header += f" (and {answer.partitions} free partitions of them)"
    lines = [
        f"• {escape(d.cluster)} · {escape(d.node or 'network-attached')}: `{escape(d.device)}`"
        + "".join(f" · {escape(x)}" for x in (d.uuid, d.model) if x)
        + (f" · tainted: {escape(', '.join(d.taints))}" if d.taints else "")
        + (f" · or {len(d.partitions)} partitions" if d.partitions else "")
        for d in answer.devices
    ]
    return message(plain(header), lines_block(header, lines, answer.total))


def render_waiting(answer: Claims) -> Message:
    header = f"*{answer.total} claim{'s' if answer.total != 1 else ''} waiting*" + _scope(
        answer.class_name, answer.cluster
    )
    lines = [
        f"• {escape(c.cluster)} · {escape(c.claim)} ({c.origin.lower().replace('_', '-')})"
        f" — {escape(', '.join(c.classes) or 'no class')}"
        f" — waiting {duration(c.pending_seconds or 0)}"
        for c in answer.claims
    ]
    return message(plain(header), lines_block(header, lines, answer.total))


def render_idle(answer: Claims, now: datetime | None = None) -> Message:
    header = f"*{answer.total} idle holder{'s' if answer.total != 1 else ''}*" + _scope(
        None, answer.cluster
    )
    lines = []
    for c in answer.claims:
        line = (
            f"• {escape(c.cluster)} · {escape(c.claim)} ({c.origin.lower().replace('_', '-')})"
            f" on {escape(c.node or '?')}: {escape(', '.join(c.devices))}"
            f" — idle since {when(c.idle_since, now)}"
        )
        if c.consumers:
            line += f" — pods {escape(', '.join(c.consumers))}"
        if c.waiting_for_class:
            line += f" — :warning: {c.waiting_for_class} claim(s) wait for its class"
        lines.append(line)
    return message(plain(header), lines_block(header, lines, answer.total))


def _physical_words(r: CapacityRow) -> str:
    """`12 GPUs: 5 free, 4 in use whole, 2 partitioned, 1 shared (5.875 GPU-equivalents held)`"""
    noun = {"gpu": "GPUs", "nic": "NICs"}.get(r.type, f"{r.type} devices")
    parts = [f"{r.physical_free} free", f"{r.physical_whole} in use whole"]
    if r.physical_partitioned:
        parts.append(f"{r.physical_partitioned} partitioned")
    if r.physical_shared:
        parts.append(f"{r.physical_shared} shared")
    held = f"{r.held_equivalents:.3f}".rstrip("0").rstrip(".")
    unit = "GPU-equivalents" if r.type == "gpu" else f"{noun}-equivalents"
    return f"{r.physical} {noun}: {', '.join(parts)} ({held} {unit} held)"


def render_capacity(rows: list[CapacityRow], cluster: str | None) -> Message:
    header = (
        "*Capacity*" + _scope(None, cluster) + " (physical devices: a GPU with its partitions is"
        " one; pool counts in devices of each driver)"
    )
    lines = []
    for r in rows:
        line = f"• {escape(r.cluster)} · `{escape(r.driver)}`: {escape(_physical_words(r))}"
        line += (
            f"\n    {r.devices} devices — {r.free} free, {r.in_use} in use,"
            f" {r.partitioned} partitioned"
        )
        if r.partitions:
            line += f"; {r.partitions} partitions ({r.partitions_in_use} in use)"
        if r.tainted:
            line += f"; {r.tainted} tainted"
        if r.unpublished:
            line += f"; {r.unpublished} held but no longer published"
        for p in r.partitioned_devices:
            where = f" on {escape(p.node)}" if p.node else ""
            line += (
                f"\n    ◦ `{escape(p.physical)}`{where} {p.state}:"
                f" {', '.join(escape(d) for d in p.in_use)}"
            )
        lines.append(line)
    if not rows:
        lines.append("no devices")
    return message(plain(header), lines_block(header, lines, len(lines)))


def render_pod(answers: list[PodDevices], target: str) -> Message:
    if not answers:
        text = f"No pod `{target}` in any cluster you may see."
        return message(text, [section(escape(text))])
    parts: list[dict[str, Any]] = []
    for a in answers:
        head = (
            f"*{escape(a.namespace)}/{escape(a.pod)}* in {escape(a.cluster)} ({escape(a.phase)},"
            f" {escape(a.node or 'not scheduled')}): {len(a.devices)} device(s)"
        )
        lines = [
            f"• `{escape(d.device)}`"
            + "".join(f" · {escape(x)}" for x in (d.uuid, d.model) if x)
            + f" — claim {escape(d.claim)}, request {escape(d.request)}"
            for d in a.devices
        ]
        lines += [f"• claim {escape(c)}: not allocated yet" for c in a.pending]
        lines += [f"• claim {escape(c)}: not there" for c in a.missing]
        parts += lines_block(head, lines, len(lines))
    first = answers[0]
    names = ", ".join(d.device for d in first.devices) or "no devices"
    return message(f"{target} uses {names}", parts)
