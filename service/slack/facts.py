"""The replies that show the graph's facts: explanations, lint findings, a device's history.

`render_explain` lists every fact of each diagnosis (`service.questions.facts`) as
`key: value` lines (`flatten`), its verdict and message first; `render_lint` the findings of
a cluster; `render_history` who held a device, when, and until when.
"""

from __future__ import annotations

from typing import Any

from .blocks import Message, escape, lines_block, message, section

REF_KEYS = frozenset({"cluster", "kind", "namespace", "name"})
MAX_LINES = 40


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


def render_explain(answers: list[dict[str, Any]], target: str) -> Message:
    if not answers:
        text = f"No claim `{target}` in any cluster you may see."
        return message(text, [section(escape(text))])
    blocks = []
    for d in answers:
        claim = f"{d['namespace']}/{d['name']}"
        head = f"*{escape(claim)}* in {escape(d['cluster'])}: `{escape(str(d['verdict']))}`"
        if d.get("message"):
            head += f"\n{escape(str(d['message']))}"
        rest = [
            f"• {escape(line)}"
            for line in flatten(d)
            if not line.startswith(("verdict:", "message:"))
        ]
        blocks += lines_block(head, rest[:MAX_LINES], len(rest))
    first = answers[0]
    return message(f"{target}: {first['verdict']} {first['message']}", blocks)


def render_lint(findings: list[dict[str, Any]], cluster: str) -> Message:
    errors = sum(1 for f in findings if f["severity"] == "ERROR")
    header = f"*{len(findings)} finding(s)* in {escape(cluster)} ({errors} error(s))"
    lines = [
        f"• {f['severity'].lower()} `{escape(f['rule'])}` {escape(f['object'])}"
        f" {escape(f['path'])}: {escape(f['message'])}"
        for f in findings[:MAX_LINES]
    ]
    if not findings:
        lines = ["no common DRA mistake found"]
    return message(
        f"{len(findings)} finding(s) in {cluster}", lines_block(header, lines, len(lines))
    )


def render_history(timelines: list[dict[str, Any]], device: str, hours: float) -> Message:
    holders = [a for t in timelines for a in t["allocations"]]
    header = f"*{len(holders)} holding(s)* of `{escape(device)}` in the last {hours:g} h"
    lines = [
        f"• {escape(a['cluster'])} · `{escape(a['device'])}` — {escape(a['namespace'])}/"
        f"{escape(a['claim'])} from {escape(a['since'])} until {escape(a['until'] or 'now')}"
        + (f" ({escape(a['endReason'])})" if a.get("endReason") else "")
        for a in holders[:MAX_LINES]
    ]
    if not timelines:
        lines = ["history knows no device named so"]
    return message(
        plain_header(len(holders), device, hours), lines_block(header, lines, len(lines))
    )


def plain_header(count: int, device: str, hours: float) -> str:
    return f"{count} holding(s) of {device} in the last {hours:g} h"
