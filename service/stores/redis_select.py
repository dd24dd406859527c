"""Lists, filters and counts answered from the writer's indexes (redis_index.py): the page read,
never the kind.

`select(reader, selections, after=..., first=...)` is `RedisReader.select`. One pipeline reads
each cluster's layout marker and fence (`layout` = "2:<fence token>": the indexes are whole)
and runs one read-only script per lexical range (the whole cluster, or each namespace the
selection allows) that counts the selection and returns the page's members; then one
pipelined HGET reads the page's records. Two round trips (one for a count), whatever the
cluster's size; a node's selection reads the node's reverse map first.

The script (`SELECT`, flagged no-writes: it may run on a replica and is never replicated):

* one set to read — the kind's base set, or a single filter set (a subset of it) — counts with
  ZLEXCOUNT and pages with ZRANGEBYLEX: O(log n + page);
* one negative filter (claims not idle, pods using no devices): counts by difference, pages by
  walking the base set from the cursor and dropping the filter's members (ZMSCORE) until the
  page is full;
* several filters: walks the smallest set of the range, 512 members at a time, testing each
  chunk against the other sets with ZMSCORE: the intersection is made on the server, in
  O(smallest set), and the count with it. With no range and no cursor a count alone is
  ZINTERCARD;
* a node's objects (`node`): the node's reverse map gives the candidates, tested the same way.

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
    RESOURCE_CLAIM,
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
    Keys,
    device_field,
    device_member,
    entry_decoder,
    member_parts,
    object_member,
    record_decoder,
    sort_member,
)

if TYPE_CHECKING:
    from dra_mirror.service.stores.redis_reads import RedisReader

# KEYS: the base set, the positive filter sets, the negative ones.
# ARGV: positives, negatives, lo, start, upto, hi, limit, candidates before, candidates after,
#       then the candidates (members, in order) when a node's reverse map gave them.
# Returns {total, before the cursor, the page's members...}. See the module docstring.
SELECT = """#!lua flags=no-writes
local np, nn = tonumber(ARGV[1]), tonumber(ARGV[2])
local lo, start, upto, hi = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local limit = tonumber(ARGV[7])
local cb, ca = tonumber(ARGV[8]), tonumber(ARGV[9])
local CHUNK = 512
local tests = {}
local function keep(members)
  local ok = {}
  for i = 1, #members do ok[i] = true end
  for t = 1, #tests do
    local scores = redis.call('ZMSCORE', tests[t][1], unpack(members))
    local want = tests[t][2]
    for i = 1, #members do
      if ok[i] and ((scores[i] ~= false) ~= want) then ok[i] = false end
    end
  end
  local out = {}
  for i = 1, #members do if ok[i] then out[#out + 1] = members[i] end end
  return out
