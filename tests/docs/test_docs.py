"""Every documented example works verbatim against the demo: the docs are tested.

Every fenced shell block and GraphQL document of README.md and docs/*.md (`tests.docs.blocks`)
runs against one demo for the module — `scripts/demo`, the README's first command, with the
Slack signing secret the docs use (`demo-secret`) — in a directory that looks like a fresh
clone (the repository's top-level entries linked, so `examples/…` and `scripts/…` resolve and
nothing is written into the work tree):

* a GraphQL document must answer without errors and with something: an answer whose every
  leaf is null or empty names a thing the demo lacks;
* a shell command must exit 0, or the status its `# exits N` comment documents; the CLI
  exits 1 for a device, class or claim the demo does not have, so such an example fails;
  `kubectl` runs against the simulator a block starts (the README's `dra-mirror sim … &`);
* `scripts/demo` / `dra-mirror demo` is the demo this module runs, `scripts/test` this suite.

The shell sees what a reader has after `. .venv/bin/activate`: `.venv/bin` first on PATH,
`DRA_MIRROR_SERVER` at the demo (the documented default address, rewritten to the demo's
private port like every other documented port, `tests.docs.shell.Ports`). A block that cannot
run here says why with `<!-- docs-test: skip — reason -->` just before it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphql import OperationDefinitionNode, parse

from tests.conftest import REPO_ROOT
from tests.docs.blocks import (
    GRAPHQL_TAGS,
    SHELL_TAGS,
    Block,
    Command,
    doc_files,
    read_blocks,
)
from tests.docs.shell import CommandFailed, Ports, Session, free_port

pytestmark = [pytest.mark.docs, pytest.mark.slow]

SLACK_SECRET = "demo-secret"
PROVIDED = {
    "scripts/demo": "the demo this module runs",
    "dra-mirror demo": "the demo this module runs",
    "scripts/test": "this test suite",
}
BLOCKS = [
    block
    for path in doc_files(REPO_ROOT)
    for block in read_blocks(path)
    if block.tag in SHELL_TAGS | GRAPHQL_TAGS
]


# what a clone lacks: git's own files, caches, and what running the docs leaves behind
NOT_CLONED = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", "demo.kubeconfig",
              "sim.kubeconfig"}  # fmt: skip


def fresh_clone(target: Path) -> Path:
    """A directory with the repository's top-level entries linked (what a clone has)."""
    target.mkdir()
    for entry in REPO_ROOT.iterdir():
        if entry.name not in NOT_CLONED:
            (target / entry.name).symlink_to(entry)
    return target


class Demo:
    """`scripts/demo` run in `clone` (where it writes `demo.kubeconfig`, as in a reader's clone)."""

    def __init__(self, clone: Path, port: int) -> None:
        self.port, self.log = port, clone.parent / f"{clone.name}-demo.log"
        env = {**os.environ, "DRA_MIRROR_SLACK_SIGNING_SECRET": SLACK_SECRET}
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                ["scripts/demo", "--port", str(port)],
                cwd=clone,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 120) -> None:
        import time

        deadline = time.monotonic() + timeout
        while "Paste one of these" not in self.log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"scripts/demo did not come up:\n{self.log.read_text()}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_clone(tmp_path_factory.mktemp("docs") / "clone")


@pytest.fixture(scope="module")
def demo(clone: Path) -> Iterator[Demo]:
    demo = Demo(clone, free_port())
    try:
        demo.wait_ready()
        yield demo
    finally:
        demo.stop()


@pytest.fixture(scope="module")
def ports(demo: Demo) -> Ports:
    return Ports({8000: demo.port})


def shell_env(clone: Path, demo: Demo) -> dict[str, str]:
    venv = clone / ".venv" / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_MIRROR_")}
    env.update(
        PATH=f"{venv}:{env.get('PATH', '/usr/bin:/bin')}",
        VIRTUAL_ENV=str(clone / ".venv"),
        DRA_MIRROR_SERVER=demo.url,
        DRA_MIRROR_SLACK_SIGNING_SECRET=SLACK_SECRET,
        HOME=str(clone.parent),  # nothing of the user's (a kubeconfig…) leaks in
    )
    return env


