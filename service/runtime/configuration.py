"""What the surfaces the runtime builds read beside `Settings`, read and checked before the
app is built.

* `slack_settings()` — Slack's slash commands, from DRA_MIRROR_SLACK_* (`service.slack.config`;
  None: `/slack/commands` answers 404); a bad value raises `SettingsError`;
* `alerts_config(settings)` — the alerts' file named by DRA_MIRROR_ALERTS_CONFIG
  (`service.alerts.config`; None when unset); a bad file raises `ConfigurationError`, whose
  message starts with `alerts: ` and says where and why;
* `utilization_config(settings)` — the utilisation source's file named by
  DRA_MIRROR_UTILIZATION_CONFIG (`service.utilization.config`; None when unset); a bad file
  raises `ConfigurationError` starting with `utilization: `;
* `prices_config(settings)` — the chargeback's price table named by DRA_MIRROR_HISTORY_PRICES
  (`service.history.prices`; None when unset); a bad file raises `ConfigurationError`
  starting with `prices: `.

The command line turns either error into one line and exit status 2, before anything starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_mirror.service.settings import Settings

if TYPE_CHECKING:  # read only by the commands that serve
    from dra_mirror.service.alerts.config import AlertsConfig
    from dra_mirror.service.history.prices import PriceTable
    from dra_mirror.service.slack import SlackSettings
    from dra_mirror.service.utilization.config import UtilizationConfig


class ConfigurationError(ValueError):
    """A configuration file the mirror cannot run with; the message says where and why."""


def slack_settings() -> SlackSettings | None:
    """Slack commands' settings from DRA_MIRROR_SLACK_* (None: `/slack/commands` is off)."""
    from dra_mirror.service.slack import SlackSettings

    return SlackSettings.from_env()


def utilization_config(settings: Settings) -> UtilizationConfig | None:
    """The utilisation source's file (DRA_MIRROR_UTILIZATION_CONFIG), checked; None when unset."""
    from dra_mirror.service.utilization.config import UtilizationConfigError, load

    try:
        return load(settings.utilization.config)
    except UtilizationConfigError as error:
        raise ConfigurationError(f"utilization: {error}") from None


def alerts_config(settings: Settings) -> AlertsConfig | None:
    """The alerts' configuration file (DRA_MIRROR_ALERTS_CONFIG), checked; None when unset."""
    from dra_mirror.service.alerts.config import AlertsConfigError, load

    try:
        return load(settings.alerts.config)
    except AlertsConfigError as error:
        raise ConfigurationError(f"alerts: {error}") from None


def prices_config(settings: Settings) -> PriceTable | None:
    """The chargeback's price table (DRA_MIRROR_HISTORY_PRICES), checked; None when unset."""
    from dra_mirror.service.history.prices import PricesError, load

    try:
        return load(settings.history.prices)
    except PricesError as error:
        raise ConfigurationError(f"prices: {error}") from None
