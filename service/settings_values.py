"""The settings' value checks: `SettingsError` for a flag or environment variable of the
wrong shape, the checks that raise it, and the parsing of an environment string into the type
of a setting's default. Pure; `service.settings` re-exports `SettingsError`. `read_yaml(path,
error)` reads a settings file (prices, utilisation sources), failing with one line naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def read_yaml(path: str, error: type[Exception]) -> Any:
    """The YAML document in the file at `path`; `error` with one line when it cannot be read
    or is not YAML."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except OSError as failure:
        raise error(f"{path}: cannot read ({failure.strerror})") from None
    except yaml.YAMLError as failure:
        raise error(f"{path}: not YAML ({failure})") from None


class SettingsError(ValueError):
    """A flag or environment variable has a value of the wrong shape."""


def _require(ok: bool, setting: str, value: Any, accepted: str) -> None:
    """`SettingsError` unless `ok`: the setting, at most 60 characters of its value (None:
    not shown, for URLs that may hold a password), and what it accepts."""
    if not ok:
        if value is None:
            raise SettingsError(f"{setting}: {accepted}")
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:60] + "…"
        raise SettingsError(f"{setting} {shown}: {accepted}")


def _positive(setting: str, value: Any, *, zero: bool = False) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    ok = number and (value >= 0 if zero else value > 0)
    _require(ok, setting, value, "must be a number " + (">= 0" if zero else "> 0"))


def _parse(name: str, raw: str, default: Any) -> Any:
    """Parse an environment string into the type of the field's default."""
    if isinstance(default, bool):
        lowered = raw.strip().lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off", ""}:
            return False
        raise SettingsError(f"{name}={raw!r}: expected true or false")
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise SettingsError(f"{name}={raw!r}: expected a number") from None
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise SettingsError(f"{name}={raw!r}: expected an integer") from None
    if isinstance(default, tuple):
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if default is None:  # optional string: an empty variable means unset
        return raw or None
    return raw
