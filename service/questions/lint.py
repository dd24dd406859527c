"""`lint`: the common DRA mistakes in manifests, or in a mirrored cluster, as finding facts.

* `lint_text(text)` lints YAML manifests offline, with the pure rules only
  (`service.diagnostics.lint`; rules that need a cluster's facts stay quiet);
* `lint_manifests(asker, text, cluster)` checks the same manifests against a mirrored
  cluster's classes, claims, templates, free devices and nodes too (the graph's
  `lintManifests`);
* `lint_cluster(asker, cluster)` finds the mistakes already in a mirrored cluster (the
  graph's `lint`).

Every answer is a list of findings shaped as the graph gives them
(`service.questions.facts.finding_facts`: rule, severity in capitals, object, path,
message). Text that is not YAML raises `ManifestError` (a `BadQuestion`); an unknown cluster
`UnknownCluster` — never the answer of another cluster, nor "no such DeviceClass".
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.diagnostics.lint import lint_manifests as lint_documents

from .asker import Asker
from .diagnosis import cluster_facts, lint_mirrored, parse_manifests
from .facts import finding_facts

__all__ = ["lint_cluster", "lint_manifests", "lint_text"]


def lint_text(text: str) -> list[dict[str, Any]]:
    """The findings of the pure rules in YAML manifests (no cluster facts)."""
    return [finding_facts(f) for f in lint_documents(parse_manifests(text), None)]


async def lint_manifests(
    asker: Asker, text: str, cluster: str | None = None
) -> list[dict[str, Any]]:
    """The findings in YAML manifests, against `cluster`'s facts when given."""
    docs = parse_manifests(text)
    facts = None
    if cluster is not None:
        await asker.check_cluster(cluster)
        facts = await cluster_facts(asker.reader, cluster)
    return [finding_facts(f) for f in lint_documents(docs, facts)]


async def lint_cluster(asker: Asker, cluster: str) -> list[dict[str, Any]]:
    """The mistakes in a mirrored cluster's own objects."""
    await asker.check_cluster(cluster)
    return [finding_facts(f) for f in await lint_mirrored(asker.reader, cluster)]
