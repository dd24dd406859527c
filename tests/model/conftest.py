"""Helpers for the model tests: the upstream fixture documents, loaded once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_mirror.service.model.kinds import KINDS


def documents(path: Path) -> list[dict[str, Any]]:
    """Every object of a fixture file: multi-document YAML, List kinds unwrapped, JSON."""
    text = path.read_text()
    docs = [json.loads(text)] if path.suffix == ".json" else list(yaml.safe_load_all(text))
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not doc:
            continue
        out.extend(doc.get("items") or [] if doc.get("kind") == "List" else [doc])
    return out


def mirrored(path: Path) -> list[dict[str, Any]]:
    """The objects of a fixture file whose kind the mirror watches."""
    return [doc for doc in documents(path) if doc.get("kind") in KINDS]


@pytest.fixture(scope="session")
def fixture_dir(upstream_fixtures: list[Path]) -> Path:
    return upstream_fixtures[0].parent
