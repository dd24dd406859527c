"""One cluster's writes into Redis, from the Changes alone: one transaction per batch.

The Redis store derives nothing and keeps no index: each `Changes` carries its records, what
the model derived of them (`Changes.delta`: reverse-map entries, the whole list of every
touched from-key of a bounded relation, valid devices, held devices no slice publishes,
device statuses, idle marks) and its
live events; `Ops.of(changes)` turns that into Redis commands. Promises:

* a batch's records, reverse maps, devices, device statuses, idle marks and its live events
  are written by ONE `MULTI … EXEC` transaction: Redis runs it atomically, so a reader never
  sees a claim allocated to a device whose index does not show it. A fenced writer first
  WATCHes the cluster's fence key and compares it with its token (service.stores.lease): if
  the fence is another's, or changes before EXEC, nothing is written (`Fenced`);
* live events (`Changes.events`, none for a batch of more than LIVE_BATCH_LIMIT objects:
  service.model.live) are published inside the same transaction, after the writes, one
  message per batch;
* relations with a large fan-out (relations.FAN_OUT: every claim of a class, every device
  named gpu-0) are Redis sets changed member by member; every other relation is one hash per
  relation whose field per from-key holds the from-key's full sorted list, as the delta gives
  it — an initial sync of 40,000 devices is some 170 commands;
* commands of several batches (those still pending after a failed write, then the new one)
  are concatenated in batch order: a later batch's command for the same entry runs later.

`send_batch(client, token, ops)` sends it on one connection to where the cluster's keys live
(`redis_connect.slot_connection`: the master of the `{cluster}` slot on a Redis Cluster).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.records import key_of
from dra_mirror.service.model.relations import DEVICE_ALLOCATIONS, FAN_OUT, Relation
from dra_mirror.service.stores import bus
from dra_mirror.service.stores.protocols import StoreError
from dra_mirror.service.stores.redis_connect import Client, refresh, slot_connection
from dra_mirror.service.stores.redis_keys import (
    Keys,
    device_field,
    encode,
    encode_members,
    key_member,
    link_part,
    object_field,
)

_CHUNK = 2000  # arguments per command: big batches become several HSETs of one hash


def resp(command: list[bytes]) -> bytes:
    """One command in the Redis protocol (RESP): redis-py's general packer cost more than
    Redis took to run a large batch."""
    parts = [b"*%d\r\n" % len(command)]
    parts.extend(b"$%d\r\n%s\r\n" % (len(a), a) for a in command)
    return b"".join(parts)


class Fenced(StoreError):
    """This replica no longer holds the cluster's lease: its writes are refused."""


