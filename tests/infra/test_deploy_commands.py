"""Every dra-mirror command line in the deploy files (Helm chart, docker-compose) names a
subcommand and options that ``dra-mirror`` (``service.cli.main``) really has."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml

from dra_mirror.service.cli.main import main

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "helm" / "dra-mirror" / "templates"


def _compose_command_lines() -> list[list[str]]:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return [
        service["command"]
        for service in compose["services"].values()
        if service.get("image", "").startswith("dra-mirror")
    ]


def _helm_command_lines() -> list[list[str]]:
    # Argument lists are written as printf'd YAML ("- serve\n- --no-watch\n…") or flow lists.
    lines: list[list[str]] = []
    for template in TEMPLATES.glob("*.yaml"):
        text = template.read_text()
        for literal in re.findall(r'printf "((?:- [^"\\]+\\n)+)', text):
            lines.append([item[2:] for item in literal.split("\\n") if item.startswith("- ")])
        for flow in re.findall(r"args: \[([^\]]*)\]", text):
            lines.append([item.strip() for item in flow.split(",")])
    return lines


COMMAND_LINES = _compose_command_lines() + _helm_command_lines()


def test_deploy_files_have_command_lines() -> None:
    subcommands = {line[0] for line in COMMAND_LINES}
    assert {"serve", "watch", "migrate", "sim"} <= subcommands


@pytest.mark.parametrize("line", COMMAND_LINES, ids=lambda line: " ".join(line))
def test_command_line_exists(line: list[str]) -> None:
    name, *arguments = line
    command = main.commands.get(name) if isinstance(main, click.Group) else None
    assert command is not None, f"dra-mirror has no {name!r} command"
    options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    for argument in arguments:
        if argument.startswith("--"):
            flag = argument.split("=", 1)[0]
            assert flag in options, f"dra-mirror {name} has no {flag}"
