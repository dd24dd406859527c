"""How the docs test reads a markdown file: which blocks run, how, and which opt out."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import Command, DocsError, read_blocks, shell_commands, split_comment
from tests.docs.shell import CommandFailed, Ports, Session


def blocks_of(tmp_path: Path, text: str):
    path = tmp_path / "page.md"
    path.write_text(text)
    return read_blocks(path)


def test_shell_and_graphql_blocks_with_their_commands(tmp_path: Path):
    (sh, gql, py) = blocks_of(
        tmp_path,
        "x\n```sh\ndra-mirror waiting   # a comment\n"
        "dra-mirror lint bad.yaml  # exits 1: errors\n"
        "dra-mirror sim --scenario demo \\\n  --kubeconfig-out k\n"
        "kubectl get pods -w\nredis-server --port 6379 &\n```\n"
        "```graphql\n{ clusters { name } }\n```\n```python\nprint(1)\n```\n",
    )
    assert (sh.tag, gql.tag, py.tag, sh.line) == ("sh", "graphql", "python", 2)
    assert sh.commands == [
        Command("dra-mirror waiting", 3),
        Command("dra-mirror lint bad.yaml", 4, expected_exit=1),
        Command(
            "dra-mirror sim --scenario demo  --kubeconfig-out k",
            5,
            background=True,
            holds_terminal=True,
        ),
        Command("kubectl get pods -w", 7, background=True, holds_terminal=True),
        Command("redis-server --port 6379", 8, background=True),
    ]
    assert gql.text == "{ clusters { name } }"


def test_a_block_that_changes_the_demo_says_so(tmp_path: Path):
    (block,) = blocks_of(
        tmp_path, "<!-- docs-test: own-demo — deletes a claim -->\n```sh\nkubectl x\n```\n"
    )
    assert (block.own_demo, block.skip) == ("deletes a claim", None)
    with pytest.raises(DocsError, match="own-demo needs a reason"):
        blocks_of(tmp_path, "<!-- docs-test: own-demo -->\n```sh\nx\n```\n")


def test_a_block_runs_as_pasted(tmp_path: Path):
    """The line after a background command runs at once, as in a terminal the block is pasted
    into: reading a kubeconfig the simulator has not written yet fails; waiting for it works."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path)}
    start = "dra-mirror sim --scenario demo --kubeconfig-out k.yaml &\n"
    session = Session(tmp_path, env, Ports(), timeout=60)
    try:
        first, second = shell_commands(start + "test -s k.yaml\n")
        session.run(first)
        with pytest.raises(CommandFailed, match="exit 1"):
            session.run(second)
        session.finish()  # the simulator came up all the same
    finally:
        session.close()
    session = Session(tmp_path, env, Ports(), timeout=60)
    try:
        for command in shell_commands(
            start + "until [ -s k.yaml ]; do sleep 0.2; done\ntest -s k.yaml\n"
        ):
            session.run(command)
        session.finish()
    finally:
        session.close()


def test_a_skip_needs_a_visible_reason(tmp_path: Path):
    (block,) = blocks_of(
        tmp_path, "<!-- docs-test: skip — needs a real cluster -->\n\n```sh\nx\n```\n"
    )
    assert block.skip == "needs a real cluster"
    with pytest.raises(DocsError, match="needs a reason"):
        blocks_of(tmp_path, "<!-- docs-test: skip -->\n```sh\nx\n```\n")


def test_untagged_commands_are_refused(tmp_path: Path):
    with pytest.raises(DocsError, match="tag it"):
        blocks_of(tmp_path, "```\ndra-mirror waiting\n```\n")
    (figures,) = blocks_of(tmp_path, "```\n800 pods on 100 nodes\n```\n")
    assert figures.tag == ""


def test_comments_outside_quotes_only():
    assert split_comment("jq '.a # b' x  # c") == ("jq '.a # b' x", "# c")
    assert shell_commands("ls && echo ok\n")[0].background is False
    assert shell_commands("dra-mirror sim --list-scenarios\n")[0].background is False


def test_documented_ports_become_private_ones():
    ports = Ports({8000: 1234})
    text, listened = ports.rewrite(
        "serve --port 8002 --server http://127.0.0.1:8000 redis://localhost:8002/0"
    )
    private = ports.fixed[8002]
    assert (
        text
        == f"serve --port {private} --server http://127.0.0.1:1234 redis://localhost:{private}/0"
    )
    assert listened == [private]
