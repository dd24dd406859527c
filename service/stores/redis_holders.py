"""`whoHolds` by uuid in one round trip: the devices a uuid names, their holds and the claims
holding them, read by one script per cluster (all of a cluster's keys share its slot).

The reverse maps are the writer's (service.stores.redis_writes): `links:uuid_devices` maps the
uuid's JSON to the JSON list of its devices (`[["driver","pool","gpu-0"], …]`),
`links:device_allocations` a device's JSON (`["driver","pool","gpu-0"]`) to its holds
(msgpack `AllocationRef`s), `obj:ResourceClaim` a claim's `namespace/name` to its record. The
script rebuilds each device's field from the JSON it read; it returns that field beside the
device's holds, and the reader takes the answer only when every field is the one its own
encoder makes (a name whose JSON needs escapes, which Kubernetes names never need, would be
read by the usual lookups instead). Three dependent reads in one call, not three round trips.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dra_mirror.service.model.records import RESOURCE_CLAIM, AllocationRef, ObjectKey, Record
from dra_mirror.service.model.relations import Relation
from dra_mirror.service.stores.protocols import UuidHolders
from dra_mirror.service.stores.redis_keys import (
    HOLDS,
    Keys,
    decode_members,
    device_field,
    holds_decoder,
    link_part,
    object_field,
    record_decoder,
)

# KEYS: the uuid → devices hash, the device → holds hash, the claims hash. ARGV: the uuid's
# field. Returns {} (no such uuid) or {devices JSON, {field, holds or false, …}, {claim field,
# record or false, …}}.
HOLDERS = """#!lua flags=no-writes
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return {} end
local held, claims, seen = {}, {}, {}
for _, d in ipairs(cjson.decode(raw)) do
  local field = '["' .. d[1] .. '","' .. d[2] .. '","' .. d[3] .. '"]'
  local holds = redis.call('HGET', KEYS[2], field)
  held[#held + 1] = field
  held[#held + 1] = holds or false
  if holds then
    for _, ref in ipairs(cmsgpack.unpack(holds)) do
      local claim = ref['claim'][3] .. '/' .. ref['claim'][4]
      if not seen[claim] then
        seen[claim] = true
        claims[#claims + 1] = claim
        claims[#claims + 1] = redis.call('HGET', KEYS[3], claim) or false
      end
    end
  end
end
return {raw, held, claims}
"""


def holders_call(pipe: Any, keys: Keys, uuid: str) -> None:
    """Queue the script for one cluster on `pipe`."""
    pipe.eval(
        HOLDERS, 3, keys.links(Relation.UUID_DEVICES.value), keys.links(HOLDS.value),
        keys.objects(RESOURCE_CLAIM), link_part(uuid),
    )  # fmt: skip


def holders_answer(cluster: str, reply: Sequence[Any], into: UuidHolders) -> bool:
    """Add one cluster's reply to `into`; False when a field the script built is not the
    writer's (the caller then reads with the usual lookups)."""
    if not reply:
        return True
    raw, held, claims = reply
    devices = decode_members(cluster, Relation.UUID_DEVICES.value, raw)
    if len(held) != 2 * len(devices):
        return False
    for position, device in enumerate(devices):
        field, holds = held[2 * position], held[2 * position + 1]
        if field != device_field(device):
            return False
        refs: list[AllocationRef] = holds_decoder.decode(holds) if holds else []
        into.devices.append(device)
        into.holds[device] = refs
    for position in range(0, len(claims), 2):
        namespace, _, name = claims[position].decode().partition("/")
        key = ObjectKey(cluster, RESOURCE_CLAIM, namespace, name)
        body = claims[position + 1]
        record: Record | None = record_decoder.decode(body) if body else None
        if object_field(key) == claims[position].decode():
            into.claims[key] = record
    return True
