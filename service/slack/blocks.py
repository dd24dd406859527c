"""Block Kit messages for the answers of `service.questions` (and help, and errors).

Each `render_*` returns a slash-command reply: `{"response_type", "text", "blocks"}`. `text` is
the plain fallback Slack shows in notifications; `blocks` carry the answer. Slack's limits are
respected: at most 50 blocks, section text at most 3,000 characters, at most 10 fields per
section (longer lists are cut and say how many more there are).

A holding shows the device (name, uuid, model), its cluster and node, the claim
(namespace/name, origin, state), its consumer pods, since when it is held, and whether it is idle.
Holders the asker may not see are never named: a device held only by them is "held in another
namespace", with their count.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from dra_mirror.service.questions.chatops import Claims, Free, duration
from dra_mirror.service.questions.explain import Explanation
from dra_mirror.service.questions.holdings import HoldingRow, WhoHolds

MAX_BLOCKS = 50
MAX_TEXT = 3000  # a section's text
MAX_FIELD = 2000  # one of a section's fields
MAX_HOLDINGS = 20  # holding sections in one reply (a shared device may have hundreds)
MAX_CANDIDATES = 40  # devices an ambiguous name lists
Message = dict[str, Any]

HELP = [
    ("who-holds <uuid | node/device | device> [cluster]", "the claims holding a device"),
    ("free [class] [cluster]", "free devices"),
    ("waiting [class] [cluster]", "claims waiting for devices, longest first"),
    ("idle [cluster]", "claims holding devices with no running pod"),
    ("explain <namespace/claim> [cluster]", "why a claim is pending, or whether it is healthy"),
    ("plan <manifest YAML | Slack file link>", "where it would land if applied now, or why not"),
    ("help", "this list"),
]


def message(text: str, blocks: list[dict[str, Any]]) -> Message:
    """A reply; `text` (the notification fallback, plain words) is escaped here."""
    return {"response_type": "ephemeral", "text": escape(text), "blocks": blocks[:MAX_BLOCKS]}


def section(text: str, fields: Iterable[str] = ()) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "section", "text": mrkdwn(text)}
    found = [mrkdwn(f, MAX_FIELD) for f in fields][:10]
    if found:
        block["fields"] = found
    return block


def mrkdwn(text: str, limit: int = MAX_TEXT) -> dict[str, str]:
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return {"type": "mrkdwn", "text": text}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [mrkdwn(text)]}


def escape(text: str) -> str:
    """Slack mrkdwn treats &, < and > as markup (links, mentions): escape them."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def when(moment: str | None, now: datetime | None = None) -> str:
    """`2026-01-01 02:00 UTC (1h ago)`; `unknown` when the mirror does not know."""
    if not moment:
        return "unknown"
    try:
        at = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    except ValueError:
        return escape(moment)
    ago = ((now or datetime.now(UTC)) - at).total_seconds()
    return f"{at:%Y-%m-%d %H:%M} UTC ({duration(ago)} ago)"


def lines_block(header: str, lines: list[str], total: int) -> list[dict[str, Any]]:
    """A header section, then the lines packed into sections under Slack's size limit."""
    blocks = [section(header)]
    chunk: list[str] = []
    for line in lines:
        if sum(len(c) + 1 for c in chunk) + len(line) > MAX_TEXT - 100:
            blocks.append(section("\n".join(chunk)))
            chunk = []
        chunk.append(line)
    if chunk:
        blocks.append(section("\n".join(chunk)))
    if total > len(lines):
        blocks.append(context(f"…and {total - len(lines)} more"))
    return blocks


def plain(markup: str) -> str:
    """Our own mrkdwn back to words (the fallback `text` is escaped again by `message`)."""
    unescaped = markup.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return unescaped.replace("*", "")


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