def empty(value: Any) -> bool:
    if isinstance(value, dict):
        return all(empty(v) for v in value.values())
    if isinstance(value, list):
        return all(empty(v) for v in value)
    return value is None or value == ""


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_documented_example_works(block: Block, demo: Demo, clone: Path, ports: Ports) -> None:
    if block.skip:
        pytest.skip(f"{block.where}: {block.skip}")
    if block.tag in GRAPHQL_TAGS:
        run_graphql(block, demo)
        return
    commands = [c for c in block.commands if not c.text.startswith(tuple(PROVIDED))]
    held = [c for c in commands[:-1] if c.holds_terminal]
    if held:
        pytest.fail(
            f"{block.where} line {held[0].line}: {held[0].text}\nruns until stopped and lines "
            "follow it: pasted, they would never run (end it with `&`, or make it the last line)"
        )
    workdir = clone.parent / f"block-{block.path.stem}-{block.line}"
    shutil.rmtree(workdir, ignore_errors=True)
    fresh_clone(workdir)
    own = None
    if block.own_demo:  # it changes the demo's world: a demo of its own, in its directory
        own = demo = Demo(workdir, free_port())
        ports = Ports({8000: own.port})
    else:  # the reader runs the block where they ran scripts/demo
        (workdir / "demo.kubeconfig").symlink_to(clone / "demo.kubeconfig")
    session = None
    try:
        if own is not None:
            own.wait_ready()
        session = Session(workdir, shell_env(workdir, demo), ports)
        for command in commands:
            try:
                session.run(command)
            except CommandFailed as failure:
                pytest.fail(f"{block.where} line {command.line}: {command.text}\n{failure}")
        try:
            session.finish()
        except CommandFailed as failure:
            pytest.fail(f"{block.where}: {failure}")
    finally:
        if session is not None:
            session.close()
        if own is not None:
            own.stop()


def run_graphql(block: Block, demo: Demo) -> None:
    try:
        document = parse(block.text)
    except Exception as error:
        pytest.fail(f"{block.where}: not a GraphQL document ({error}); mark it skipped with why")
    if not all(isinstance(d, OperationDefinitionNode) for d in document.definitions):
        pytest.fail(f"{block.where}: not only operations; mark it skipped with why")
    answer = httpx.post(f"{demo.url}/graphql", json={"query": block.text}, timeout=30).json()
    assert not answer.get("errors"), f"{block.where}: {answer['errors']}"
    assert not empty(answer.get("data")), (
        f"{block.where}: the demo answers nothing ({answer}): does it name something the "
        "demo lacks?"
    )


def test_an_example_naming_what_the_demo_lacks_fails(demo: Demo, clone: Path, ports: Ports):
    """The check can fail: a device, a class and a claim the demo does not have."""
    workdir = fresh_clone(clone.parent / "lacking")
    session = Session(workdir, shell_env(workdir, demo), ports, timeout=60)
    try:
        lacking = (
            "dra-mirror who-holds n17/gpu-3",
            "dra-mirror free nvidia.com-gpu --cluster east",
            "dra-mirror explain training/no-such-claim --cluster east",
        )
        for text in lacking:
            with pytest.raises(CommandFailed, match="exit 1, documented 0"):
                session.run(Command(text, 1))
        session.run(Command("dra-mirror lint examples/mistakes.yaml", 1, expected_exit=1))
    finally:
        session.close()
    empty_answer = Block(
        Path("x.md"), 1, "graphql", '{ whoHolds(device: "n17/gpu-3") { cluster } }'
    )
    with pytest.raises(AssertionError, match="the demo answers nothing"):
        run_graphql(empty_answer, demo)
