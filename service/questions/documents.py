"""The fixed GraphQL documents the questions send, named, in one list.

A server that runs only registered documents (`DRA_MIRROR_GRAPHQL_REFUSE_UNREGISTERED`)
registers these as its own (`service.http.registered`), so the command line's questions
(`dra-mirror who-holds|free|waiting|idle|lint|explain --cluster`) keep working against it.
Documents built per request are not here and are refused by such a server: `explain` without
a cluster (one aliased field per mirrored cluster) and chat's `explain` (built from the
schema's shape); Slack runs its documents in-process, where the rule does not apply.
"""

from __future__ import annotations

from .chatops import CLUSTERS_AND_CLASSES, FREE, IDLE, PENDING
from .explain import SHAPE, explain_document
from .holdings import DEVICES_NAMED, HELD_ELSEWHERE, HELD_SINCE, WHO_HOLDS, WHO_HOLDS_BRIEF
from .lint import LINT_CLUSTER, LINT_MANIFESTS

CLUSTER_NAMES = "{ clusters { name } }"

QUESTION_DOCUMENTS: tuple[tuple[str, str], ...] = (
    ("Names", CLUSTERS_AND_CLASSES),
    ("ClusterNames", CLUSTER_NAMES),
    ("Free", FREE),
    ("Waiting", PENDING),
    ("Idle", IDLE),
    ("WhoHolds", WHO_HOLDS),
    ("WhoHoldsBrief", WHO_HOLDS_BRIEF),
    ("HeldSince", HELD_SINCE),
    ("HeldElsewhere", HELD_ELSEWHERE),
    ("DevicesNamed", DEVICES_NAMED),
    ("Explain", explain_document(None)),
    ("Shape", SHAPE),
    ("Lint", LINT_CLUSTER),
    ("LintManifests", LINT_MANIFESTS),
)
