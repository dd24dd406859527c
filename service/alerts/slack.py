"""Alerts to Slack: Block Kit messages posted with slack_sdk's Web API as the app's bot.

`SlackNotifier(target, web_url=...)`:

* `fire` posts `chat.postMessage` to the channel of every namespace the alert concerns
  (`details["namespaces"]`: a waiting claim's and its holders', a device's holders', the
  workloads on a node or in a pool; else the alert's own namespace), each channel once
  (`SlackTarget.channel_for`): a header with the rule, the summary, fields naming the cluster,
  the claim or device or node, the holders, since when, and a button linking to the Devices
  screen of the subject (`/ui/claim?…`, `/ui/device?…`, `/ui/slices?…`) when `webUrl` is set;
  it returns the `(channel, ts)` pairs, flattened;
* `resolve` updates each message (`chat.update`: the header says RESOLVED) and replies in its
  thread that the condition ended.

An alert whose cluster and namespace map to no channel is not posted (Prometheus still has it).
Slack API errors raise (`SlackApiError`), so the engine retries at its next evaluation.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from slack_sdk.web.async_client import AsyncWebClient

from .config import SlackTarget
from .engine import Alert
from .rules import GPU_NODE_WITHOUT_SLICES, POOL_INCOMPLETE, TAINTED_WHILE_HELD

TITLES = {
    "pending-behind-idle": "A claim waits while idle claims hold what it needs",
    "idle-holder": "A claim holds devices with no pod running",
    "gpu-node-without-slices": "A GPU node publishes no DRA devices",
    "pool-incomplete": "A resource pool is incomplete",
    "tainted-while-held": "A held device is tainted",
    "held-not-busy": "A claim holds GPUs that are not busy",
}


def screen_link(web_url: str | None, alert: Alert) -> str | None:
    """The Devices screen that shows the alert's subject (a deep link), if the mirror's web
    address is configured."""
    if not web_url:
        return None
    c = alert.condition
    d = c.details
    base = web_url.rstrip("/") + "/ui/"
    if c.rule == TAINTED_WHILE_HELD:
        query = {
            "cluster": c.cluster,
            "driver": d["driver"],
            "pool": d["pool"],
            "device": d["device"],
        }
        if d.get("node"):  # the screen reads the published device (taints, slice) by its node
            query["node"] = d["node"]
        return base + "device?" + urlencode(query)
    if c.rule == GPU_NODE_WITHOUT_SLICES:
        return base + "slices?" + urlencode({"cluster": c.cluster, "node": d["node"]})
    if c.rule == POOL_INCOMPLETE:
        query = {"cluster": c.cluster, "driver": d["driver"]}
        if d.get("node"):
            query["node"] = d["node"]
        return base + "slices?" + urlencode(query)
    return (
        base
        + "claim?"
        + urlencode({"cluster": c.cluster, "namespace": c.namespace, "name": c.name})
    )


def alert_blocks(
    alert: Alert, web_url: str | None, *, resolved: bool = False
) -> list[dict[str, Any]]:
    c = alert.condition
    state = "RESOLVED" if resolved else alert.severity.upper()
    fields = [f"*Cluster*\n{c.cluster}"]
    d = c.details
    if d.get("claim"):
        fields.append(f"*Claim*\n{d['claim']}")
    if d.get("holders"):
        fields.append("*Held by*\n" + ", ".join(d["holders"][:10]))
    if d.get("devices"):
        fields.append("*Devices*\n" + ", ".join(d["devices"][:10]))
    if d.get("device"):
        fields.append(f"*Device*\n{d['driver']}/{d['pool']}/{d['device']}")
    if d.get("node"):
        fields.append(f"*Node*\n{d['node']}")
    if d.get("pool") and not d.get("device"):
        fields.append(f"*Pool*\n{d['driver']}/{d['pool']}")
    if c.since:
        fields.append(f"*Since*\n{c.since}")
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": f"[{state}] {TITLES[c.rule]}"[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": c.summary[:3000]},
         "fields": [{"type": "mrkdwn", "text": f[:2000]} for f in fields[:10]]},
    ]  # fmt: skip
    link = screen_link(web_url, alert)
    if link:
        blocks.append({"type": "actions", "elements": [{
            "type": "button", "text": {"type": "plain_text", "text": "Open in dra-mirror"},
            "url": link, "action_id": "open"}]})  # fmt: skip
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"rule `{c.rule}`"}]})
    return blocks


class SlackNotifier:
    def __init__(self, target: SlackTarget, *, web_url: str | None = None) -> None:
        self.target = target
        self.web_url = web_url
        self.client = AsyncWebClient(token=target.token, base_url=target.api_url)
        # Channels an alert was posted to before a later post of it failed (by alert key):
        # Slack answers with the channel's id, not the name asked for.
        self._posted: dict[tuple[str, str, str, str], set[str]] = {}

    def channels(self, alert: Alert) -> list[str]:
        """The channels of every namespace the alert concerns (`details["namespaces"]`: the
        waiter's and the holders'), each once; else its own namespace's."""
        c = alert.condition
        namespaces = c.details.get("namespaces") or [c.namespace]
        found: list[str] = []
        for namespace in namespaces:
            channel = self.target.channel_for(c.cluster, namespace)
            if channel is not None and channel not in found:
                found.append(channel)
        return found

    async def fire(self, alert: Alert) -> Any:
        """Posts to each channel; the receipt is (channel, ts) pairs, flattened. A post that
        fails raises with the posts made so far kept on the alert (`receipt`): the next
        evaluation posts only to the channels still missing, never twice to one."""
        c = alert.condition
        receipt: list[str] = list(alert.receipt or ())
        posted = set(self._posted.get(c.key, ()))
        for channel in self.channels(alert):
            if channel in posted:
                continue
            reply = await self.client.chat_postMessage(
                channel=channel,
                text=f"[{alert.severity}] {c.summary}",
                blocks=alert_blocks(alert, self.web_url),
            )
            receipt += [reply["channel"], reply["ts"]]
            posted.add(channel)
            self._posted[c.key] = posted
            alert.receipt = tuple(receipt)
        self._posted.pop(c.key, None)
        return tuple(receipt) if receipt else None

    async def resolve(self, alert: Alert) -> None:
        if not alert.receipt:
            return
        c = alert.condition
        pairs = list(alert.receipt)
        for channel, ts in zip(pairs[::2], pairs[1::2], strict=True):
            await self.client.chat_update(
                channel=channel, ts=ts, text=f"[resolved] {c.summary}",
                blocks=alert_blocks(alert, self.web_url, resolved=True),
            )  # fmt: skip
            await self.client.chat_postMessage(
                channel=channel,
                thread_ts=ts,
                text=f"Resolved: {c.details.get('claim') or c.name} in {c.cluster} — "
                f"{TITLES[c.rule].lower()}: no longer so.",
            )
