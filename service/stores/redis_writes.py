"""One cluster's writes into Redis, from the Changes alone: one transaction per batch.

The Redis store derives nothing and keeps no index: each `Changes` carries its records, what
the model derived of them (`Changes.delta`: reverse-map entries, the whole list of every
touched from-key of a bounded relation, valid devices, held devices no slice publishes,
device statuses, idle marks) and its live events; `Ops` turns that into Redis commands.
Promises:

* a batch's records, reverse maps, devices, device statuses, idle marks and its live events
  are written by ONE `MULTI … EXEC` transaction: Redis runs it atomically, so a reader never
  sees a claim allocated to a device whose index does not show it. A fenced writer first
  WATCHes the cluster's fence key and compares it with its token (service.stores.lease): if
  the fence is another's, or changes before EXEC, nothing is written (`Fenced`);
* the writer holds a bounded part of the transaction at a time, whatever the batch's size:
  commands are made from the Changes as they are sent (`Ops.requests`), in requests of about
  `REQUEST_BYTES`, each sent (and drained to the socket) before the next is made; Redis queues
  them until EXEC. A command carries at most `COMMAND_ARGS` arguments of about
  `COMMAND_BYTES` at most, so an initial sync of 40,000 devices is some 500 commands of one
  transaction (the list of 5,000 nodes' slices is 114 MB of RESP: it used to be held three
  times over before its first byte was sent);
* live events (`Changes.events`: per-object events, or one Resync for a batch of more than
  LIVE_BATCH_LIMIT objects, service.model.live) are appended to the cluster's live stream
  inside the same transaction, after the writes, one entry per batch; the stream keeps about
  the last `LIVE_STREAM_ENTRIES` batches (`XADD … MAXLEN ~`), so subscribers that resume
  after an entry still kept lose and repeat nothing (service.stores.redis_live);
* relations with a large fan-out (relations.FAN_OUT: every claim of a class, every device
  named gpu-0) are Redis sets changed member by member; every other relation is one hash per
  relation whose field per from-key holds the from-key's full sorted list, as the delta gives
  it;
* commands of several batches (those still pending after a failed write, then the new one)
  are sent in batch order: a later batch's command for the same entry runs later;
* the writer's indexes of layout 2 (lists, filters, counts: redis_index.py) are written from
  each batch in its transaction, after its records and entries.

`send_batch(client, token, ops)` sends it on one connection to where the cluster's keys live
(`redis_connect.slot_connection`: the master of the `{cluster}` slot on a Redis Cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.records import Record, key_of
from dra_mirror.service.model.relations import DEVICE_ALLOCATIONS, FAN_OUT, Relation
from dra_mirror.service.stores import bus, redis_index
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
from dra_mirror.service.stores.redis_wait import Wait

COMMAND_ARGS = 2000  # arguments of one command at most: a big hash is set by several HSETs
COMMAND_BYTES = 256 * 1024  # about their bytes together at most (the last value may go over)
REQUEST_BYTES = 1024 * 1024  # about how much of a transaction the writer holds at once

Command = list[bytes]  # [name, key, *arguments]


def resp(command: list[bytes]) -> bytes:
    """One command in the Redis protocol (RESP): redis-py's general packer cost more than
    Redis took to run a large batch."""
    parts = [b"*%d\r\n" % len(command)]
    parts.extend(b"$%d\r\n%s\r\n" % (len(a), a) for a in command)
    return b"".join(parts)


class Fenced(StoreError):
    """This replica no longer holds the cluster's lease: its writes are refused."""


def _commands(name: bytes, key: str, args: Iterable[bytes], *, per: int = 1) -> Iterator[Command]:
    """`name key args…` as commands of at most COMMAND_ARGS arguments and about COMMAND_BYTES,
    cut between groups of `per` arguments (a field and its value stay together)."""
    raw_key = key.encode()
    command: Command = [name, raw_key]
    size = 0
    group = 0
    for arg in args:
        if (
            group == 0
            and len(command) > 2
            and (len(command) - 2 + per > COMMAND_ARGS or size + len(arg) > COMMAND_BYTES)
        ):
            yield command
            command, size = [name, raw_key], 0
        command.append(arg)
        size += len(arg)
        group = (group + 1) % per
    if len(command) > 2:
        yield command


