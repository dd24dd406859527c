"""Bench: Slack slash commands on the 5,000-node scenario — reply time, and how many GraphQL
documents each command runs in-process.

    prlimit --as=6000000000 .venv/bin/python bench/slack_questions.py [--scenario scale-5000]
        [--repeat 3]

The scenario's objects (the simulator's generator) are normalized by the model and folded into
a MemoryStore as a reactor would (the state after the initial sync); the app is composed over
it with Slack commands on and driven in this process through its ASGI interface (no sockets),
with requests signed as Slack signs them. Per command it prints the median reply time of
`--repeat` requests (after one warm-up) and the GraphQL executions each request made (strawberry's
`Schema.execute` counted): the questions read the store themselves, so a command should run none.

Floor, measured in the same run: `help` (signature check, scope, reply; no question) — what
the endpoint itself costs; and, for `who-holds NODE/gpu-3`, the bare store reads of who holds
(`resolve_devices` then `holdings_of`) without any answer built.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any
from urllib.parse import urlencode

SECRET = "bench-signing-secret"


def signed(text: str) -> tuple[bytes, dict[str, str]]:
    from slack_sdk.signature import SignatureVerifier

    form = {"command": "/gpu", "text": text, "user_id": "U1", "team_id": "T1",
            "response_url": "https://hooks.slack.com/commands/T1/1/x"}  # fmt: skip
    body = urlencode(form).encode()
    ts = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body)
    return body, {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": ts,
        "x-slack-signature": signature or "",
    }


async def load(scenario: str) -> tuple[Any, int]:
    from dra_mirror.service.model.index import MODIFIED, Event
    from dra_mirror.service.model.normalize import normalize
    from dra_mirror.service.sim.scenario import build_world, load_scenario
    from dra_mirror.service.stores.memory import MemoryStore
    from dra_mirror.service.stores.protocols import ClusterStatus

    kinds = {"nodes": "Node", "deviceclasses": "DeviceClass", "resourceslices": "ResourceSlice",
             "resourceclaimtemplates": "ResourceClaimTemplate", "resourceclaims": "ResourceClaim",
             "pods": "Pod"}  # fmt: skip
    world = build_world(load_scenario(scenario))
    store = MemoryStore()
    count = 0
    for name, cluster in world.stores.items():
        records = [normalize(kind, raw, cluster=name) for plural, kind in kinds.items()
                   for raw in cluster.list(plural)]  # fmt: skip
        count += len(records)
        index = store.open_index(name)
        await store.apply(index.apply([Event(MODIFIED, r) for r in records],
                                      at="2026-01-01T00:00:00Z"))  # fmt: skip
        await store.set_status(ClusterStatus(name=name, connected=True, synced=True))
    return store, count


def app_over(store: Any) -> Any:
    from dra_mirror.service.settings import Settings
    from dra_mirror.service.slack import SigningSecret, SlackSettings

    slack = SlackSettings(signing_secret=SigningSecret(SECRET), answer_within=600.0)
    try:
        from dra_mirror.service.runtime.compose import compose_app
    except ImportError:  # a tree from before the composition root
        from dra_mirror.service.http.app import create_app

        return create_app(Settings(), store=store, slack=slack)
    return compose_app(Settings(), store=store, slack=slack)


async def main(scenario: str, repeat: int) -> None:
    import httpx
    import strawberry
    from asgi_lifespan import LifespanManager

    from dra_mirror.service.runtime.mirror import freeze_heap
    from dra_mirror.service.stores.protocols import Relation

    started = time.perf_counter()
    store, count = await load(scenario)
    freeze_heap()
    print(f"{scenario}: {count:,} objects loaded in {time.perf_counter() - started:.1f} s")
    cluster = (await store.clusters())[0].name
    node = sorted(n.meta.name for n in await store.list("Node", cluster=cluster))[42]
    executions = 0
    execute = strawberry.Schema.execute

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal executions
        executions += 1
        return await execute(self, *args, **kwargs)

    strawberry.Schema.execute = counted  # type: ignore[method-assign]
    commands = ["help", f"who-holds {node}/gpu-3", "who-holds gpu-0", "free",
                "free gpu.nvidia.com", "waiting", "idle", "explain team-00/x", "capacity"]  # fmt: skip
    app = app_over(store)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m", timeout=600) as http:
            for text in commands:
                times, runs = [], []
                for i in range(repeat + 1):
                    body, headers = signed(text)
                    executions = 0
                    begin = time.perf_counter()
                    response = await http.post("/slack/commands", content=body, headers=headers)
                    took = time.perf_counter() - begin
                    assert response.status_code == 200, response.text
                    if i:
                        times.append(took)
                        runs.append(executions)
                reply = response.json()["text"][:60]
                print(f"{text:32} {statistics.median(times) * 1000:9.2f} ms"
                      f"  {max(runs)} GraphQL execution(s)  | {reply}")  # fmt: skip
    from dra_mirror.service.questions.holders import holdings_of, resolve_devices

    floor = []
    for _ in range(repeat):
        begin = time.perf_counter()
        keys = await resolve_devices(store, f"{node}/gpu-3", cluster=None)
        await holdings_of(store, keys)
        await store.lookup(Relation.DEVICE_ALLOCATIONS, keys)
        floor.append(time.perf_counter() - begin)
    print(f"floor: who-holds store reads      {statistics.median(floor) * 1000:9.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="scale-5000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.scenario, args.repeat))
