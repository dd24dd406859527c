"""The utilisation and fragmentation replies, as Block Kit (`service.slack.blocks`).

* `busy_line(use)` — who-holds' line under a held device: "busy 87 % (last 1 h)", or that
  its utilisation is unknown (no dcgm-exporter readings), never 0 % for unknown;
* `render_not_busy(answer)` — `not-busy [cluster]`: claims held by a Running pod whose GPUs
  stayed below the threshold, by whom, since when, with their energy;
* `render_fragmentation(rows)` — `fragmentation [class] [cluster]`: per node and class, how
  many partitionable GPUs can take a device now, the largest that fits, the stranded memory.
"""

from __future__ import annotations

from datetime import datetime

from dra_mirror.service.questions.claims import duration
from dra_mirror.service.questions.fragmentation import NodeFragmentation
from dra_mirror.service.questions.utilization import DeviceUse, HeldNotBusy

from .blocks import Message, escape, lines_block, message, plain, section, when


def busy_line(use: DeviceUse, window: float = 3600.0) -> str:
    """`busy 87 % (last 1 h)`, with memory and power where read."""
    last = f"last {duration(window)}".replace("1h 0m", "1 h")
    if use.busy is None:
        return f"busy: unknown — no dcgm-exporter readings ({last})"
    line = f"busy {use.busy:.0f} % ({last})"
    if use.memory_used_mib is not None:
        line += f" · {use.memory_used_mib / 1024:.1f} GiB used"
    if use.power_watts is not None:
        line += f" · {use.power_watts:.0f} W"
    return line


def render_not_busy(answer: HeldNotBusy, now: datetime | None = None) -> Message:
    where = f" in {answer.clusters[0]}" if len(answer.clusters) == 1 else ""
    header = (
        f"*{answer.total} held, not busy*{escape(where)} (below {answer.busy_below:g} % for "
        f"{duration(answer.not_busy_after)})"
    )
    lines = []
    for c in answer.claims:
        line = (
            f"• {escape(c.cluster)} · {escape(c.claim)} on {escape(c.node or '?')}: "
            f"{escape(', '.join(c.devices))} — busy {c.busy:.0f} % — not busy since "
            f"{when(c.since, now)} — pods {escape(', '.join(c.consumers))}"
        )
        if c.energy_kwh is not None:
            line += f" — {c.energy_kwh:.2f} kWh"
        if c.cost is not None:
            line += f" (cost {c.cost:.2f})"
        lines.append(line)
    if answer.unknown:
        lines.append(f"_{answer.unknown} held GPU claim(s) have no readings: not judged_")
    return message(plain(header), lines_block(header, lines, answer.total))


MAX_FRAGMENTATION_LINES = 60
GIB = 1024**3


def render_fragmentation(rows: list[NodeFragmentation], where: str = "") -> Message:
    header = (
        f"*Fragmentation*{escape(where)}: partitionable GPUs per node and class — GiB of free "
        "memory stranded on partly allocated GPUs, and the largest partition that fits now"
    )
    if not rows:
        return message(plain(header), [section(header), section("_no partitionable GPUs_")])
    lines = [
        f"• {escape(r.cluster)} · {escape(r.node or '?')} · `{escape(r.class_name)}`: "
        f"{escape(r.summary)} — {r.stranded_memory / GIB:.1f} GiB stranded"
        for r in rows[:MAX_FRAGMENTATION_LINES]
    ]
    return message(plain(header), lines_block(header, lines, len(rows)))
