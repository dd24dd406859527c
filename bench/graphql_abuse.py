"""Abuse figures: hostile documents against the guarded app, time to refuse and memory.

    prlimit --as=4000000000 .venv/bin/python bench/graphql_abuse.py

Serves the test world (tests/schema/world.py) through the real app (ASGI, in process) with the
default limits and sends: the largest document refused by size, 10 MB of tokens (refused
before parsing), 1,000 aliases of `clusters { counts }`, a 20-level chain of lists, 60 levels
of fragments each spreading the next twice, deep JSON bodies, and random malformed documents
and variables. Prints, per attack, the status, the error code and the time to refuse, and
the process RSS before and after (floor: one ordinary query's time in the same run).
"""

from __future__ import annotations

import asyncio
import random
import resource
import string
import sys
import time
from pathlib import Path

import httpx
from asgi_lifespan import LifespanManager

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore
from tests.schema.conftest import load_world


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def chain(levels: int) -> str:
    inner = "name"
    for _ in range(levels // 5):
        inner = "devices { allocations { claim { consumers { node { " + inner + " } } } } }"
    return "{ deviceClasses { " + inner + " } }"


def fragments(levels: int) -> str:
    body = "".join(f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }} " for i in range(levels))
    return "query { ...F0 } " + body + f"fragment F{levels} on Query {{ a: clusters {{ name }} }}"


def attacks() -> list[tuple[str, bytes | dict]]:
    rng = random.Random(7)
    found: list[tuple[str, bytes | dict]] = [
        ("ordinary query (floor)", {"query": "{ clusters { name } }"}),
        ("document 100 KB + 1", {"query": "{ clusters { name } }" + " " * 100_000}),
        ("10 MB of tokens", b'{"query": "{ ' + b"a " * 5_000_000 + b'}"}'),
        ("50 MB body", b"x" * 50_000_000),
        (
            "1,000 aliases of clusters { counts }",
            {
                "query": "{ "
                + " ".join(f"a{i}: clusters {{ counts {{ devices }} }}" for i in range(1000))
                + " }"
            },
        ),
        ("20-level chain of lists", {"query": chain(20)}),
        ("60 levels of fragments spread twice", {"query": fragments(60)}),
        (
            "fragment cycle",
            {"query": "query { ...A } fragment A on Query { ...B } fragment B on Query { ...A }"},
        ),
        ("JSON nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000),
        ("body null", b"null"),
        (
            "variables of the wrong shape",
            {
                "query": "query($n: Int) { devices(first: $n) { totalCount } }",
                "variables": {"n": "x" * 10_000},
            },
        ),
    ]
    for i in range(20):
        junk = "".join(rng.choice(string.printable) for _ in range(rng.randint(1, 3000)))
        found.append((f"random document {i}", {"query": junk}))
    return found


async def main() -> None:
    store = MemoryStore()
    await load_world(store)
    app = compose_app(Settings(), store=store)
    before = rss_mb()
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m", timeout=60) as http:
            print(f"{'attack':42} {'status':>6} {'code':24} {'ms':>9}")
            worst = 0
            for name, body in attacks():
                started = time.perf_counter()
                if isinstance(body, bytes):
                    answer = await http.post(
                        "/graphql", content=body, headers={"content-type": "application/json"}
                    )
                else:
                    answer = await http.post("/graphql", json=body)
                elapsed = (time.perf_counter() - started) * 1000
                code = ""
                try:
                    errors = answer.json().get("errors") or []
                    code = (
                        (errors[0].get("extensions") or {}).get("code", "error") if errors else ""
                    )
                except ValueError:
                    code = answer.text[:24].strip()
                worst = max(worst, answer.status_code)
                print(f"{name[:42]:42} {answer.status_code:>6} {code[:24]:24} {elapsed:>9.1f}")
    after = rss_mb()
    print(f"\nRSS before {before:.0f} MB, after {after:.0f} MB; worst status {worst}")


if __name__ == "__main__":
    asyncio.run(main())
