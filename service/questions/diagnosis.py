"""The diagnostics in the product: one cluster's state read from a state store, its allocation
ledger kept up to date, and the pure diagnostics (`service.diagnostics`) run over them.

GraphQL (`schema.diagnostics`) and the CLI (`service.cli_diagnostics`) call only this module:

    state = await read_cluster(reader, "east")          # every list the diagnostics need
    ledger = ledgers_for(store).ledger(state)            # cached per cluster, synced per call
    diagnosis = await diagnose_claim(reader, "east", "ns", "claim", ledgers=...)
    findings = await lint_mirrored(reader, "east")
    findings = lint_manifests(parse_manifests(text), await cluster_facts(reader, "east", ...))
    found = await find_devices(reader, "device.driver == 'gpu.nvidia.com'", cluster=None)

Promises:

* reads go through the `StateReader` methods only (so a scoped reader's access rules hold and
  Redis works like memory); nothing here writes a store;
* the ledger of a cluster is built once and then brought up to date on each question by
  comparing what it committed with the claims just read (records are immutable values: an
  unchanged claim is the same object in memory, an equal one from Redis) — a claim allocated,
  deallocated or deleted costs one `commit`/`release`; new or changed devices or slices rebuild
  it. Between the read and the answer there is no `await`, so a question sees one state;
* bad input from a client (YAML that does not parse, a selector that does not compile) raises
  `DiagnosisInputError` with a message fit to show; the schema turns it into a GraphQL error.

Errors:

    DiagnosisInputError      the client's input cannot be used
    ├── ManifestError        text that is not YAML (or not mappings)
    └── BadSelector          a findDevices selector that fails to compile
"""

from __future__ import annotations

import asyncio
import operator
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.diagnostics.candidates import Alternative, fit, match
from dra_mirror.service.diagnostics.cel import SelectorError, SelectorEvalError, compile_selector
from dra_mirror.service.diagnostics.cluster import pods_eligible_nodes
from dra_mirror.service.diagnostics.explain import Diagnosis, explain_claim
from dra_mirror.service.diagnostics.ledger import Ledger
from dra_mirror.service.diagnostics.lint import ClusterFacts, Finding
from dra_mirror.service.diagnostics.lint_cluster import lint_cluster
from dra_mirror.service.diagnostics.manifests import ManifestTextError, load_manifests
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    FREE,
    HELD,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    SHARED,
    Allocation,
    ClaimRecord,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    NodeRecord,
    ObjectKey,
    PodRecord,
    SliceRecord,
    TemplateRecord,
    key_of,
)
from dra_mirror.service.stores.protocols import Relation, StateReader


class DiagnosisInputError(Exception):
    """The client's input cannot be used; the message says why."""


class ManifestError(DiagnosisInputError):
    """The text is not YAML, or its documents are not objects."""


class BadSelector(DiagnosisInputError):
    """A selector that fails to compile (the CEL message)."""


class ClaimsByKey(Mapping[ObjectKey, ClaimRecord]):
    """A cluster's claims as the mapping the pure code takes, without building 40,000 key
    tuples per question: a lookup asks the store's index when there is one in this process,
    else a name index built the first time a claim is looked up."""

    def __init__(
        self, records: list[ClaimRecord], lookup: Callable[[ObjectKey], Any] | None = None
    ) -> None:
        self.records = records
        self._lookup = lookup
        self._by_name: dict[str, ClaimRecord] | None = None

    def __getitem__(self, key: ObjectKey) -> ClaimRecord:
        if self._lookup is not None:
            found = self._lookup(ObjectKey(*key))
            if isinstance(found, ClaimRecord):
                return found
            raise KeyError(key)
        if self._by_name is None:
            self._by_name = {_name(c): c for c in self.records}
        return self._by_name[f"{key[2]}/{key[3]}"]

    def __iter__(self) -> Iterator[ObjectKey]:
        return (key_of(c) for c in self.records)

    def __len__(self) -> int:
        return len(self.records)


def _name(record: Any) -> str:
    return f"{record.meta.namespace}/{record.meta.name}"


@dataclass
class ClusterState:
    """What the diagnostics read of one cluster, as plain records."""

    cluster: str
    classes: dict[str, DeviceClassRecord]
    devices: list[DeviceEntry]
    claims: ClaimsByKey
    pods: list[PodRecord]
    nodes: list[NodeRecord]
    slices: list[SliceRecord]
    complete: bool = True  # False: the reader's scope hid some of the cluster's objects


