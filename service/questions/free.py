"""Free devices: which devices could be given to a claim now, of a class, matching a selector.

`free_devices(asker, class_name=None, cluster=None, selector=None, limit=50)` answers from the
store, through the asker's scope, in devices:

* a device is free when the model derived it so (`service.model.inventory`: no claim takes it,
  and, for a partition, its GPU's shared counters still fit it) — held, shared, blocked and
  unpublished devices are not free;
* a partition and the whole device it is part of are never counted twice: partitions of a free
  whole device (the device consuming every counter of their counter set) are listed under it
  (`partitions`), not counted; partitions whose whole device is not free (or not asked for: a
  class of partitions only) are counted each — free partitions of one GPU may still exclude
  each other (they share its counters);
* `class_name` is each cluster's own DeviceClass (its CEL selectors; a selector that fails to
  evaluate on a device leaves the device out, as the graph's `DeviceClass.devices` does);
  a class no cluster in question has is `BadQuestion`;
* `selector` is a CEL device selector: one that does not compile is `BadQuestion`; one that
  fails to evaluate on every device it was asked of is `BadQuestion` too (never "0 free"),
  and on some of them is counted in the answer (`evaluation_error_count`, the first messages).

Rows are sorted by device key and cut at `limit`; `total` counts them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dra_mirror.service.diagnostics.cel import SelectorError, compile_selector
from dra_mirror.service.model import taint_rules
from dra_mirror.service.model.physical import entry_product
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    FREE,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
)

from .asker import Asker
from .asking import BadQuestion
from .cluster_state import local_statuses

__all__ = ["DeviceRow", "Free", "free_devices", "whole_devices"]

MAX_MESSAGES = 5


@dataclass
class DeviceRow:
    cluster: str
    node: str | None
    device: str
    driver: str
    pool: str
    uuid: str | None
    model: str | None
    # Its NoSchedule/NoExecute taints (`key=value:Effect`, a rule's with its name): free, but
    # only for claims that tolerate them.
    taints: list[str] = field(default_factory=list)
    # Free partitions of this whole device (names): the same hardware, not counted again.
    partitions: list[str] = field(default_factory=list)


@dataclass
class Free:
    class_name: str | None
    cluster: str | None
    total: int  # free devices, partitions of a free whole device not counted
    devices: list[DeviceRow]  # the first `limit` of them
    selector: str | None = None
    partitions: int = 0  # free partitions listed under their free whole device
    evaluation_error_count: int = 0  # devices on which `selector` failed to evaluate
    evaluation_errors: list[str] = field(default_factory=list)  # the first few, with the device


def whole_devices(entries: Iterable[DeviceEntry]) -> dict[DeviceKey, DeviceKey]:
    """Partition -> the whole device it is part of, among `entries` (every device of a pool:
    not only free ones, or a large partition would pass for the whole): devices consuming
    counters of one counter set are parts of one device; the one consuming every counter any
    of them consumes is the whole device (none: they are partitions only)."""
    groups: dict[tuple[str, str, str, str], list[tuple[DeviceEntry, frozenset[str]]]] = {}
    for entry in entries:
        for use in entry.device.consumes_counters:
            key = (entry.key.cluster, entry.key.driver, entry.key.pool, use.counter_set)
            groups.setdefault(key, []).append((entry, frozenset(use.counters)))
    parent: dict[DeviceKey, DeviceKey] = {}
    for members in groups.values():
        every = frozenset().union(*(names for _, names in members))
        wholes = sorted(e.key for e, names in members if names >= every)
        if not wholes or len(members) < 2:
            continue
        whole = wholes[0]
        for entry, _ in members:
            if entry.key != whole:
                parent.setdefault(entry.key, whole)
    return parent


def _taint(t: dict[str, object], rule: str | None) -> str:
    value = f"={t.get('value')}" if t.get("value") else ""
    by = f" (rule {rule})" if rule else ""
    return f"{t.get('key') or ''}{value}:{t.get('effect') or ''}{by}"


def taint_words(entry: DeviceEntry) -> list[str]:
    """The NoSchedule/NoExecute taints of a device, as `key=value:Effect (rule name)`."""
    unavailable = taint_rules.UNAVAILABLE_EFFECTS
    return [_taint(t, None) for t in entry.device.taints if t.get("effect") in unavailable] + [
        _taint(t.taint, t.rule) for t in entry.rule_taints if t.taint.get("effect") in unavailable
    ]


async def free_devices(
    asker: Asker,
    class_name: str | None = None,
    cluster: str | None = None,
    *,
    selector: str | None = None,
    limit: int = 50,
) -> Free:
    """The free devices (of a class, matching a selector) of `cluster` or every cluster."""
    clusters = await asker.check_cluster(cluster)
    compiled = None
    if selector is not None:
        try:
            compiled = compile_selector(selector)
        except SelectorError as error:
            raise BadQuestion(f"selector does not compile: {error.message}") from error
    reader = asker.reader
    if class_name is not None:
        found = await reader.get([ObjectKey(c, DEVICE_CLASS, "", class_name) for c in clusters])
        classes = {r.meta.cluster: r for r in found if isinstance(r, DeviceClassRecord)}
        if not classes:
            where = f"cluster {cluster}" if cluster else "any cluster you may see"
            names: set[str] = set()
            for name in clusters:
                listed = await reader.list(DEVICE_CLASS, cluster=name)
                names.update(r.meta.name for r in listed)
            there = ", ".join(sorted(names)) or "none"
            raise BadQuestion(f"no DeviceClass {class_name} in {where}; there are: {there}")
        clusters = [c for c in clusters if c in classes]
    candidates: list[DeviceEntry] = []
    parent: dict[DeviceKey, DeviceKey] = {}
    for name in clusters:
        entries = await _devices(asker, name)
        parent.update(whole_devices(entries))  # over every device: a whole one may be left out
        if class_name is not None:
            entries = _of_class(classes[name], entries)
        candidates.extend(entries)
    answer = Free(class_name=class_name, cluster=cluster, total=0, devices=[], selector=selector)
    if compiled is not None:
        asked = len(candidates)
        candidates, failed = compiled.select(candidates)
        answer.evaluation_error_count = len(failed)
        answer.evaluation_errors = [
            f"{e.key.driver}/{e.key.pool}/{e.key.device}: {error.message}"
            for e, error in failed[:MAX_MESSAGES]
        ]
        if failed and not candidates and len(failed) == asked:
            raise BadQuestion(
                f"the selector failed to evaluate on every device asked ({len(failed)}): "
                + failed[0][1].message
            )
    free = sorted(await _free(asker, candidates), key=lambda e: e.key)
    free_keys = {e.key for e in free}
    rows: dict[DeviceKey, DeviceRow] = {}
    for entry in free:
        if parent.get(entry.key) not in free_keys:
            rows[entry.key] = _row(entry)
    for entry in free:
        whole = parent.get(entry.key)
        if whole in free_keys:
            rows[whole].partitions.append(entry.key.device)
            answer.partitions += 1
    answer.total = len(rows)
    answer.devices = list(rows.values())[:limit]
    return answer


async def _devices(asker: Asker, cluster: str) -> Sequence[DeviceEntry]:
    reader = asker.reader
    index = reader.index(cluster)
    if index is None:
        return await reader.list_devices(cluster=cluster)
    return list(index.devices()) if reader.scope.allows(cluster, "") else []


def _of_class(device_class: DeviceClassRecord, entries: Sequence[DeviceEntry]) -> list[DeviceEntry]:
    """The entries every selector of the class accepts (a failure to evaluate: not accepted)."""
    kept = list(entries)
    for expression in device_class.selectors:
        try:
            kept, _failed = compile_selector(expression).select(kept)
        except SelectorError:
            return []
    return kept


async def _free(asker: Asker, entries: list[DeviceEntry]) -> list[DeviceEntry]:
    """The entries the model derived free (an in-process index answers in place)."""
    known = local_statuses(asker.reader, entries)
    missing = [i for i, s in enumerate(known) if s is None]
    if missing:
        found = await asker.reader.device_status([entries[i].key for i in missing])
        for i, status in zip(missing, found, strict=True):
            known[i] = status
    return [e for e, s in zip(entries, known, strict=True) if s == FREE]


def _row(entry: DeviceEntry) -> DeviceRow:
    key = entry.key
    return DeviceRow(
        cluster=key.cluster, node=entry.node, device=key.device, driver=key.driver,
        pool=key.pool, uuid=entry.device.uuid, model=entry_product(entry),
        taints=taint_words(entry),
    )  # fmt: skip
