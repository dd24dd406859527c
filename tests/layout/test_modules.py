"""The house rules a reader relies on, checked: every module of the package opens with a
docstring saying what it promises, and none is over 400 lines (split it instead)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("service", "schema", "migrations")
LIMIT = 400


def _modules() -> list[Path]:
    found = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    assert len(found) > 100  # the package is where this test thinks it is
    return found


def _name(path: Path, root: Path = ROOT) -> str:
    return str(path.relative_to(root))


def _offence(path: Path, root: Path = ROOT) -> str | None:
    text = path.read_text()
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > LIMIT:
        return f"{_name(path, root)} has {lines} lines; split it (at most {LIMIT})"
    if path.name == "__init__.py" and not text.strip():
        return None
    if path.parent.name == "versions":  # Alembic revisions say what they do in their own way
        return None
    docstring = ast.get_docstring(ast.parse(text))
    if not docstring or len(docstring) <= 20:
        return f"{_name(path, root)} opens without a docstring"
    return None


def test_every_module_is_at_most_400_lines_and_says_what_it_promises() -> None:
    offences = [o for o in map(_offence, _modules()) if o is not None]
    assert offences == []


def test_the_rule_catches_a_long_module_and_one_without_a_docstring(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text('"""A module that says what it promises, at length."""\n' + "x = 1\n" * LIMIT)
    bare = tmp_path / "bare.py"
    bare.write_text("x = 1\n")
    assert "401 lines" in (_offence(long, tmp_path) or "")
    assert "without a docstring" in (_offence(bare, tmp_path) or "")