async def read_cluster(reader: StateReader, cluster: str) -> ClusterState:
    """One cluster's classes, devices, claims, pods, nodes and slices (one store call each).

    A store that keeps the cluster's index in this process (the memory store's `index`) is
    read from the index directly, unsorted, with the reader's scope applied per namespace:
    the diagnostics need no order, and sorting 40,000 pods and claims per question cost more
    than the question itself."""
    index = _local_index(reader, cluster)
    lookup = None
    if index is not None:
        # A scope that cannot hide anything is not asked per namespace.
        scope = getattr(reader, "scope", None) if _narrowed(reader) else None
        everything = {kind: list(index.records(kind)) for kind in _KINDS}
        lists = {kind: _scoped(scope, cluster, records) for kind, records in everything.items()}
        allowed = scope is None or scope.allows(cluster, "")
        devices = list(index.devices()) if allowed else []
        complete = allowed and all(lists[k] is everything[k] for k in _KINDS)
        lookup = index.get if complete else None
    else:
        lists = {kind: await reader.list(kind, cluster=cluster) for kind in _KINDS}
        devices = await reader.list_devices(cluster=cluster)
        complete = not _narrowed(reader)
    return ClusterState(
        cluster=cluster,
        classes={c.meta.name: c for c in lists[DEVICE_CLASS] if isinstance(c, DeviceClassRecord)},
        devices=list(devices),
        claims=ClaimsByKey(
            [c for c in lists[RESOURCE_CLAIM] if isinstance(c, ClaimRecord)], lookup
        ),
        pods=[p for p in lists[POD] if isinstance(p, PodRecord)],
        nodes=[n for n in lists[NODE] if isinstance(n, NodeRecord)],
        slices=[s for s in lists[RESOURCE_SLICE] if isinstance(s, SliceRecord)],
        complete=complete,
    )


def _narrowed(reader: Any) -> bool:
    """Whether the reader's scope may hide objects: a scope class (`schema.reader.Scope` has
    the `everything()` constructor) that overrides `allows` may; the base one allows all."""
    scope = getattr(reader, "scope", None)
    if scope is None:
        return False
    kind = type(scope)
    base = next((k for k in kind.__mro__ if "everything" in vars(k)), None)
    return base is None or getattr(kind, "allows", None) is not getattr(base, "allows", None)


_KINDS = (DEVICE_CLASS, RESOURCE_CLAIM, POD, NODE, RESOURCE_SLICE)


def _local_index(reader: Any, cluster: str) -> Any:
    store = getattr(reader, "store", reader)
    index = getattr(store, "index", None)
    return index(cluster) if callable(index) else None


def _scoped(scope: Any, cluster: str, records: list[Any]) -> list[Any]:
    """The records the reader's scope allows (a `ScopedReader` has `.scope`), asking the scope
    once per namespace present, and copying nothing when it allows them all."""
    if scope is None:
        return records
    namespaces = {r.meta.namespace for r in records}
    hidden = {ns for ns in namespaces if not scope.allows(cluster, ns)}
    if not hidden:
        return records
    return [r for r in records if r.meta.namespace not in hidden]


# --- the ledger, per cluster ------------------------------------------------------------------


@dataclass
class _Kept:
    ledger: Ledger
    devices: dict[DeviceKey, DeviceEntry]
    slices: dict[str, SliceRecord]
    # "namespace/name" -> (key, allocation) of every allocated claim committed
    allocations: dict[str, tuple[ObjectKey, Allocation]] = field(default_factory=dict)
    # the claim records last seen, by identity (kept alive here, so ids are not reused)
    seen: dict[int, ClaimRecord] = field(default_factory=dict)
    # the lists last read: a cluster where nothing changed lists the very same records again,
    # in the same order (the index's dicts keep insertion order), which is checked at C speed
    device_list: list[DeviceEntry] = field(default_factory=list)
    slice_list: list[SliceRecord] = field(default_factory=list)
    claim_list: list[ClaimRecord] = field(default_factory=list)


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b


