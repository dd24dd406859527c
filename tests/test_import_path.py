"""One import path per module: the folders service/, schema/ and migrations/ load only as
dra_mirror.service, dra_mirror.schema and dra_mirror.migrations.

From the repository's root the folders are also top-level names on `sys.path` (the current
directory of `python -c`, of a REPL, of a script run from there). Imported by those names they
would load a second copy of every module — two registries of kinds, two `Settings` classes an
`isinstance` tells apart — so they refuse to load, saying which name to use."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_from_root(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("bare", "package"),
    [
        ("service.model.records", "dra_mirror.service"),
        ("service", "dra_mirror.service"),
        ("schema", "dra_mirror.schema"),
        ("migrations.env", "dra_mirror.migrations"),
    ],
)
def test_a_folder_s_bare_name_refuses_to_load(bare: str, package: str) -> None:
    found = run_from_root(f"import {bare}")
    assert found.returncode != 0
    last = found.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: import {package}, not "), found.stderr


def test_the_package_loads_once_from_the_root() -> None:
    code = (
        "import sys\n"
        "import dra_mirror.service.model.records as records\n"
        "import dra_mirror.service.cli.main, dra_mirror.service.runtime.mirror\n"
        "import dra_mirror.schema, dra_mirror.migrations\n"
        "print(records.__name__)\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in "
        "('service', 'schema', 'migrations')))\n"
    )
    found = run_from_root(code)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split("\n")[:2] == ["dra_mirror.service.model.records", "[]"]


def test_alembic_does_not_put_the_root_on_the_path() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "alembic.ini")
    assert "prepend_sys_path" not in config["alembic"]