def _pairs(items: Iterable[tuple[bytes, bytes]]) -> Iterator[bytes]:
    for field, value in items:
        yield field
        yield value


LIVE_STREAM_ENTRIES = 1_000
"""Batches of live events each cluster's stream keeps (about: Redis trims by whole nodes). A
batch of churn is tens of events of about a kilobyte each; one of LIVE_BATCH_LIMIT objects is
the most, some megabytes."""
LIVE_STREAM_MAXLEN = str(LIVE_STREAM_ENTRIES).encode()


class Ops:
    """The commands of one or more batches, sent as ONE `MULTI … EXEC` (Redis runs a
    transaction atomically: no reader sees part of it), made as they are sent."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self.fence_key = keys.fence
        self._sources: list[Callable[[], Iterator[Command]]] = []
        self._events: list[Changes] = []  # the batches whose live events are published

    def add(self, command: bytes, key: str, args: list[bytes]) -> None:
        self._sources.append(lambda: _commands(command, key, args))

    def batch(self, changes: Changes) -> None:
        """Add the commands of one Changes (see the module docstring); they are made when
        sent."""
        self._sources.append(lambda: self._batch(changes))
        if changes.events:
            self._events.append(changes)

    def commands(self) -> Iterator[Command]:
        """Every command of the transaction between MULTI and EXEC, in order, made one at a
        time: the writes of each batch, then the XADD of each batch's live events."""
        for source in self._sources:
            yield from source()
        stream = self.keys.events.encode()
        for changes in self._events:
            data = bus.events_encoder.encode(changes.events)
            yield [b"XADD", stream, b"MAXLEN", b"~", LIVE_STREAM_MAXLEN, b"*", b"e", data]

    def requests(self, limit: int | None = None) -> Iterator[tuple[list[bytes], int]]:
        """The transaction (MULTI, the commands, EXEC) as requests of about `limit` bytes
        (REQUEST_BYTES): (the packed commands, how many). Each is made when the previous was
        taken; one is larger only when a single command is."""
        limit = REQUEST_BYTES if limit is None else limit
        pending = [resp([b"MULTI"])]
        size = len(pending[0])
        for command in self.commands():
            packed = resp(command)
            if pending and size + len(packed) > limit:
                yield pending, len(pending)
                pending, size = [], 0
            pending.append(packed)
            size += len(packed)
        pending.append(resp([b"EXEC"]))
        yield pending, len(pending)

    # --- one batch ------------------------------------------------------------------------

    def _batch(self, changes: Changes) -> Iterator[Command]:
        keys = self.keys
        by_kind: dict[str, tuple[list[Record], list[Record]]] = {}
        for record in changes.deletes:
            by_kind.setdefault(key_of(record).kind, ([], []))[1].append(record)
        for record in changes.upserts:
            by_kind.setdefault(key_of(record).kind, ([], []))[0].append(record)
        for kind, (sets, dels) in by_kind.items():
            yield from self._hash(
                keys.objects(kind),
                ((object_field(key_of(r)).encode(), encode(r)) for r in sets),
                (object_field(key_of(r)).encode() for r in dels),
            )
        delta = changes.delta
        members: dict[tuple[bytes, str], list[Any]] = {}
        for command, entries in ((b"SREM", delta.unlinked), (b"SADD", delta.linked)):
            for relation, from_key, value in entries:
                if relation in FAN_OUT:
                    assert isinstance(value, tuple)  # fan-out relations link keys
                    members.setdefault((command, keys.link(relation, from_key)), []).append(value)
        for (command, key_name), values in members.items():
            yield from _commands(command, key_name, (key_member(v) for v in values))
        by_relation: dict[Relation, tuple[list[tuple[Any, list[Any]]], list[Any]]] = {}
        for (relation, from_key), linked in delta.lists.items():
            filled, emptied = by_relation.setdefault(relation, ([], []))
            if linked:
                filled.append((from_key, linked))
            else:
                emptied.append(from_key)
        for relation, (filled, emptied) in by_relation.items():
            as_value = encode if relation == DEVICE_ALLOCATIONS else encode_members
            yield from self._hash(
                keys.links(relation),
                ((link_part(f), as_value(linked)) for f, linked in filled),
                (link_part(f) for f in emptied),
            )
        yield from self._entries(keys.devices, delta.devices, device_field)
        yield from self._entries(keys.unpublished, delta.unpublished, device_field)
        yield from self._entries(keys.idle, delta.idle, lambda k: object_field(k).encode())
        yield from self._entries(keys.device_status, delta.statuses, device_field)
        yield from self._indexes(changes)

    def _indexes(self, changes: Changes) -> Iterator[Command]:
        for name, key, args, per in redis_index.commands(self.keys, changes):
            yield from _commands(name, key, args, per=per)

    def rebuild(self, snapshot: Changes, drop: list[str]) -> None:
        """Drop the index keys `drop`, then write the indexes of `snapshot` (a whole index:
        redis_index.snapshot) — the records, links and entries it holds are left as they are."""

        def source() -> Iterator[Command]:
            for start in range(0, len(drop), COMMAND_ARGS):
                yield [b"DEL", *(k.encode() for k in drop[start : start + COMMAND_ARGS])]
            yield from self._indexes(snapshot)

        self._sources.append(source)

    def _hash(self, key: str, sets: Iterable[tuple[bytes, bytes]], dels: Iterable[bytes]
    ) -> Iterator[Command]:  # fmt: skip
        yield from _commands(b"HDEL", key, dels)
        yield from _commands(b"HSET", key, _pairs(sets), per=2)

    def _entries(self, key: str, entries: dict[Any, Any], field: Callable[[Any], bytes]
    ) -> Iterator[Command]:  # fmt: skip
        sets = ((field(k), v.encode() if isinstance(v, str) else encode(v))
                for k, v in entries.items() if v is not None)  # fmt: skip
        yield from self._hash(key, sets, (field(k) for k, v in entries.items() if v is None))