class Ops:
    """The commands of one or more batches, sent as ONE `MULTI … EXEC` (Redis runs a
    transaction atomically: no reader sees part of it)."""

    def __init__(self, keys: Keys, *, publish: bytes = b"PUBLISH") -> None:
        self.keys = keys
        self.publish = publish  # SPUBLISH on a Redis Cluster (sharded pub/sub)
        self.fence_key = keys.fence
        self.commands: list[list[bytes]] = []
        self.published: list[bytes] = []  # one encoded list of live events per batch

    def __len__(self) -> int:
        return len(self.commands)

    def add(self, command: bytes, key: str, args: list[bytes]) -> None:
        raw_key = key.encode()
        for start in range(0, len(args), _CHUNK):
            self.commands.append([command, raw_key, *args[start : start + _CHUNK]])

    def transaction(self) -> bytes:
        """MULTI, the commands, the (S)PUBLISH of each batch's live events, EXEC."""
        channel = self.keys.events.encode()
        parts = [resp([b"MULTI"])]
        parts.extend(resp(command) for command in self.commands)
        parts.extend(resp([self.publish, channel, events]) for events in self.published)
        parts.append(resp([b"EXEC"]))
        return b"".join(parts)

    def replies(self) -> int:
        """How many replies the transaction gets: +OK, one +QUEUED each, the EXEC array."""
        return len(self.commands) + len(self.published) + 2

    # --- one batch ------------------------------------------------------------------------

    def batch(self, changes: Changes) -> None:
        """Add the commands of one Changes (see the module docstring)."""
        keys = self.keys
        by_kind: dict[str, tuple[list[bytes], list[bytes]]] = {}
        for record in changes.deletes:
            key = key_of(record)
            by_kind.setdefault(key.kind, ([], []))[1].append(object_field(key).encode())
        for record in changes.upserts:
            key = key_of(record)
            by_kind.setdefault(key.kind, ([], []))[0].extend(
                (object_field(key).encode(), encode(record))
            )
        for kind, (sets, dels) in by_kind.items():
            self._hash(keys.objects(kind), sets, dels)
        delta = changes.delta
        members: dict[tuple[bytes, str], list[bytes]] = {}
        for command, entries in ((b"SREM", delta.unlinked), (b"SADD", delta.linked)):
            for relation, from_key, value in entries:
                if relation in FAN_OUT:
                    assert isinstance(value, tuple)  # fan-out relations link keys
                    member = key_member(value)
                    members.setdefault((command, keys.link(relation, from_key)), []).append(member)
        for (command, key_name), values in members.items():
            self.add(command, key_name, values)
        by_relation: dict[Relation, tuple[list[bytes], list[bytes]]] = {}
        for (relation, from_key), linked in delta.lists.items():
            sets, dels = by_relation.setdefault(relation, ([], []))
            field = link_part(from_key)
            if not linked:
                dels.append(field)
            elif relation == DEVICE_ALLOCATIONS:
                sets.extend((field, encode(linked)))
            else:
                sets.extend((field, encode_members(linked)))
        for relation, (sets, dels) in by_relation.items():
            self._hash(keys.links(relation), sets, dels)
        self._entries(keys.devices, ((device_field(k), e) for k, e in delta.devices.items()))
        self._entries(
            keys.unpublished, ((device_field(k), e) for k, e in delta.unpublished.items())
        )
        self._entries(keys.idle, ((object_field(k).encode(), s) for k, s in delta.idle.items()))
        self._entries(keys.device_status, ((device_field(k), s) for k, s in delta.statuses.items()))
        if changes.events:
            self.published.append(bus.events_encoder.encode(changes.events))

    def _hash(self, key: str, sets: list[bytes], dels: list[bytes]) -> None:
        if dels:
            self.add(b"HDEL", key, dels)
        if sets:
            self.add(b"HSET", key, sets)

    def _entries(self, key: str, entries: Iterable[tuple[bytes, Any]]) -> None:
        sets: list[bytes] = []
        dels: list[bytes] = []
        for field, value in entries:
            if value is None:
                dels.append(field)
            else:
                sets.extend((field, value.encode() if isinstance(value, str) else encode(value)))
        self._hash(key, sets, dels)


async def send_batch(client: Client, token: str, ops: Ops, *, wait: tuple[int, int] | None = None
) -> int | None:  # fmt: skip
    """One batch on one connection: [WATCH fence, GET fence, compare], then MULTI … EXEC
    packed as one request. EXEC answers nil when the fence changed after the WATCH. With
    `wait` (replicas, milliseconds) a `WAIT` follows the EXEC in the same request: the answer
    is how many replicas hold the batch (replication is asynchronous: a master killed right
    after EXEC may not have sent it, and its promoted replica would lack it); else None.

    A pooled connection that Redis closed (it restarted) fails on first use: the batch is
    sent once more on a fresh connection. Sending twice is harmless: every command sets a
    final state, and the fence is checked again."""
    try:
        return await _send_once(client, token, ops, wait)
    except (RedisConnectionError, RedisTimeoutError, OSError):
        await refresh(client)  # on a cluster the slot may have moved (a failover)
        return await _send_once(client, token, ops, wait)


async def _send_once(client: Client, token: str, ops: Ops, wait: tuple[int, int] | None
) -> int | None:  # fmt: skip
    connection, release = await slot_connection(client, ops.fence_key)
    try:
        if token:
            await connection.send_packed_command(
                resp([b"WATCH", ops.fence_key.encode()]) + resp([b"GET", ops.fence_key.encode()])
            )
            await connection.read_response()
            current = await connection.read_response()
            if current != token.encode():
                await connection.send_packed_command(resp([b"UNWATCH"]))
                await connection.read_response()
                raise Fenced(f"the fence of {ops.fence_key} is {current!r}, not ours")
        request = ops.transaction()
        if wait is not None:
            request += resp([b"WAIT", b"%d" % wait[0], b"%d" % wait[1]])
        await connection.send_packed_command(request)
        for _ in range(ops.replies() - 1):
            await connection.read_response()
        result = await connection.read_response()
        replicas = int(await connection.read_response()) if wait is not None else None
        if result is None:
            raise Fenced(f"the fence of {ops.fence_key} moved during the write")
        return replicas
    except BaseException as error:
        if not isinstance(error, Fenced):
            await connection.disconnect()
            if not isinstance(error, RedisConnectionError | RedisTimeoutError | OSError):
                await refresh(client)  # e.g. MOVED: the slot has a new master
        raise
    finally:
        released = release(connection)
        if released is not None:
            await released