class LedgerCache:
    """One allocation `Ledger` per cluster, kept in step with the state each question reads.

    `builds` and `commits` count what it did (the tests and the benchmark read them)."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}
        self.builds = 0
        self.commits = 0

    def ledger(self, state: ClusterState) -> Ledger:
        if not state.complete:
            # What a narrowed scope sees is not what the cluster holds: never cached, never
            # mixed with the ledger of the whole cluster.
            self.builds += 1
            return Ledger.build(state.devices, state.claims.records, slices=state.slices)
        kept = self._kept.get(state.cluster)
        if kept is None or not self._inventory_unchanged(kept, state):
            kept = self._build(state)
            self._kept[state.cluster] = kept
            return kept.ledger
        records = state.claims.records
        if _same_records(kept.claim_list, records):
            return kept.ledger
        seen, allocations = kept.seen, kept.allocations
        unchanged = 0
        for claim in records:
            if seen.get(id(claim)) is claim:
                unchanged += 1  # the very record synced last time: nothing to do
                continue
            name = _name(claim)
            before = allocations.get(name)
            allocation = claim.allocation
            if allocation is None:
                if before is not None:
                    kept.ledger.release(before[0])
                    del allocations[name]
                    self.commits += 1
            elif before is None or not _same(before[1], allocation):
                key = key_of(claim)
                kept.ledger.commit(key, allocation)
                allocations[name] = (key, allocation)
                self.commits += 1
        if unchanged < len(seen):
            # Some records of last time are gone: replaced (handled above) or deleted.
            present = {_name(c) for c in records}
            for name in [n for n in allocations if n not in present]:
                kept.ledger.release(allocations.pop(name)[0])
                self.commits += 1
        if unchanged != len(records) or unchanged != len(seen):
            kept.seen = {id(c): c for c in records}
        kept.claim_list = records
        return kept.ledger

    def _build(self, state: ClusterState) -> _Kept:
        self.builds += 1
        claims = state.claims.records
        # Ledger.build, with each allocated claim's key made once for the ledger and the list of
        # what was committed.
        ledger = Ledger.build(state.devices, (), slices=state.slices)
        allocations: dict[str, tuple[ObjectKey, Allocation]] = {}
        commit = ledger.commit
        for claim in claims:
            allocation = claim.allocation
            if allocation is not None:
                key = key_of(claim)
                commit(key, allocation)
                allocations[f"{key.namespace}/{key.name}"] = (key, allocation)
        return _Kept(
            ledger=ledger,
            devices={e.key: e for e in state.devices},
            slices={_name(s): s for s in state.slices},
            allocations=allocations,
            seen={id(c): c for c in claims},
            device_list=state.devices,
            slice_list=state.slices,
            claim_list=claims,
        )

    @staticmethod
    def _inventory_unchanged(kept: _Kept, state: ClusterState) -> bool:
        if _same_records(kept.device_list, state.devices) and _same_records(
            kept.slice_list, state.slices
        ):
            return True
        if len(kept.devices) != len(state.devices) or len(kept.slices) != len(state.slices):
            return False
        devices = kept.devices
        for entry in state.devices:
            before = devices.get(entry.key)
            if before is None or not _same(before, entry):
                return False
        slices = kept.slices
        for s in state.slices:
            seen = slices.get(_name(s))
            if seen is None or not (
                seen.pool.generation == s.pool.generation
                and _same(seen.shared_counters, s.shared_counters)
            ):
                return False
        # Equal, in other objects or order (a Redis store decodes new objects each time).
        kept.device_list, kept.slice_list = state.devices, state.slices
        return True


def _same_records(before: list[Any], now: list[Any]) -> bool:
    """Whether two lists hold the very same objects in the same order."""
    return len(before) == len(now) and all(map(operator.is_, before, now))


_LEDGERS: weakref.WeakKeyDictionary[Any, LedgerCache] = weakref.WeakKeyDictionary()


async def prepare(store: StateReader) -> int:
    """Build now, rather than at the first question, what the diagnostics keep per cluster:
    the ledger of every cluster the store holds (read from the whole store, so it is the one
    every reader of that store shares) and the answers of its DeviceClass selectors. The app
    calls it once every cluster has synced; it yields to the event loop between clusters.
    Returns how many ledgers it built."""
    ledgers = ledgers_for(store)
    built = ledgers.builds
    for status in await store.clusters():
        state = await read_cluster(store, status.name)
        ledgers.ledger(state)
        for device_class in state.classes.values():
            for expression in device_class.selectors:
                try:
                    compile_selector(expression).select(state.devices)
                except SelectorError:
                    continue  # explainClaim reports it when asked
        await asyncio.sleep(0)
    return ledgers.builds - built


def ledgers_for(store: Any) -> LedgerCache:
    """The ledger cache of a store object (kept as long as the store lives)."""
    store = getattr(store, "store", store)  # a ScopedReader: the store behind it
    cache = _LEDGERS.get(store)
    if cache is None:
        cache = _LEDGERS[store] = LedgerCache()
    return cache


# --- explainClaim -----------------------------------------------------------------------------


async def diagnose_claim(
    reader: StateReader,
    cluster: str,
    namespace: str,
    name: str,
    *,
    ledgers: LedgerCache | None = None,
    eligible_nodes: Sequence[str] | None = None,
) -> Diagnosis | None:
    """The diagnosis of one claim (None: no such claim in the cluster).

    `eligible_nodes` given by the caller is taken as is; without it, the nodes are those the
    claim's waiting pods (the pods whose spec names it, not yet bound to a node) may use by
    their nodeSelector and required node affinity, or every node when they say nothing (or
    admit no node at all)."""
    [claim] = await reader.get([ObjectKey(cluster, RESOURCE_CLAIM, namespace, name)])
    if not isinstance(claim, ClaimRecord):
        return None
    state = await read_cluster(reader, cluster)
    claim = state.claims.get(key_of(claim)) or claim
    ledger = (ledgers or ledgers_for(reader)).ledger(state)
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


async def lint_mirrored(reader: StateReader, cluster: str) -> list[Finding]:
    """The cluster-wide and per-pod findings over a mirrored cluster."""
    state = await read_cluster(reader, cluster)
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


async def cluster_facts(
    reader: StateReader, cluster: str, *, ledgers: LedgerCache | None = None
) -> ClusterFacts:
    """What a mirrored cluster holds, for the manifest rules that need it: its classes, claims,
    templates' classes, free devices per class and node, and node labels."""
    state = await read_cluster(reader, cluster)
    templates = await reader.list(RESOURCE_CLAIM_TEMPLATE, cluster=cluster)
    ledger = (ledgers or ledgers_for(reader)).ledger(state)
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
        claims={(c.meta.namespace, c.meta.name) for c in state.claims.records},
        template_classes={
            (t.meta.namespace, t.meta.name): _request_classes(t.requests)
            for t in templates
            if isinstance(t, TemplateRecord)
        },
        free_devices=free,
        node_labels={n.meta.name: dict(n.meta.labels) for n in state.nodes},
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


