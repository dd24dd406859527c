"""The Redis stream outbox's replies and its fenced append, apart from the outbox itself.

* `FENCED_APPEND` is the script that appends one entry of a cluster only while the cluster's
  field of the outbox's fences hash holds the appending writer's token; `appended(reply,
  cluster)` is the entry id it answered, or `OutboxFenced` for its two refusals (another
  token there; none at all: the outbox lost its data);
* `entries`, `pairs`, `split`, `payload`: XREADGROUP's and XAUTOCLAIM's replies (RESP2 lists
  or RESP3 dicts, parsed by redis-py or left as the server sent them: `unparsed`) as
  `(id, payload)` pairs, with the ids of entries deleted from the stream set apart.

Pure: no Redis call here (service.history.redis_outbox makes them).
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.stores.redis_writes import Fenced

# Append only while the cluster's field of the fences hash holds this writer's token. KEYS:
# stream, fences; ARGV: cluster, token, payload, maxlen ('' for none). The entry id, or 0 when
# another token is there, -1 when none is (the outbox lost its data: Redis came back empty).
FENCED_APPEND = """
local current = redis.call('HGET', KEYS[2], ARGV[1])
if current ~= ARGV[2] then
  if current then return 0 end
  return -1
end
if ARGV[4] ~= '' then
  return redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*', 'e', ARGV[3])
end
return redis.call('XADD', KEYS[1], '*', 'e', ARGV[3])
"""


class OutboxFenced(Fenced):
    """An append refused: the cluster's fence in the outbox is not this writer's token.
    `lost`: no token at all — the outbox lost its data (Redis came back empty)."""

    def __init__(self, message: str, *, lost: bool) -> None:
        super().__init__(message)
        self.lost = lost


def entry_id(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def appended(reply: Any, cluster: str | None) -> str:
    """The id an append answered, or `OutboxFenced` for the fenced script's refusals."""
    if isinstance(reply, int):
        lost = reply < 0
        raise OutboxFenced(
            f"history outbox: appends of {cluster} refused: "
            + ("the outbox lost its entries (no fence)" if lost else "another writer holds it"),
            lost=lost,
        )
    return entry_id(reply)


def payload(fields: Any) -> bytes | None:
    """The `e` field of an entry: fields as redis-py parses them (a dict) or as the server
    sent them (a flat list, XREADGROUP here); None when the entry was deleted."""
    if not fields:
        return None
    if isinstance(fields, dict):
        return fields.get(b"e")
    for name, value in zip(fields[::2], fields[1::2], strict=True):
        if name == b"e":
            return value
    return None


def pairs(raw: Any) -> list[tuple[str, bytes | None]]:
    return [(entry_id(found), payload(fields)) for found, fields in raw or ()]


def unparsed(response: Any, **options: Any) -> Any:
    return response


def entries(reply: Any) -> list[tuple[str, bytes | None]]:
    """XREADGROUP's reply (RESP2 list or RESP3 dict) as (id, payload or None)."""
    if not reply:
        return []
    streams = reply.items() if isinstance(reply, dict) else reply
    out: list[tuple[str, bytes | None]] = []
    for _key, raw in streams:
        out.extend(pairs(raw))
    return out


def split(found: list[tuple[str, bytes | None]]) -> tuple[list[tuple[str, bytes]], list[str]]:
    present = [(key, data) for key, data in found if data is not None]
    gone = [key for key, data in found if data is None]
    return present, gone
