"""The scripts and script calls of a Redis selection (redis_select.py): what each call reads.

`SELECT` counts one lexical range of one cluster's selection and returns the page's members
(read-only, flagged no-writes: it may run on a replica and is never replicated):

* one set to read — the kind's base set, or a single filter set (a subset of it) — counts with
  ZLEXCOUNT and pages with ZRANGEBYLEX: O(log n + page);
* one negative filter (claims not idle, pods using no devices): counts by difference, pages by
  walking the base set from the cursor and dropping the filter's members (ZMSCORE) until the
  page is full;
* several filters: walks the smallest set of the range, 512 members at a time, testing each
  chunk against the other sets with ZMSCORE: the intersection is made on the server, in
  O(smallest set), and the count with it. With no range and no cursor a count alone is
  ZINTERCARD;
* a node's objects: the node's reverse map gives the candidates, tested the same way.

`NAMESPACES` lists the namespaces of a kind, one ZRANGEBYLEX per namespace. `plans(...)` makes
the calls of one cluster's selection: the sets it reads (`redis_index`'s names) and the lexical
bounds (`namespace NUL`, `driver NUL`) after a cursor.
"""

from __future__ import annotations

from dra_mirror.service.model.records import POD, RESOURCE_CLAIM
from dra_mirror.service.stores import redis_index as ix
from dra_mirror.service.stores.protocols import DEVICES, Selection
from dra_mirror.service.stores.redis_keys import Keys, sort_member

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
