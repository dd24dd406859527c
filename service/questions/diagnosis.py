"""The diagnostics in the product: one cluster's state read from a state store, its allocation
ledger kept up to date, and the pure diagnostics (`service.diagnostics`) run over them.

GraphQL (`schema.diagnostics`) and the CLI (`service.cli.diagnostics`) call only this module:

    diagnosis = await diagnose_claim(reader, "east", "ns", "claim")
    findings = await lint_mirrored(reader, "east")
    findings = lint_manifests(parse_manifests(text), await cluster_facts(reader, "east"))
    found = await find_devices(reader, "device.driver == 'gpu.nvidia.com'", cluster=None)

`reader` is a `ScopedState` (a request's `ScopedReader`: its scope holds for every name it
shows). What a cluster holds is derived from the whole cluster (`cluster_state.read_whole_cluster`:
a device held by a claim the asker may not see is held, never free), its ledger from
`ledgers.ledger_of` (the model's holds: the cluster's index when it is in this process); the
answer names only what the scope shows (explainClaim counts hidden holders, `holdersHidden`).
`lint_mirrored` reports on the objects the scope shows.

Promises:

* reads go through the `StateReader` methods only (so a scoped reader's access rules hold and
  Redis works like memory); nothing here writes a store;
* between the read and the answer there is no `await`, so a question sees one state;
* bad input from a client (YAML that does not parse, a selector that does not compile) raises
  `DiagnosisInputError` with a message fit to show; the schema turns it into a GraphQL error.

Errors:

    DiagnosisInputError      the client's input cannot be used
    ├── ManifestError        text that is not YAML (or not mappings)
    └── BadSelector          a findDevices selector that fails to compile, or goes over
                             CEL's evaluation budget
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dra_mirror.service.diagnostics.candidates import Alternative, fit, match
from dra_mirror.service.diagnostics.cel import SelectorError, SelectorEvalError, compile_selector
from dra_mirror.service.diagnostics.cluster import advertised, pods_eligible_nodes
from dra_mirror.service.diagnostics.explain import Diagnosis, explain_claim
from dra_mirror.service.diagnostics.lint import ClusterFacts, Finding
from dra_mirror.service.diagnostics.lint_cluster import lint_cluster
from dra_mirror.service.diagnostics.manifests import ManifestTextError, load_manifests
from dra_mirror.service.model.records import (
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    ClaimRecord,
    DeviceEntry,
    ObjectKey,
    PodRecord,
    TemplateRecord,
    key_of,
)
from dra_mirror.service.questions.asking import BadQuestion
from dra_mirror.service.questions.cluster_state import (  # noqa: F401  (re-exported)
    ClusterState,
    ScopedState,
    Visibility,
    local_statuses,
    read_cluster,
    read_whole_cluster,
)
from dra_mirror.service.questions.ledgers import ledger_of, prepare  # noqa: F401
from dra_mirror.service.stores.protocols import DEVICES, Selection


class DiagnosisInputError(BadQuestion):
    """The client's input cannot be used; the message says why."""


class ManifestError(DiagnosisInputError):
    """The text is not YAML, or its documents are not objects."""


class BadSelector(DiagnosisInputError):
    """A selector that fails to compile (the CEL message)."""


# --- explainClaim -----------------------------------------------------------------------------


async def diagnose_claim(
    reader: ScopedState,
    cluster: str,
    namespace: str,
    name: str,
    *,
    eligible_nodes: Sequence[str] | None = None,
) -> Diagnosis | None:
    """The diagnosis of one claim (None: no such claim in the cluster).

    `eligible_nodes` given by the caller is taken as is; without it, the nodes are those the
    claim's waiting pods (the pods whose spec names it, not yet bound to a node) may use by
    their nodeSelector and required node affinity, or every node when they say nothing (or
    admit no node at all)."""
    [claim] = await reader.get([ObjectKey(cluster, RESOURCE_CLAIM, namespace, name)])
    if not isinstance(claim, ClaimRecord):
        return None  # no such claim, or not one the scope shows
    state = await read_whole_cluster(reader, cluster)
    if state is None:
        return None
    claim = state.claims.get(key_of(claim)) or claim
    ledger = ledger_of(reader.whole, state)
    if eligible_nodes is None and claim.allocation is None:
        # No node at all (a selector naming a missing or cordoned node): every node is asked
        # instead, so the answer says devices are free but the pod's nodeSelector/affinity
        # rules them out, rather than that no device exists.
        eligible_nodes = (
            pods_eligible_nodes(_waiting_referrers(claim, state.pods), state.nodes) or None
        )
    diagnosis = explain_claim(
        claim,
        classes=state.classes,
        devices=state.devices,
        ledger=ledger,
        claims=state.claims,
        pods=state.pods,
        nodes=state.nodes,
        eligible_nodes=eligible_nodes,
        visible=lambda ns: reader.scope.allows(cluster, ns),
    )
    if diagnosis.holders:
        since: list[str | None] = await reader.idle_since([h.claim for h in diagnosis.holders])
        for holder, when in zip(diagnosis.holders, since, strict=True):
            holder.idle_since = when
    return diagnosis