async def send_batch(client: Client, token: str, ops: Ops, *, wait: Wait | None = None
) -> int | None:  # fmt: skip
    """One batch on one connection: [WATCH fence, GET fence, compare], then MULTI … EXEC
    sent as `Ops.requests` makes it, the replies read once EXEC is sent. EXEC answers nil when the fence changed after the WATCH. With
    `wait` a `WAIT` follows the EXEC on the connection, its timeout sized to the bytes of the
    transaction (`redis_wait.Wait`): the answer is how many replicas hold the batch (replication is asynchronous: a master killed right
    after EXEC may not have sent it, and its promoted replica would lack it); else None.

    A pooled connection that Redis closed (it restarted) fails on first use: the batch is
    sent once more on a fresh connection. Sending twice is harmless: every command sets a
    final state, and the fence is checked again."""
    try:
        return await _send_once(client, token, ops, wait)
    except (RedisConnectionError, RedisTimeoutError, OSError):
        await refresh(client)  # on a cluster the slot may have moved (a failover)
        return await _send_once(client, token, ops, wait)


async def _send_once(client: Client, token: str, ops: Ops, wait: Wait | None
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
        replies = sent = 0
        for request, count in ops.requests():
            # No health check once MULTI is sent: its PING would be queued in the transaction.
            await connection.send_packed_command(request, check_health=replies == 0)
            replies += count
            sent += sum(map(len, request))
            del request  # not held while the next one is made
        if wait is not None:
            await connection.send_packed_command(resp(wait.command(sent)), check_health=False)
        for _ in range(replies - 1):
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
