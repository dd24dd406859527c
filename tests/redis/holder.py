"""A minimal lease holder for the two-process lease tests (run: python -m tests.redis.holder).

`python -m tests.redis.holder URL PREFIX CLUSTER NAME TTL` holds CLUSTER's lease with the real
`hold_leases` loop and, while it holds it, writes one fenced batch every 20 ms through a real
`RedisStore`: a Node `n1` labelled holder=NAME, seq=N. It prints one line per fact the tests
wait for: `HOLDING <token>`, `WROTE <seq>` (first write after each acquisition), `FENCED`
(a write refused because the fence moved on), `LOST`.
"""

from __future__ import annotations

import asyncio
import sys

from dra_mirror.service.model.changes import Changes
from dra_mirror.service.model.records import Meta, NodeRecord
from dra_mirror.service.stores.lease import LeaseSettings, hold_leases
from dra_mirror.service.stores.redis import Fenced, RedisStore


def say(line: str) -> None:
    print(line, flush=True)


async def main(url: str, prefix: str, cluster: str, name: str, ttl: float) -> None:
    store = RedisStore.from_url(url, prefix=prefix)
    holding = asyncio.Event()
    seq = 0

    async def acquired(cluster: str, token: str) -> None:
        store.fence(cluster, token)
        say(f"HOLDING {token}")
        holding.set()

    async def lost(cluster: str) -> None:
        store.fence(cluster, "lost")
        holding.clear()
        say("LOST")

    async def write_forever() -> None:
        nonlocal seq
        first = True
        await holding.wait()  # never unfenced; after a loss the token refuses every write
        while True:
            await asyncio.sleep(0.02)
            if not holding.is_set():
                first = True
            seq += 1
            record = NodeRecord(
                meta=Meta(cluster=cluster, name="n1", labels={"holder": name, "seq": str(seq)})
            )
            try:
                await store.apply(Changes(cluster=cluster, at=str(seq), upserts=[record]))
            except Fenced:
                say("FENCED")
                store.fence(cluster, "lost")
                await asyncio.sleep(0.2)
                continue
            except Exception as error:  # Redis unreachable: try again
                say(f"ERROR {type(error).__name__}")
                continue
            if first:
                say(f"WROTE {seq}")
                first = False

    settings = LeaseSettings(ttl=ttl, renew_interval=ttl / 4, retry_interval=ttl / 5)
    writer = asyncio.create_task(write_forever())
    try:
        await hold_leases(store, [cluster], on_acquired=acquired, on_lost=lost, settings=settings)
    finally:
        writer.cancel()
        await store.close()


if __name__ == "__main__":
    url, prefix, cluster, name, ttl = sys.argv[1:6]
    asyncio.run(main(url, prefix, cluster, name, float(ttl)))
