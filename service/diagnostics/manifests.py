"""Reading manifests a client sends (lintManifests, `dra-mirror lint`): YAML, bounded.

YAML from outside can be built to hurt the reader: nesting thousands of levels deep (PyYAML's
pure-Python composer recurses once per level and dies with RecursionError; libyaml stops at
1,000 levels with a scanner error), or aliases that expand exponentially ("billion laughs":
nine anchors of nine aliases each are 387 million nodes to any code that walks the result,
although the loader shares them). Kubernetes objects nest a dozen levels, CRD schemas a few
dozen, and real manifests use few aliases.

`load_manifests(text)` therefore reads with libyaml's safe loader when PyYAML has it (the
pure-Python safe loader otherwise), and refuses with `ManifestTextError` — a message fit to
show the client — any document nested deeper than `MAX_DEPTH` or whose values, aliases
expanded, exceed `MAX_NODES`. The walk that checks both is iterative and stops at the first
excess, so its own cost is bounded by `MAX_NODES`. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 100
"""Deepest nesting of mappings and sequences accepted in one document."""
MAX_NODES = 1_000_000
"""Most values in one request's documents, counting every expansion of an alias."""

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestTextError(ValueError):
    """The text cannot be read as manifests; the message says why."""


def load_manifests(text: str) -> list[Any]:
    """The non-empty YAML documents of `text`, each checked against the bounds above."""
    try:
        docs = [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as error:
        raise ManifestTextError(f"not YAML: {_first_line(error)}") from None
    except RecursionError:  # the pure-Python composer, past the interpreter's stack
        raise ManifestTextError(f"nested deeper than {MAX_DEPTH} levels") from None
    check_bounds(docs)
    return docs


def check_bounds(docs: list[Any]) -> None:
    """Raise `ManifestTextError` if a document nests deeper than `MAX_DEPTH` or the documents
    hold more than `MAX_NODES` values (aliases counted each time they are used)."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(doc, 1) for doc in docs]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ManifestTextError(
                f"more than {MAX_NODES:,} values (aliases expanded): not a set of manifests"
            )
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth >= MAX_DEPTH and children:
            raise ManifestTextError(f"nested deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)


def _first_line(error: yaml.YAMLError) -> str:
    # PyYAML's messages span several lines (context, problem, the mark); keep them short.
    text = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return text if len(text) <= 300 else text[:300] + "…"
