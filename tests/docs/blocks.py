"""The examples of README.md and docs/*.md, as the docs test runs them: fenced blocks, their
commands, and how each is to be judged.

A fenced block tagged `sh`, `shell`, `bash` or `console` is shell, one tagged `graphql` is a
GraphQL document; other tags (python, yaml, text…) are not run. An untagged block whose first
line starts like a command (`dra-mirror`, `kubectl`, `curl`, `scripts/`…) is an error: tag it.

A block opts out with a visible HTML comment on the line before it (blank lines between are
allowed), naming the reason:

    <!-- docs-test: skip — needs a real cluster -->

A skip without a reason is an error. A block that changes the demo's world (deletes a claim)
runs against a demo of its own, started in its directory, so that the blocks after it find the
demo as the docs describe it; it says so the same way, with the reason:

    <!-- docs-test: own-demo — deletes the idle claim -->

Within a shell block, each line is one command
(`\\` continues it; `#` starts a comment; a leading `$ ` is dropped). A command ending in `&`,
and one that runs until stopped (`dra-mirror serve|watch|sim`, `redis-server`,
`kubectl … -w`), runs in the background for the rest of its block; one of the latter without
`&` must be the block's last line (pasted, it holds the terminal and the lines after it never
run). A trailing comment
`# exits N` (or `# exit status N`) documents the exit status expected; else it is 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SHELL_TAGS = {"sh", "shell", "bash", "console"}
GRAPHQL_TAGS = {"graphql", "gql"}
COMMAND_WORDS = ("dra-mirror", ".venv/", "kubectl", "curl", "scripts/", "helm", "docker", "$ ")
MARKER = re.compile(
    r"<!--\s*docs-test:\s*(?P<what>skip|own-demo)\s*(?:[—:-]+\s*(?P<reason>.*?))?\s*-->"
)
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<tag>[\w-]*)\s*$")
EXITS = re.compile(r"#\s*exit(?:s| status)\s+(?P<code>\d+)\b")
FOREVER = re.compile(
    r"^(?:\S*/)?(?:dra-mirror\s+(?:serve|watch|sim(?!\s+--list-scenarios)|demo)\b"
    r"|redis-server\b|scripts/demo\b)"
    r"|^kubectl\b.*\s(?:-w|--watch)\b"
)


class DocsError(Exception):
    """A block the docs test cannot judge: untagged commands, a skip without a reason."""


@dataclass(frozen=True)
class Command:
    text: str  # as the shell runs it, comments dropped
    line: int
    expected_exit: int = 0
    background: bool = False
    # runs until stopped without a trailing `&`: pasted, the lines after it would never run
    holds_terminal: bool = False


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    tag: str
    text: str
    skip: str | None = None  # the reason given
    commands: list[Command] = field(default_factory=list)
    own_demo: str | None = None  # the reason given: runs against a demo of its own

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def doc_files(root: Path) -> list[Path]:
    """README.md and every docs/*.md (not the screens' own files under docs/web/)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def read_blocks(path: Path) -> list[Block]:
    """Every fenced block of a markdown file."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, tag = len(opening["indent"]), opening["tag"].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j].lstrip())
            j += 1
        what, reason = _marker_before(lines, i, path)
        skip = reason if what == "skip" else None
        own = reason if what == "own-demo" else None
        text = "\n".join(body)
        block = Block(path, i + 1, tag, text, skip, own_demo=own)
        if tag in SHELL_TAGS:
            block = Block(path, i + 1, tag, text, skip, shell_commands(text, i + 2), own)
        elif not tag and text.lstrip().startswith(COMMAND_WORDS) and skip is None:
            raise DocsError(f"{block.where}: an untagged block of commands: tag it ```sh")
        found.append(block)
        i = j + 1
    return found


def _marker_before(lines: list[str], fence: int, path: Path) -> tuple[str | None, str | None]:
    """The docs-test marker on the line before a fence: (skip | own-demo, its reason)."""
    k = fence - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    if k < 0:
        return None, None
    marker = MARKER.search(lines[k])
    if not marker:
        return None, None
    if not (marker["reason"] or "").strip():
        raise DocsError(f"{path.name}:{fence + 1}: a docs-test {marker['what']} needs a reason")
    return marker["what"], marker["reason"].strip()


def shell_commands(text: str, first_line: int = 1) -> list[Command]:
    """The commands of a shell block, one a line (`\\` continues a line)."""
    commands: list[Command] = []
    pending, start = "", first_line
    for offset, raw in enumerate(text.splitlines()):
        if not pending:
            start = first_line + offset
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole.startswith("$ "):
            whole = whole[2:]
        code, comment = split_comment(whole)
        if not code:
            continue
        exits = EXITS.search(comment)
        detached = code.endswith("&") and not code.endswith("&&")
        code = code.removesuffix("&").strip() if detached else code
        forever = bool(FOREVER.search(code))
        expected = int(exits["code"]) if exits else 0
        commands.append(
            Command(code, start, expected, detached or forever, forever and not detached)
        )
    return commands


def split_comment(line: str) -> tuple[str, str]:
    """(command, comment) of a shell line: `#` after a blank, outside quotes."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].strip(), line[index:]
    return line.strip(), ""
