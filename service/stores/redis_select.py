"""Lists, filters and counts answered from the writer's indexes (redis_index.py): the page read,
never the kind.

`select(reader, selections, after=..., first=...)` is `RedisReader.select`. One pipeline reads
each cluster's layout marker and fence (`layout` = "2:<fence token>": the indexes are whole)
and runs one read-only script per lexical range (the whole cluster, or each namespace the
selection allows) that counts the selection and returns the page's members; then one
pipelined HGET reads the page's records. Two round trips (one for a count), whatever the
cluster's size; a node's selection reads the node's reverse map first.

The scripts and what each reads: `redis_plans.py`.

Devices held and published by no slice (few; the index keeps statuses of valid devices only)
are filtered here by the model's rules (`selecting.status_of`, `class_members.class_accepts`)
when a status or class filter asks for them; their set (`x:unpub`) serves the rest.

A cluster whose marker does not match (written by an older writer, or not rebuilt yet) is
answered as older versions did, from whole reads of the kinds it needs (`redis_fallback.py`):
correct, at the old cost, until a writer of this version rebuilds the indexes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from dra_mirror.service.model.class_members import class_accepts
from dra_mirror.service.model.inventory import device_status
from dra_mirror.service.model.records import (
    DEVICE_CLASS,
    POD,
    DeviceClassRecord,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
)
from dra_mirror.service.model.relations import DEVICE_ALLOCATIONS, NODE_DEVICES, NODE_PODS
from dra_mirror.service.stores import redis_index as ix
from dra_mirror.service.stores.protocols import DEVICES, Page, Selection
from dra_mirror.service.stores.redis_keys import (
    LAYOUT,
    device_field,
    device_member,
    entry_decoder,
    member_parts,
    object_member,
    record_decoder,
)
from dra_mirror.service.stores.redis_plans import NAMESPACES, Plan, cursor_member, plans

if TYPE_CHECKING:
    from dra_mirror.service.stores.redis_reads import RedisReader


async def namespaces(reader: RedisReader, kind: str, cluster: str) -> list[str]:
    keys = reader.keys(cluster)
    if (await valid_layouts(reader, [cluster]))[cluster]:
        found = await reader._call(reader.redis.eval(NAMESPACES, 1, keys.index(ix.ordered(kind))))
        return [bytes(n).decode() for n in found]
    fields = cast(list[bytes], await reader._call(reader.redis.hkeys(keys.objects(kind))))
    return sorted({f.decode().partition("/")[0] for f in fields})


async def select(
    reader: RedisReader,
    selections: Sequence[Selection],
    *,
    after: tuple[str, ...] | None,
    first: int,
) -> Page:
    from dra_mirror.service.stores import redis_fallback

    if not selections:
        return Page(items=[], total=0)
    parts: list[tuple[Selection, list[Any]]] = [(s, []) for s in selections]
    totals = [0] * len(selections)
    befores = [0] * len(selections)
    node_keys = await _node_candidates(reader, selections)
    calls: list[tuple[int, Plan]] = []
    for position, s in enumerate(selections):
        passed, member = cursor_member(after, s.cluster)
        if s.kind == DEVICES and s.published is False:
            continue
        candidates = node_keys.get(s.cluster)
        for plan in plans(reader.keys(s.cluster), s, member, passed, 0 if passed else first,
                          candidates):  # fmt: skip
            calls.append((position, plan))
    # One round trip: every cluster's layout marker and fence, and the scripts (whose answers
    # count only where the marker says the indexes are whole).
    async with reader.redis.pipeline(transaction=False) as pipe:
        for s in selections:
            keys = reader.keys(s.cluster)
            pipe.get(keys.layout)
            pipe.get(keys.fence)
        for _, plan in calls:
            pipe.eval(reader.select_script, len(plan.keys), *plan.keys, *plan.args)
        answers = await reader._call(pipe.execute())
    whole = [
        answers[2 * i] == LAYOUT + b":" + (answers[2 * i + 1] or b"")
        for i in range(len(selections))
    ]
    for (position, _), answer in zip(calls, answers[2 * len(selections) :], strict=True):
        if whole[position]:
            totals[position] += int(answer[0])
            befores[position] += int(answer[1])
            parts[position][1].extend(answer[2:])
    for position, s in enumerate(selections):
        limit = 0 if cursor_member(after, s.cluster)[0] else first
        if not whole[position]:
            found = await redis_fallback.part(reader, s)
        elif s.kind == DEVICES and s.published is not True:
            found = await _unpublished(reader, s, node_keys.get(s.cluster))
        else:
            continue
        _count_items(found, after, s, limit, parts, totals, befores, position)
    total = sum(totals)
    before = sum(befores)
    chosen = await _page(reader, parts, first)
    return Page(items=chosen, total=total, has_previous=before > 0, has_next=total - before > first)


def _count_items(
    found: list[Any], after: tuple[str, ...] | None, s: Selection, limit: int,
    parts: list[tuple[Selection, list[Any]]], totals: list[int], befores: list[int],
    position: int,
) -> None:  # fmt: skip
    """A part answered in Python (its items, in key order): counted as the script counts."""
    from dra_mirror.service.stores.selecting import entry_key, record_key

    key = entry_key if s.kind == DEVICES else record_key
    later = [item for item in found if after is None or key(item) > after]
    totals[position] += len(found)
    befores[position] += len(found) - len(later)
    parts[position][1].extend(later[:limit])


async def _page(
    reader: RedisReader, parts: list[tuple[Selection, list[Any]]], first: int
) -> list[Any]:
    """The first `first` items of the parts in order: members read (one pipeline), items as
    they are."""
    wanted: list[tuple[Selection, Any]] = []
    for s, found in parts:
        ordered = sorted(found, key=lambda m: m if isinstance(m, bytes) else _member_of(m))
        for item in ordered:
            if len(wanted) >= first:
                break
            wanted.append((s, item))
    members = [(s, m) for s, m in wanted if isinstance(m, bytes)]
    if not members:
        return [item for _, item in wanted]
    async with reader.redis.pipeline(transaction=False) as pipe:
        for s, member in members:
            keys = reader.keys(s.cluster)
            if s.kind == DEVICES:
                pipe.hget(keys.devices, device_field(DeviceKey(s.cluster, *member_parts(member))))
            else:
                namespace, name = member_parts(member)
                pipe.hget(keys.objects(s.kind), f"{namespace}/{name}")
        found = await reader._call(pipe.execute())
    decoded = iter(found)
    out: list[Any] = []
    for s, item in wanted:
        if not isinstance(item, bytes):
            out.append(item)
            continue
        raw = next(decoded)
        if raw is None:  # gone between the two reads: the next read shows it gone
            continue
        out.append(entry_decoder.decode(raw) if s.kind == DEVICES else record_decoder.decode(raw))
    return out


def _member_of(item: Any) -> bytes:
    if isinstance(item, DeviceEntry):
        return device_member(item.key)
    return object_member(item.meta.namespace, item.meta.name)


async def valid_layouts(reader: RedisReader, clusters: list[str]) -> dict[str, bool]:
    """Whether each cluster's indexes are whole: its marker names its current fence."""
    async with reader.redis.pipeline(transaction=False) as pipe:
        for cluster in clusters:
            keys = reader.keys(cluster)
            pipe.get(keys.layout)
            pipe.get(keys.fence)
        found = await reader._call(pipe.execute())
    out = {}
    for position, cluster in enumerate(clusters):
        layout, fence = found[2 * position], found[2 * position + 1]
        out[cluster] = layout == LAYOUT + b":" + (fence or b"")
    return out


