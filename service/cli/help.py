"""Help texts that name every option's environment variable and default, for every command.

Two pieces. `setting_option(*decls, setting="http.port", …)` declares an option that overrides
one `Settings` field: its environment variable (`DRA_MIRROR_HTTP_PORT`) and embedded default
(8000) are read from `service.settings`, never typed twice. `document_options(group)` walks
every command registered on the group (subgroups included) once they are all added, and appends
to each option's help `[env NAME; default: VALUE]`: the variable of a setting option or the
option's click `envvar`, and its default (click's own, the setting's, or `show_default` when it
is a text). A command that builds `Settings` also gets an epilog naming every `DRA_MIRROR_*`
variable it reads. Options added later, with plain `click.option` too, are documented the same
way; `tests/cli/test_help.py` holds every command to it.

Promises: idempotent (a second walk adds nothing); the behaviour of options is unchanged: only
their help text is, so flags still win over variables, which `Settings.from_env` reads.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import click

from dra_mirror.service.settings import ENV_PREFIX, Settings

F = TypeVar("F", bound=Callable[..., Any])


class SettingOption(click.Option):
    """An option overriding one `Settings` field ("group.field")."""

    def __init__(self, *args: Any, setting: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setting = setting
        self.setting_env, self.setting_default = setting_facts(setting)


def setting_facts(setting: str) -> tuple[str, Any]:
    """(environment variable, embedded default) of a "group.field" setting."""
    group_name, _, field_name = setting.partition(".")
    group = getattr(Settings(), group_name)
    if field_name not in {f.name for f in dataclasses.fields(group)}:
        raise KeyError(f"no setting {setting}")
    return f"{ENV_PREFIX}{group_name}_{field_name}".upper(), getattr(group, field_name)


def setting_option(*decls: str, setting: str, **kwargs: Any) -> Callable[[F], F]:
    """`click.option` for a flag that overrides `setting` (default None: not given)."""
    kwargs.setdefault("default", None)
    return click.option(*decls, cls=SettingOption, setting=setting, **kwargs)


def setting_envs(groups: tuple[str, ...] | None = None) -> list[tuple[str, Any]]:
    """Every `DRA_MIRROR_*` variable `Settings.from_env` reads (of `groups`, None: all),
    with its default."""
    found = []
    defaults = Settings()
    for group_field in dataclasses.fields(Settings):
        if groups is not None and group_field.name not in groups:
            continue
        group = getattr(defaults, group_field.name)
        for item in dataclasses.fields(group):
            env = f"{ENV_PREFIX}{group_field.name}_{item.name}".upper()
            found.append((env, getattr(group, item.name)))
    return found


def _shown(value: Any) -> str:
    if value is None or value == () or value == "":
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def option_env(option: click.Option) -> str | None:
    if isinstance(option, SettingOption):
        return option.setting_env
    if isinstance(option.envvar, str):
        return option.envvar
    if option.envvar:
        return ", ".join(option.envvar)
    return None


def option_default(option: click.Option) -> str | None:
    """The default as help shows it; None for a flag without a variable (off, said by its
    absence) and for --help/--version."""
    if isinstance(option.show_default, str):
        return option.show_default
    if isinstance(option, SettingOption) and option.default is None:
        return _shown(option.setting_default)
    if option.is_flag and not option_env(option):
        return None
    if callable(option.default):
        return None
    if isinstance(option.default, enum.Enum) and option.default.name == "UNSET":
        return _shown(())  # click's marker for an option declared without a default
    return _shown(option.default)


def suffix(option: click.Option) -> str:
    parts = []
    env = option_env(option)
    if env:
        parts.append(f"env {env}")
    default = option_default(option)
    if default is not None:
        parts.append(f"default: {default}")
    return f"[{'; '.join(parts)}]" if parts else ""


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    """(full name, command) of the command and every command below it."""
    name = " ".join(path) or command.name or ""
    yield name, command
    if isinstance(command, click.Group):
        for sub_name, sub in sorted(command.commands.items()):
            yield from walk(sub, (*path, sub_name))


def document_options(
    group: click.Group, *, reads_settings: Mapping[str, tuple[str, ...] | None]
) -> None:
    """Append env and default to every option's help; to each command named in
    `reads_settings` (as registered on `group`) an epilog with the variables of the settings
    groups it reads (None: all), each with its default."""
    for name, command in walk(group):
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_eager:
                continue
            text = suffix(param)
            help_text = param.help or ""
            if text and text not in help_text:
                param.help = f"{help_text} {text}".strip()
            param.show_default = False  # said once, in the suffix
        if name in reads_settings and "Environment (" not in (command.epilog or ""):
            envs = setting_envs(reads_settings[name])
            variables = ", ".join(f"{env}={_shown(default)}" for env, default in envs)
            command.epilog = (
                "Environment (a flag wins over its variable, a variable over the default; "
                f"docs/operations.md): {variables}. " + (command.epilog or "")
            ).strip()