end
local function walk(key, min, max, page, full)
  local count = 0
  if min == '' or max == '' then return 0 end
  while true do
    local chunk = redis.call('ZRANGEBYLEX', key, min, max, 'LIMIT', 0, CHUNK)
    if #chunk == 0 then break end
    local passed = keep(chunk)
    count = count + #passed
    if page then
      for i = 1, #passed do
        if #page < limit then page[#page + 1] = passed[i] end
      end
      if full and #page >= limit then break end
    end
    if #chunk < CHUNK then break end
    min = '(' .. chunk[#chunk]
  end
  return count
end
local function given(first, n, page)
  local list = {}
  for i = first, first + n - 1, CHUNK do
    local chunk = {}
    for j = i, math.min(i + CHUNK - 1, first + n - 1) do chunk[#chunk + 1] = ARGV[j] end
    local passed = keep(chunk)
    for k = 1, #passed do list[#list + 1] = passed[k] end
  end
  if page then
    for i = 1, #list do if #page < limit then page[#page + 1] = list[i] end end
  end
  return #list
end
local page = {}
if cb >= 0 then
  tests[1] = {KEYS[1], true}
  for i = 2, 1 + np do tests[#tests + 1] = {KEYS[i], true} end
  for i = 2 + np, 1 + np + nn do tests[#tests + 1] = {KEYS[i], false} end
  local before = given(10, cb, nil)
  local after = given(10 + cb, ca, page)
  local out = {before + after, before}
  for i = 1, #page do out[#out + 1] = page[i] end
  return out
end
local function lexcount(key, min, max)
  if min == '' or max == '' then return 0 end
  return redis.call('ZLEXCOUNT', key, min, max)
end
if nn == 0 and np <= 1 then
  local driver = KEYS[1 + np]
  local total = lexcount(driver, lo, hi)
  local out = {total, total - lexcount(driver, start, hi)}
  if limit > 0 and start ~= '' then
    local found = redis.call('ZRANGEBYLEX', driver, start, hi, 'LIMIT', 0, limit)
    for i = 1, #found do out[#out + 1] = found[i] end
  end
  return out
end
if np == 0 and nn == 1 then
  local total = lexcount(KEYS[1], lo, hi) - lexcount(KEYS[2], lo, hi)
  local after = lexcount(KEYS[1], start, hi) - lexcount(KEYS[2], start, hi)
  tests[1] = {KEYS[2], false}
  if limit > 0 then walk(KEYS[1], start, hi, page, true) end
  local out = {total, total - after}
  for i = 1, #page do out[#out + 1] = page[i] end
  return out
end
if limit == 0 and nn == 0 and lo == '-' and hi == '+' and upto == '' then
  local sets = {}
  for i = 2, 1 + np do sets[#sets + 1] = KEYS[i] end
  return {redis.call('ZINTERCARD', #sets, unpack(sets)), 0}
end
local driver, smallest = KEYS[1], -1
for i = 2, 1 + np do
  local size = lexcount(KEYS[i], lo, hi)
  if smallest < 0 or size < smallest then driver, smallest = KEYS[i], size end
end
for i = 2, 1 + np do
  if KEYS[i] ~= driver then tests[#tests + 1] = {KEYS[i], true} end
end
for i = 2 + np, 1 + np + nn do tests[#tests + 1] = {KEYS[i], false} end
local before = 0
if upto ~= '' then before = walk(driver, lo, upto, nil, false) end
local after = walk(driver, start, hi, page, false)
local out = {before + after, before}
for i = 1, #page do out[#out + 1] = page[i] end
return out
"""


# KEYS: a kind's index. The distinct namespaces of its members, one ZRANGEBYLEX each.
NAMESPACES = """#!lua flags=no-writes
local out, min = {}, '-'
while true do
  local found = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, 1)
  if #found == 0 then return out end
  local cut = string.find(found[1], '\0', 1, true)
  local namespace = string.sub(found[1], 1, cut - 1)
  out[#out + 1] = namespace
  min = '[' .. namespace .. '\1'
end
"""


async def namespaces(reader: RedisReader, kind: str, cluster: str) -> list[str]:
    keys = reader.keys(cluster)
    if (await valid_layouts(reader, [cluster]))[cluster]:
        found = await reader._call(reader.redis.eval(NAMESPACES, 1, keys.index(ix.ordered(kind))))
        return [bytes(n).decode() for n in found]
    fields = cast(list[bytes], await reader._call(reader.redis.hkeys(keys.objects(kind))))
    return sorted({f.decode().partition("/")[0] for f in fields})


class Plan:
    """One script call: its keys and arguments, and what its members are."""

    __slots__ = ("args", "cluster", "keys", "kind")

    def __init__(self, cluster: str, kind: str, keys: list[str], args: list[bytes | str]) -> None:
        self.cluster, self.kind, self.keys, self.args = cluster, kind, keys, args


def _bounds(
    prefix: bytes | None, after: bytes | None, passed: bool
) -> tuple[bytes, bytes, bytes, bytes]:
    """(lo, start, upto, hi) lexical bounds of a range (`prefix`: its members start with it;
    None: the whole set) for members strictly after `after` (None: from the start; `passed`:
    the whole range lies before the cursor). An empty bound is an empty range."""
    lo, hi = (b"-", b"+") if prefix is None else (b"[" + prefix, b"(" + prefix[:-1] + b"\x01")
    if passed or (after is not None and prefix is not None and after >= prefix[:-1] + b"\x01"):
        return lo, b"", hi, hi
    if after is None or (prefix is not None and after < prefix):
        return lo, lo, b"", hi
    return lo, b"(" + after, b"[" + after, hi


def _sets(keys: Keys, s: Selection) -> tuple[str, list[str], list[str]] | None:
    """The base set, positive and negative filter sets of an indexed selection (None: it asks
    for devices published by no slice, which `_unpublished` answers)."""
    positive: list[str] = []
    negative: list[str] = []
    if s.kind == RESOURCE_CLAIM:
        if s.state is not None:
            positive.append(keys.index(ix.state(s.state)))
        if s.idle is not None:
            (positive if s.idle else negative).append(keys.index(ix.IDLE))
        return keys.index(ix.ordered(s.kind)), positive, negative
    if s.kind == POD:
        if s.uses_devices is not None:
            (positive if s.uses_devices else negative).append(keys.index(ix.USES))
        return keys.index(ix.ordered(s.kind)), positive, negative
    if s.kind != DEVICES:
        return keys.index(ix.ordered(s.kind)), positive, negative
    if s.status is not None:
        positive.append(keys.index(ix.status(s.status)))
    if s.class_name is not None:
        positive.append(keys.index(ix.class_index(s.class_name)))
    return keys.index(ix.DEVICES), positive, negative


def plans(
    keys: Keys, s: Selection, after: bytes | None, passed: bool, limit: int,
    candidates: list[bytes] | None,
) -> list[Plan]:  # fmt: skip
    """The script calls of one cluster's selection over the indexed sets (see `_sets`), for
    what lies after `after` (`passed`: all of it lies before the cursor)."""
    found = _sets(keys, s)
    assert found is not None
    base, positive, negative = found
    head: list[bytes | str] = [b"%d" % len(positive), b"%d" % len(negative)]
    every = [base, *positive, *negative]
    if candidates is not None:
        before = [m for m in candidates if passed or (after is not None and m <= after)]
        rest = candidates[len(before) :]
        args = [*head, b"", b"", b"", b"", b"%d" % limit, b"%d" % len(before), b"%d" % len(rest)]
        return [Plan(s.cluster, s.kind, every, [*args, *before, *rest])]
    if s.kind == DEVICES:
        prefixes: list[bytes | None] = [None if s.driver is None else s.driver.encode() + b"\0"]
    elif s.namespaces is None:
        prefixes = [None]
    else:
        prefixes = [ns.encode() + b"\0" for ns in sorted(set(s.namespaces))]
    out = []
    for prefix in prefixes:
        lo, start, upto, hi = _bounds(prefix, after, passed)
        args = [*head, lo, start, upto, hi, b"%d" % limit, b"-1", b"0"]
        out.append(Plan(s.cluster, s.kind, every, args))
    return out


def cursor_member(after: tuple[str, ...] | None, cluster: str) -> tuple[bool, bytes | None]:
    """(everything of `cluster` lies before the cursor, the member to start after)."""
    if not after:
        return False, None
    if cluster < after[0]:
        return True, None
    if cluster > after[0]:
        return False, None
    return False, sort_member(after[1:]) if len(after) > 1 else None


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