async def _node_candidates(
    reader: RedisReader, selections: Sequence[Selection]
) -> dict[str, list[bytes]]:
    """The members of each node selection's node (pods or devices, in order)."""
    asked = [s for s in selections if s.node is not None and s.kind in (POD, DEVICES)]
    if not asked:
        return {}
    relations = [NODE_PODS if s.kind == POD else NODE_DEVICES for s in asked]
    out: dict[str, list[bytes]] = {}
    for s, relation in zip(asked, relations, strict=True):
        [found] = await reader.lookup(relation, [(s.cluster, s.node)])
        if s.kind == POD:
            members = [
                object_member(k.namespace, k.name)
                for k in found
                if s.namespaces is None or k.namespace in s.namespaces
            ]
        else:
            members = [device_member(k) for k in found if s.driver is None or k.driver == s.driver]
        out[s.cluster] = sorted(members)
    return out


async def _unpublished(
    reader: RedisReader, s: Selection, candidates: list[bytes] | None
) -> list[DeviceEntry]:
    """The devices held and published by no slice that the selection takes, in key order:
    read whole (they are few) and filtered by the model's rules."""
    entries = [
        e
        for e in await reader.list_devices(cluster=s.cluster, driver=s.driver, published=False)
        if candidates is None or device_member(e.key) in candidates
    ]
    if s.class_name is not None and entries:
        [found] = await reader.get([ObjectKey(s.cluster, DEVICE_CLASS, "", s.class_name)])
        if not isinstance(found, DeviceClassRecord):
            return []
        entries = [e for e in entries if class_accepts(found, e, reader.matcher)]
    if s.status is not None and entries:
        holds = await reader.lookup(DEVICE_ALLOCATIONS, [e.key for e in entries])
        entries = [
            e for e, h in zip(entries, holds, strict=True) if device_status(e, h) == s.status
        ]
    return entries
