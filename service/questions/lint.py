"""`lint`: the common DRA mistakes in manifests, or in a mirrored cluster, as finding rows.

* `lint_text` lints YAML manifests offline, with the pure rules only
  (`service.diagnostics.lint`; rules that need a cluster's facts stay quiet);
* `ask_lint_manifests` asks the graph's `lintManifests`, which checks the same manifests against
  a mirrored cluster's classes, claims and nodes too;
* `ask_lint_cluster` asks the graph's `lint`: the mistakes already in a mirrored cluster.

Every answer is a list of finding rows shaped as the graph gives them (`FINDING_FIELDS`: rule,
severity in capitals, object, path, message), so an offline answer and a server's read alike.

Promises: text that is not YAML raises `ManifestError` (`service.questions.diagnosis`); a
refusal of the graph raises `QuestionError`.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.diagnostics.lint import lint_manifests

from .asking import Ask
from .diagnosis import parse_manifests

__all__ = ["FINDING_FIELDS", "ask_lint_cluster", "ask_lint_manifests", "lint_text"]

FINDING_FIELDS = "rule severity object path message"

LINT_CLUSTER = f"query Lint($cluster: String!) {{ lint(cluster: $cluster) {{ {FINDING_FIELDS} }} }}"
LINT_MANIFESTS = (
    "query Lint($yaml: String!, $cluster: String) {"
    f" lintManifests(yaml: $yaml, cluster: $cluster) {{ {FINDING_FIELDS} }} }}"
)


def lint_text(text: str) -> list[dict[str, Any]]:
    """The findings of the pure rules in YAML manifests (no cluster facts)."""
    return [
        {
            "rule": f.rule,
            "severity": f.severity.upper(),
            "object": f.object,
            "path": f.path,
            "message": f.message,
        }
        for f in lint_manifests(parse_manifests(text), None)
    ]


async def ask_lint_manifests(ask: Ask, text: str, cluster: str | None) -> list[dict[str, Any]]:
    """The server's findings in YAML manifests, against `cluster`'s facts when given."""
    data = await ask(LINT_MANIFESTS, {"yaml": text, "cluster": cluster})
    return list(data["lintManifests"])


async def ask_lint_cluster(ask: Ask, cluster: str) -> list[dict[str, Any]]:
    """The mistakes in a mirrored cluster's own objects."""
    data = await ask(LINT_CLUSTER, {"cluster": cluster})
    return list(data["lint"])