def _waiting_referrers(claim: ClaimRecord, pods: Iterable[PodRecord]) -> list[PodRecord]:
    """The pods of the claim's namespace whose spec names it (a resolved pod claim, or the
    extended-resource claim of their status) and that are not yet bound to a node: the ones
    its allocation must suit. The pods were read with the cluster's other lists (a pod's
    CLAIM_REFERRERS entry is exactly such a spec reference)."""
    namespace, name = claim.meta.namespace, claim.meta.name
    return [
        p
        for p in pods
        if p.meta.namespace == namespace
        and p.node_name is None
        and p.phase == "Pending"
        and (p.extended_claim_name == name or any(c.claim_name == name for c in p.claims))
    ]


# --- lint -------------------------------------------------------------------------------------


async def lint_mirrored(reader: ScopedState, cluster: str) -> list[Finding]:
    """The cluster-wide and per-pod findings over a mirrored cluster."""
    state = await read_cluster(reader, cluster, scope=reader.scope)
    return lint_cluster(
        classes=state.classes,
        devices=state.devices,
        claims=state.claims,
        pods=state.pods,
        nodes=state.nodes,
    )


def parse_manifests(text: str) -> list[Any]:
    """The YAML documents of `text` (a multi-document stream, or a `kind: List`)."""
    try:
        docs = load_manifests(text)  # bounded: depth, and values with aliases expanded
    except ManifestTextError as error:
        raise ManifestError(str(error)) from None
    out: list[Any] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            out.extend(doc.get("items") or [])
        else:
            out.append(doc)
    return out


async def cluster_facts(reader: ScopedState, cluster: str) -> ClusterFacts:
    """What a mirrored cluster holds, for the manifest rules that need it: its classes, claims,
    templates' classes, free devices per class and node, and node labels. Free devices are the
    whole cluster's (held by a hidden claim is held); claims and templates are those the
    reader's scope shows."""
    state = await read_whole_cluster(reader, cluster)
    if state is None:  # a cluster the scope does not name: nothing of it exists for the asker
        return ClusterFacts(classes=set(), claims=set())
    templates = await reader.list(RESOURCE_CLAIM_TEMPLATE, cluster=cluster)
    ledger = ledger_of(reader.whole, state)
    free: dict[str, dict[str, int]] = {}
    for name in state.classes:
        probe = Alternative(name, name, name, (), "ExactCount", 1, {}, ())
        counts: dict[str, int] = {}
        for entry in match(probe, state.classes, state.devices).devices:
            if entry.node is not None and fit(entry, probe, ledger)[0] is None:
                counts[entry.node] = counts.get(entry.node, 0) + 1
        free[name] = counts
    return ClusterFacts(
        classes=set(state.classes),
        claims={
            (c.meta.namespace, c.meta.name)
            for c in state.claims.records
            if reader.scope.allows(cluster, c.meta.namespace)
        },
        template_classes={
            (t.meta.namespace, t.meta.name): _request_classes(t.requests)
            for t in templates
            if isinstance(t, TemplateRecord)
        },
        free_devices=free,
        node_labels={n.meta.name: dict(n.meta.labels) for n in state.nodes},
        advertised=advertised(state.nodes),
    )


def _request_classes(requests: Iterable[Any]) -> tuple[str, ...]:
    # As `lint` reads a local template: the class of each request and of each alternative.
    out: list[str] = []
    for r in requests:
        if r.device_class_name:
            out.append(r.device_class_name)
        out.extend(s.device_class_name for s in r.first_available if s.device_class_name)
    return tuple(out)


# --- findDevices ------------------------------------------------------------------------------


@dataclass
class DeviceSearch:
    """The devices a selector accepts, and those on which it failed to evaluate."""

    selector: str
    devices: list[DeviceEntry]
    failed: list[tuple[DeviceEntry, SelectorEvalError]]


SEARCH_PAGE = 1000  # devices read at a time from a store outside the process


async def find_devices(
    reader: ScopedState, selector: str, *, cluster: str | None, status: str | None = None
) -> DeviceSearch:
    """Evaluate a CEL device selector over every device of one cluster or of all of them.
    `status` (free | held | shared | blocked): the caller keeps only devices of that status,
    so a store outside this process (Redis) is asked for just those — from the writer's
    status filter, `SEARCH_PAGE` at a time — instead of every device of the cluster."""
    try:
        compiled = compile_selector(selector)
    except SelectorError as error:
        raise BadSelector(f"selector does not compile: {error.message}") from error
    names = [cluster] if cluster is not None else [s.name for s in await reader.clusters()]
    entries: list[DeviceEntry] = []
    for name in names:
        index = reader.index(name)
        if index is None and status is not None:
            entries.extend(await _devices_of_status(reader, name, status))
        elif index is None:
            entries.extend(await reader.list_devices(cluster=name))
        elif reader.scope.allows(name, ""):
            entries.extend(index.devices())  # unsorted: only the matches are sorted, for paging
    try:  # a client's selector: over CEL's budget once is refused, not run on every device
        passing, failed = compiled.select(entries, stop_over_budget=True)
    except SelectorError as error:
        raise BadSelector(error.message) from error
    return DeviceSearch(selector, passing, failed)


async def _devices_of_status(reader: ScopedState, cluster: str, status: str) -> list[DeviceEntry]:
    """The published devices of `cluster` with `status`, page by page in key order."""
    found: list[DeviceEntry] = []
    after: tuple[str, ...] | None = None
    selection = Selection(DEVICES, cluster, status=status)
    while True:
        page = await reader.select([selection], after=after, first=SEARCH_PAGE)
        found.extend(page.items)
        if not page.has_next or not page.items:
            return found
        after = tuple(page.items[-1].key)
