"""`explain`: why a claim is Pending, or whether an allocated one is healthy, from the store.

`explain(asker, namespace, name, cluster=None, nodes=None)` diagnoses the claim
`namespace/name` in `cluster`, or in every cluster the asker sees that holds a claim of that
name (one diagnosis each, by cluster): `service.questions.diagnosis.diagnose_claim`, the same
pure diagnostics as the graph's `explainClaim`, given as the graph's facts
(`service.questions.facts.diagnosis_facts`). `nodes`: the nodes its pods may use, when the
asker knows better than their nodeSelector and required node affinity.

An unknown cluster raises `UnknownCluster`; a claim that is nowhere (or outside the asker's
scope) gives an empty list. `split_target` reads chat's `namespace/claim [cluster]` and
`cluster/namespace/claim`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dra_mirror.service.model.records import RESOURCE_CLAIM, ObjectKey

from .asker import Asker
from .asking import BadQuestion, UnknownCluster
from .diagnosis import diagnose_claim
from .facts import diagnosis_facts

__all__ = ["explain", "split_target"]


async def explain(
    asker: Asker,
    namespace: str,
    name: str,
    cluster: str | None = None,
    nodes: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The diagnoses of claim `namespace/name`, one per cluster holding it."""
    clusters = await asker.check_cluster(cluster)
    reader = asker.reader
    found = await reader.get([ObjectKey(c, RESOURCE_CLAIM, namespace, name) for c in clusters])
    out = []
    for where, claim in zip(clusters, found, strict=True):
        if claim is None:
            continue
        diagnosis = await diagnose_claim(
            reader, where, namespace, name, eligible_nodes=list(nodes) if nodes else None
        )
        if diagnosis is not None:
            out.append(diagnosis_facts(diagnosis))
    return out


def split_target(
    words: list[str], clusters: list[str], what: str = "claim"
) -> tuple[str | None, str, str]:
    """(cluster, namespace, name) from `namespace/name [cluster]` or `cluster/namespace/name`
    (`what` names the kind in the errors: claim, pod)."""
    if not words:
        raise BadQuestion(f"say which {what}: <namespace/{what}> [cluster]")
    parts = words[0].split("/")
    cluster = words[1] if len(words) > 1 else None
    if len(parts) == 3:
        cluster = parts[0]
        parts = parts[1:]
    if len(parts) != 2 or not all(parts):
        raise BadQuestion(f"{words[0]!r}: give the {what} as namespace/{what}")
    if cluster is not None and cluster not in clusters:
        raise UnknownCluster(cluster, clusters)
    return cluster, parts[0], parts[1]
