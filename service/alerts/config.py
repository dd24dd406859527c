"""The alerts' one configuration file, read and checked at start.

    DRA_MIRROR_ALERTS_CONFIG=/etc/dra-mirror/alerts.yaml   (unset: alerts are off)

```yaml
interval: 30                        # seconds between evaluations (default 30)
webUrl: https://dra-mirror.example.com   # links to the Devices screens (optional)
slack:                              # optional: without it alerts are only Prometheus series
  botTokenFile: /var/run/secrets/slack/bot-token   # else DRA_MIRROR_SLACK_BOT_TOKEN
  apiUrl: https://slack.com/api/    # slack_sdk's base_url (default)
  channel: "#gpu-alerts"            # the default channel
  channels:                         # a channel per cluster or cluster/namespace (most specific wins)
    east: "#east-gpus"
    east/training: "#training-gpus"
rules:                              # a rule is on when listed
  pending-behind-idle: {minutes: 10}
  idle-holder: {hours: 4}
  gpu-node-without-slices: {minutes: 15}
  pool-incomplete: {minutes: 10}
  tainted-while-held: {minutes: 0}
```

Each rule takes its duration in `minutes` or `hours` (one of them; 0 fires at once). Every
mistake — an unknown key or rule, a duration that is not a number, a channel without `#` or
an id, a missing token file — raises `AlertsConfigError` naming the place, so a mirror with a
bad file refuses to start rather than alerting wrongly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .rules import RULES

ENV = "DRA_MIRROR_ALERTS_CONFIG"
TOKEN_ENV = "DRA_MIRROR_SLACK_BOT_TOKEN"


class AlertsConfigError(ValueError):
    """The alerts configuration is wrong; the message says where and why."""


@dataclass(frozen=True)
class SlackTarget:
    token: str = field(repr=False)
    api_url: str = "https://slack.com/api/"
    channel: str | None = None
    channels: Mapping[str, str] = field(default_factory=dict)

    def channel_for(self, cluster: str, namespace: str) -> str | None:
        """The channel of a cluster's namespace, else of the cluster, else the default."""
        return (
            (self.channels.get(f"{cluster}/{namespace}") if namespace else None)
            or self.channels.get(cluster)
            or self.channel
        )


@dataclass(frozen=True)
class AlertsConfig:
    rules: Mapping[str, float]  # rule -> seconds its condition must hold before it fires
    interval: float = 30.0
    web_url: str | None = None
    slack: SlackTarget | None = None


def from_env(environ: Mapping[str, str] | None = None) -> AlertsConfig | None:
    """The configuration named by DRA_MIRROR_ALERTS_CONFIG (None: unset, alerts off)."""
    environ = os.environ if environ is None else environ
    return load(environ.get(ENV), environ=environ)


def load(path: str | None, *, environ: Mapping[str, str] | None = None) -> AlertsConfig | None:
    """The configuration in the file at `path` (the `alerts.config` setting; None: off)."""
    environ = os.environ if environ is None else environ
    if not path:
        return None
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise AlertsConfigError(f"{ENV}={path}: {error.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise AlertsConfigError(f"{path}: not YAML: {error}") from None
    return parse(doc, where=path, environ=environ)


def _check_keys(value: Any, allowed: set[str], where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AlertsConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise AlertsConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise AlertsConfigError(f"{where}: expected a number of 0 or more, got {value!r}")
    return float(value)


def _channel(value: Any, where: str) -> str:
    if not isinstance(value, str) or not (value.startswith("#") or value[:1] in ("C", "G")):
        raise AlertsConfigError(f"{where}: expected a channel (#name or an id C…), got {value!r}")
    return value


def parse(
    doc: Any, *, where: str = "alerts", environ: Mapping[str, str] | None = None
) -> AlertsConfig:
    """The configuration a parsed YAML document gives (see the module docstring)."""
    environ = os.environ if environ is None else environ
    top = _check_keys(doc, {"interval", "webUrl", "slack", "rules"}, where)
    rules: dict[str, float] = {}
    for name, spec in _check_keys(top.get("rules") or {}, set(RULES), f"{where}: rules").items():
        place = f"{where}: rules.{name}"
        spec = _check_keys(spec if spec is not None else {}, {"minutes", "hours"}, place)
        if "minutes" in spec and "hours" in spec:
            raise AlertsConfigError(f"{place}: give minutes or hours, not both")
        if "hours" in spec:
            rules[name] = _number(spec["hours"], f"{place}.hours") * 3600
        else:
            rules[name] = _number(spec.get("minutes", 0), f"{place}.minutes") * 60
    if not rules:
        raise AlertsConfigError(f"{where}: rules: list at least one of {', '.join(RULES)}")
    interval = _number(top.get("interval", 30), f"{where}: interval")
    if interval < 1:
        raise AlertsConfigError(f"{where}: interval: at least 1 second")
    web_url = top.get("webUrl")
    if web_url is not None and (
        not isinstance(web_url, str) or not web_url.startswith(("http://", "https://"))
    ):
        raise AlertsConfigError(f"{where}: webUrl: expected an http(s) URL, got {web_url!r}")
    slack = None
    if top.get("slack") is not None:
        place = f"{where}: slack"
        spec = _check_keys(top["slack"], {"botTokenFile", "apiUrl", "channel", "channels"}, place)
        token = environ.get(TOKEN_ENV, "").strip()
        if spec.get("botTokenFile"):
            try:
                token = Path(str(spec["botTokenFile"])).read_text().strip()
            except OSError as error:
                raise AlertsConfigError(f"{place}.botTokenFile: {error.strerror}") from None
        if not token:
            raise AlertsConfigError(f"{place}: no bot token (botTokenFile, or {TOKEN_ENV})")
        channels = {
            str(k): _channel(v, f"{place}.channels.{k}")
            for k, v in _check_keys(
                spec.get("channels") or {}, set(spec.get("channels") or {}), place
            ).items()
        }
        default = _channel(spec["channel"], f"{place}.channel") if spec.get("channel") else None
        if default is None and not channels:
            raise AlertsConfigError(f"{place}: give a channel, or channels per cluster")
        slack = SlackTarget(token=token, api_url=str(spec.get("apiUrl") or "https://slack.com/api/"),
                            channel=default, channels=channels)  # fmt: skip
    return AlertsConfig(rules=rules, interval=interval, web_url=web_url, slack=slack)
