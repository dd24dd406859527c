"""The real objects: tests/fixtures/real (this repository) and ../shared/fixtures/upstream.

`files(upstream)` maps each corpus file to the objects it holds, in order: YAML (multi-
document) or JSON; a `List` — or a document with `items`, as `kubectl get -o yaml` prints a
list even when a page cuts its trailer — gives its items; documents that are not objects
(comments, empty) are skipped. `cluster_name(path)` names a simulated cluster after a file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def objects_in(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    docs = [json.loads(text)] if path.suffix == ".json" else list(yaml.safe_load_all(text))
    found: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        if doc.get("kind") == "List" or ("items" in doc and "kind" not in doc):
            found.extend(item for item in doc.get("items") or [] if isinstance(item, dict))
        else:
            found.append(doc)
    return found


def real_files() -> list[Path]:
    return sorted(p for p in REAL.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


def files(upstream: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """Every corpus file (ours as `real/<name>`, the shared ones as `upstream/<name>`)."""
    found = {f"real/{p.name}": objects_in(p) for p in real_files()}
    found.update({f"upstream/{p.name}": objects_in(p) for p in upstream})
    return found


def cluster_name(index: int, name: str) -> str:
    """A cluster (and kubeconfig context) name for the `index`th corpus file."""
    stem = re.sub(r"[^a-z0-9-]+", "-", name.split("/", 1)[1].lower()).strip("-")
    return f"c{index}-{stem}"[:50]
