"""Block Kit building blocks of the replies (`service.slack.replies`), help and errors.

Every reply is `{"response_type", "text", "blocks"}` (`message`): `text` is the plain
fallback Slack shows in notifications; `blocks` carry the answer. Slack's limits are
respected: at most 50 blocks, section text at most 3,000 characters, at most 10 fields per
section (`lines_block` packs long lists into sections and says how many more there are).
`escape` keeps a person's text from becoming Slack markup; `when` words an instant with its
age.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from dra_mirror.service.questions.claims import duration

MAX_BLOCKS = 50
MAX_TEXT = 3000  # a section's text
MAX_FIELD = 2000  # one of a section's fields
Message = dict[str, Any]

HELP = [
    ("who-holds <uuid | node/device | device> [cluster]", "the claims holding a device"),
    ("free [class] [cluster]", "free devices"),
    ("waiting [class] [cluster]", "claims waiting for devices, longest first"),
    ("idle [cluster]", "claims holding devices with no running pod"),
    ("not-busy [cluster]", "claims whose running pods leave their GPUs idle"),
    ("capacity [cluster]", "devices per driver: free, in use, partitioned"),
    ("fragmentation [class] [cluster]", "partitionable GPUs: the largest partition that fits"),
    ("pod <namespace/pod> [cluster]", "a pod's claims and their devices"),
    ("explain <namespace/claim> [cluster]", "why a claim is pending, or whether it is healthy"),
    ("lint <cluster>", "common DRA mistakes in a cluster"),
    ("history <device> [hours] [cluster]", "who held a device (needs history)"),
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