def render_who_holds(answer: WhoHolds, now: datetime | None = None) -> Message:
    spec = escape(answer.spec)
    where = f" in {answer.cluster}" if answer.cluster else ""
    if not answer.holdings and answer.withheld:
        devices = len(answer.withheld)
        text = (
            f"`{answer.spec}`{where} is held in another namespace "
            f"({elsewhere(answer.held_elsewhere)}"
            + (f", on {devices} devices)." if devices > 1 else ").")
        )
        return message(text, [section(escape(text))])
    if not answer.holdings:
        text = f"No claim holds `{answer.spec}`{where}: it is free, or no device is named so."
        return message(text, [section(escape(text))])
    where = escape(where)
    if answer.ambiguous:
        by_device: dict[tuple[str, str, str, str], list[HoldingRow]] = {}
        for h in answer.holdings:
            by_device.setdefault(h.device_ref, []).append(h)
        lines = []
        for ref in answer.devices[:MAX_CANDIDATES]:
            held = by_device[ref]
            first = held[0]
            claims = ", ".join(escape(h.claim) for h in held)
            node = escape(first.node or f"{first.driver}/{first.pool}")
            lines.append(
                f"• {escape(first.cluster)} · `{node}/{escape(first.device)}`"
                f"{' · ' + escape(first.uuid) if first.uuid else ''} — held by {claims}"
            )
        header = (
            f"`{spec}`{where} names {len(answer.devices)} held devices. "
            "Ask again with one of them (`node/device` or the uuid):"
        )
        return message(
            f"{answer.spec} is ambiguous: {len(answer.devices)} held devices",
            lines_block(header, lines, len(answer.devices)),
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
    lines = [
        f"• {escape(d.cluster)} · {escape(d.node or 'network-attached')}: `{escape(d.device)}`"
        + "".join(f" · {escape(x)}" for x in (d.uuid, d.model) if x)
        + (f" · tainted: {escape(', '.join(d.taints))}" if d.taints else "")
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


REF_KEYS = frozenset({"cluster", "kind", "namespace", "name"})


def flatten(value: Any, prefix: str = "") -> list[str]:
    """A diagnosis as `key: value` lines: nested objects dotted, lists numbered, empty values
    left out, object references (`namespace`/`name`) as `namespace/name`, checks (`name`,
    `ok`, `detail`) as `✓ name: detail` / `✗ name: detail`."""
    if isinstance(value, dict):
        if {"name", "ok"} <= value.keys():
            mark = "✓" if value["ok"] else "✗"
            detail = f": {value['detail']}" if value.get("detail") else ""
            return [f"{prefix}: {mark} {value['name']}{detail}"]
        out = []
        for k, v in value.items():
            if k == "__typename" or (not prefix and k in REF_KEYS):
                continue  # the header names the claim already
            out += flatten(v, f"{prefix}.{k}" if prefix else k)
        return out
    if isinstance(value, list):
        if all(isinstance(v, dict) and "name" in v and v.keys() <= REF_KEYS for v in value):
            value = [
                f"{v['namespace']}/{v['name']}" if v.get("namespace") else v["name"] for v in value
            ]
        if all(not isinstance(v, dict | list) for v in value):
            return [f"{prefix}: {', '.join(str(v) for v in value)}"] if value else []
        return [line for i, v in enumerate(value) for line in flatten(v, f"{prefix}[{i}]")]
    return [f"{prefix}: {value}"] if value not in (None, "") else []


def render_explain(answers: list[Explanation], target: str) -> Message:
    if not answers:
        text = f"No claim `{target}` in any mirrored cluster."
        return message(text, [section(escape(text))])
    blocks = []
    for a in answers:
        d = a.diagnosis
        verdict = d.get("verdict") or d.get("__typename") or "diagnosis"
        head = f"*{escape(a.claim)}* in {escape(a.cluster)}: `{escape(str(verdict))}`"
        if d.get("message"):
            head += f"\n{escape(str(d['message']))}"
        rest = [
            f"• {escape(line)}"
            for line in flatten(d)
            if not line.startswith(("verdict:", "message:"))
        ]
        blocks += lines_block(head, rest[:40], len(rest))
    first = answers[0].diagnosis
    return message(f"{target}: {first.get('verdict', '')} {first.get('message', '')}", blocks)


def render_help(command: str = "/gpu") -> Message:
    lines = [f"• `{escape(command)} {escape(usage)}` — {what}" for usage, what in HELP]
    return message(
        "dra-mirror commands",
        [
            section("*dra-mirror* answers about the DRA devices of every mirrored cluster:"),
            section("\n".join(lines)),
        ],
    )


def render_error(text: str) -> Message:
    return message(text, [section(f":warning: {escape(text)}")])
