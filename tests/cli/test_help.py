"""Every command's --help names each option's environment variable and default.

Iterates over every command registered on `dra-mirror` (whatever module added it), so an
option added later without its variable or default in the help fails here.
"""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from dra_mirror.service.cli.help import (
    SettingOption,
    document_options,
    option_default,
    option_env,
    walk,
)
from dra_mirror.service.cli.main import main

COMMANDS = list(walk(main))


def help_of(name: str) -> str:
    args = [*name.split(), "--help"] if name != "main" else ["--help"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # click wraps lines


def test_every_command_is_walked():
    names = {name for name, _ in COMMANDS}
    assert {"serve", "watch", "demo", "sim", "migrate", "who-holds", "lint"} <= names


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_help_names_each_options_variable_and_default(name: str, command: click.Command):
    text = help_of(name)
    for param in command.params:
        if not isinstance(param, click.Option) or param.is_eager or param.hidden:
            continue
        flag = param.opts[0]
        env, default = option_env(param), option_default(param)
        if isinstance(param, SettingOption) or param.envvar:
            assert env and f"env {env}" in text, f"{name} {flag}: no variable in its help"
        if not param.is_flag:
            assert default is not None and f"default: {default}" in text, (
                f"{name} {flag}: no default in its help"
            )
        assert "(default " not in (param.help or ""), f"{name} {flag}: said twice"


@pytest.mark.parametrize("name", ["serve", "watch", "demo"])
def test_servers_list_every_variable_they_read(name: str):
    text = help_of(name)
    for variable in ("DRA_MIRROR_HTTP_PORT=8000", "DRA_MIRROR_ACCESS_CONFIG=none",
                     "DRA_MIRROR_STORE_REDIS_URL=none", "DRA_MIRROR_LOG_LEVEL=INFO"):  # fmt: skip
        assert variable in text
    if name != "watch":
        assert "DRA_MIRROR_SLACK_SIGNING_SECRET" in text


def test_watch_says_what_it_serves_and_that_redis_is_required():
    text = help_of("watch")
    assert "/graphql" in text and "--redis-url required" in text
    assert "instead of memory" not in text


def test_an_option_added_later_is_documented_too():
    @click.group()
    def group() -> None: ...

    @group.command()
    @click.option("--count", type=int, default=3, help="How many.")
    @click.option("--name", envvar="SOME_NAME", default="x", help="Who.")
    def thing(count: int, name: str) -> None: ...

    document_options(group, reads_settings={})
    document_options(group, reads_settings={})  # idempotent
    text = CliRunner().invoke(group, ["thing", "--help"]).output
    assert text.count("[default: 3]") == 1 and "[env SOME_NAME; default: x]" in text


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and re.fullmatch(r"dra-mirror, version \S+\n", result.output)