async def find_devices(reader: StateReader, selector: str, *, cluster: str | None) -> DeviceSearch:
    """Evaluate a CEL device selector over every device of one cluster or of all of them."""
    try:
        compiled = compile_selector(selector)
    except SelectorError as error:
        raise BadSelector(f"selector does not compile: {error.message}") from error
    names = [cluster] if cluster is not None else [s.name for s in await reader.clusters()]
    entries: list[DeviceEntry] = []
    for name in names:
        index = _local_index(reader, name)
        scope = getattr(reader, "scope", None)
        if index is None:
            entries.extend(await reader.list_devices(cluster=name))
        elif scope is None or scope.allows(name, ""):
            entries.extend(index.devices())  # unsorted: only the matches are sorted, for paging
    passing, failed = compiled.select(entries)
    return DeviceSearch(selector, passing, failed)


def local_statuses(reader: StateReader, entries: Sequence[DeviceEntry]) -> list[str | None]:
    """Device statuses read straight from an in-process index (None where there is none).

    `inventory.device_status` decides from the holds first: a held device is shared when it
    allows multiple allocations and held otherwise, whatever else it holds, so that rule is
    applied here from the index's holds directly; a device nobody holds that consumes no
    counters is free by the same function's rule (no counters to weigh), and is answered
    without a call; the rest are asked of the index, which weighs the pool's counters. At
    300,000 devices this is several times faster than the store's batched call."""
    out: list[str | None] = []
    answer = out.append
    cluster: str | None = None
    holds_of: Callable[[DeviceKey], Any] | None = None
    weigh: Callable[[DeviceKey], str | None] | None = None
    for entry in entries:
        key = entry.key
        if key.cluster != cluster:
            cluster = key.cluster
            index = _local_index(reader, cluster)
            holds_of = None if index is None else index.links.mapping(_HOLDS).get
            weigh = None if index is None else index.device_status
        if holds_of is None or weigh is None:
            answer(None)
        elif holds_of(key):
            answer(SHARED if entry.device.shareable else HELD)
        elif entry.device.consumes_counters:
            answer(weigh(key))
        else:
            answer(FREE)
    return out


_HOLDS = Relation.DEVICE_ALLOCATIONS.value
