"""The Redis key layout of the state store, and how records, keys and links are encoded.

Every key of a cluster carries the cluster as a hash tag, `PREFIX:{cluster}:…`, so Redis
Cluster keeps a cluster's keys in one slot (one transaction may touch them all) and
shards by cluster. The layout (docs/redis.md has the full table):

    PREFIX:clusters                               SET   cluster names (the only untagged key)
    PREFIX:{c}:status                             STRING msgpack ClusterStatus
    PREFIX:{c}:obj:<Kind>                         HASH  "namespace/name" -> msgpack record
    PREFIX:{c}:devices                            HASH  device field -> msgpack DeviceEntry
    PREFIX:{c}:unpublished                        HASH  device field -> msgpack DeviceEntry of a
                                                        device held and published by no slice
    PREFIX:{c}:device_status                      HASH  device field -> free|held|shared|blocked
    PREFIX:{c}:idle                               HASH  "namespace/name" -> idle since (claims)
    PREFIX:{c}:link:<relation>:<from>             SET   class_claims, name_devices (large fan-out):
                                                        members are linked keys (JSON arrays)
    PREFIX:{c}:links:<relation>                   HASH  every other relation: from-key (JSON) ->
                                                        its full sorted list (JSON; msgpack
                                                        AllocationRefs for device_allocations)
    PREFIX:{c}:lease / :fence / :fence_counter    the writer's lease (service.stores.lease)
    PREFIX:{c}:events                             STREAM of live events, one entry per batch
    PREFIX:{c}:layout                             STRING "2:<fence token>": the writer's indexes
                                                        below are whole (redis_index.py)
    PREFIX:{c}:x:<index>                          ZSET  the writer's indexes, every score 0:
                                                        members in key order (ZRANGEBYLEX)

Index members keep key order as bytes: an object is `namespace NUL name`, a device `driver NUL
pool NUL device` (names never hold NUL, and NUL sorts before every other byte, so a member
sorts as its key's tuple does, a namespace's members form one lexical range).

Keys inside a cluster's values drop the cluster (it is the tag): an ObjectKey is the JSON array
`[kind, namespace, name]`, a DeviceKey `[driver, pool, device]`; JSON because pool names may
hold '/' (object names never do, hence "namespace/name" for hash fields). Encodings are
canonical (compact JSON of a list of strings), so a SREM of a member removes exactly what SADD
added. Keys and members are encoded by msgspec, whose bytes are the size of the text: orjson
(3.12 and later) hands back each small result in a buffer of 4 KiB or more, and an initial sync
holds some 300,000 of them until its transaction is sent (over 1 GiB at 5,000 nodes). The bytes
are the same as orjson's (the layout has not changed).
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from dra_mirror.service.model.records import (
    KIND_OF,
    AllocationRef,
    DeviceEntry,
    DeviceKey,
    ObjectKey,
    Record,
)
from dra_mirror.service.model.relations import FAN_OUT, Relation
from dra_mirror.service.stores.protocols import ClusterStatus

DEFAULT_PREFIX = "dra-mirror"
LAYOUT = b"2"  # the key layout this code writes and reads (docs/redis.md, "Upgrades")

# Relations whose linked values are devices; the others link objects.
DEVICE_VALUED = frozenset(
    {
        Relation.NODE_DEVICES,
        Relation.SLICE_DEVICES,
        Relation.POOL_DEVICES,
        Relation.UUID_DEVICES,
        Relation.NAME_DEVICES,
    }
)
HOLDS = Relation.DEVICE_ALLOCATIONS
# Relations kept as one Redis set per from-key (many members: changed one by one).
SET_RELATIONS = FAN_OUT
holds_decoder = msgspec.msgpack.Decoder(list[AllocationRef])

_encoder = msgspec.msgpack.Encoder()
_json = msgspec.json.Encoder().encode  # right-sized bytes (see the module docstring)
record_decoder = msgspec.msgpack.Decoder(Record)
entry_decoder = msgspec.msgpack.Decoder(DeviceEntry)
hold_decoder = msgspec.msgpack.Decoder(AllocationRef)
status_decoder = msgspec.msgpack.Decoder(ClusterStatus)
encode = _encoder.encode
KINDS_BY_NAME = {kind: kind for kind in KIND_OF.values()}


def check_cluster_name(cluster: str) -> str:
    # A brace would end (or start) the hash tag early and scatter the cluster's keys.
    if not cluster or "{" in cluster or "}" in cluster:
        raise ValueError(f"cluster name {cluster!r} cannot be a Redis hash tag")
    return cluster


class Keys:
    """The names of one cluster's keys under a prefix."""

    def __init__(self, prefix: str, cluster: str) -> None:
        self.cluster = check_cluster_name(cluster)
        base = f"{prefix}:{{{cluster}}}:"
        self.base = base
        self.status = base + "status"
        self.devices = base + "devices"
        self.unpublished = base + "unpublished"
        self.device_status = base + "device_status"
        self.idle = base + "idle"
        self.lease = base + "lease"
        self.fence = base + "fence"
        self.fence_counter = base + "fence_counter"
        self.events = base + "events"
        self.layout = base + "layout"
        self.classes = base + "x:classes"  # SET of the class names with an index (rebuilds)

    def index(self, name: str) -> str:
        """One of the writer's indexes (redis_index.py)."""
        return f"{self.base}x:{name}"

    def objects(self, kind: str) -> str:
        return f"{self.base}obj:{kind}"

    def link(self, relation: str, from_key: Any) -> str:
        """The set of one from-key of a large fan-out relation (SET_RELATIONS)."""
        return f"{self.base}link:{relation}:{link_part(from_key).decode()}"

    def links(self, relation: str) -> str:
        """The hash of every other relation: one field per from-key."""
        return f"{self.base}links:{relation}"


def clusters_key(prefix: str) -> str:
    return f"{prefix}:clusters"


def object_field(key: ObjectKey) -> str:
    return f"{key.namespace}/{key.name}"


def split_object_field(field: bytes) -> tuple[str, str]:
    namespace, _, name = field.decode().partition("/")
    return namespace, name


def link_part(from_key: Any) -> bytes:
    """A relation's from-key without its cluster: `["n1"]`, `["Pod","ns","a"]`, `"GPU-…"`."""
    if isinstance(from_key, tuple | list):
        return _json(from_key[1:])
    return _json(from_key)


def key_member(key: tuple[Any, ...]) -> bytes:
    """A linked key without its cluster: `["Pod","ns","a"]`, `["driver","pool","gpu-0"]`."""
    return _json(key[1:])


def encode_members(keys: list[Any]) -> bytes:
    """A sorted list of linked keys, without their cluster: `[["Pod","ns","a"], …]`."""
    return _json([key[1:] for key in keys])


def decode_members(cluster: str, relation: str, raw: bytes) -> list[Any]:
    make = DeviceKey if relation in DEVICE_VALUED else ObjectKey
    return [make(cluster, *parts) for parts in orjson.loads(raw)]


def device_field(key: DeviceKey) -> bytes:
    return _json(key[1:])


def driver_prefix(driver: str) -> bytes:
    return b"[" + _json(driver) + b","


def decode_device_key(cluster: str, raw: bytes) -> DeviceKey:
    driver, pool, device = orjson.loads(raw)
    return DeviceKey(cluster, driver, pool, device)


def decode_member(cluster: str, relation: str, raw: bytes) -> ObjectKey | DeviceKey:
    parts = orjson.loads(raw)
    if relation in DEVICE_VALUED:
        return DeviceKey(cluster, *parts)
    return ObjectKey(cluster, *parts)


def object_member(namespace: str, name: str) -> bytes:
    """An object's member in the indexes (see the module docstring)."""
    return f"{namespace}\0{name}".encode()


def device_member(key: DeviceKey) -> bytes:
    return f"{key.driver}\0{key.pool}\0{key.device}".encode()


def sort_member(parts: tuple[str, ...]) -> bytes:
    """A sort key without its cluster (or a prefix of one) as a member."""
    return "\0".join(parts).encode()


def member_parts(member: bytes) -> list[str]:
    return member.decode().split("\0")
