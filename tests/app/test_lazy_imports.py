"""What a mirror without OIDC, Kubernetes review, Slack or Redis does not load: PyJWT, httpx,
slack_sdk, the access package's kubernetes_asyncio client, the Redis client, the Redis store
and its leases, the MCP SDK until /mcp is first asked, and never kubernetes_asyncio's generated
API and model modules (memory and start-up time of every `serve`)."""

from __future__ import annotations

import json
import subprocess
import sys


def loaded_after(module: str, names: list[str]) -> list[str]:
    code = f"import sys, {module}; print(' '.join(n for n in {names!r} if n in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    return out.stdout.split()


def test_access_control_loads_no_jwt_httpx_or_kubernetes_client():
    names = ["jwt", "httpx", "aiohttp", "kubernetes_asyncio"]
    assert loaded_after("dra_mirror.service.access.control", names) == []


def test_the_runtime_loads_no_jwt_and_no_slack_notifier():
    names = ["jwt", "dra_mirror.service.alerts.slack"]
    assert loaded_after("dra_mirror.service.runtime.mirror", names) == []


def test_serve_loads_no_httpx_jwt_or_slack_sdk():
    names = [
        "jwt",
        "httpx",
        "slack_sdk",
        "kubernetes_asyncio.client.api",
        "kubernetes_asyncio.client.models.v1_pod",
        "redis",
        "dra_mirror.service.stores.redis",
        "dra_mirror.service.stores.lease",
        "dra_mirror.service.reactor.leased",
        "mcp",
        "pydantic",
    ]
    assert (
        loaded_after("dra_mirror.service.cli.main, dra_mirror.service.runtime.mirror", names) == []
    )


def test_a_started_serve_without_slack_loads_no_slack_sdk():
    code = """
import asyncio, dataclasses, sys
from asgi_lifespan import LifespanManager
from dra_mirror.service.access.config import load
from dra_mirror.service.runtime.mirror import mirror_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore

async def main():
    settings = Settings()
    access = dataclasses.replace(settings.access, insecure_no_auth=True)
    settings = dataclasses.replace(settings, access=access)
    app = mirror_app(settings, store=MemoryStore(), watch=False, access=load(access))
    async with LifespanManager(app):
        print(app.state.mirror.access is not None, "slack_sdk" in sys.modules)

asyncio.run(main())
"""
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.split() == ["True", "False"]  # access opened, Slack's client not loaded


def test_the_mcp_sdk_loads_with_the_first_mcp_request():
    code = """
import asyncio, json, sys, threading
import httpx

importing_threads = set()
class Watch:  # records which thread first imports the SDK
    def find_spec(self, name, path=None, target=None):
        if name == "mcp":
            importing_threads.add(threading.current_thread() is threading.main_thread())
        return None
sys.meta_path.insert(0, Watch())
from asgi_lifespan import LifespanManager
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore

async def main():
    app = compose_app(Settings(), store=MemoryStore())
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"accept": "application/json, text/event-stream"}
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            before = "mcp" in sys.modules
            answers = await asyncio.gather(
                *(http.post("/mcp", json=listing, headers=headers) for _ in range(3))
            )
    tools = [sorted(t["name"] for t in a.json()["result"]["tools"]) for a in answers]
    print(json.dumps({"before": before, "after": "mcp" in sys.modules,
                      "statuses": [a.status_code for a in answers],
                      "same": all(t == tools[0] for t in tools), "who_holds": "who_holds" in tools[0],
                      "in_main_thread": sorted(importing_threads)}))

asyncio.run(main())
"""
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {
        "before": False,
        "after": True,
        "statuses": [200, 200, 200],  # three first requests at once: one manager starts
        "same": True,
        "who_holds": True,
        "in_main_thread": [False],  # loaded in a worker thread: the event loop goes on meanwhile
    }


def test_serve_s_app_starts_its_watchers_before_strawberry_and_the_schema_load():
    # `serve` builds its app with the GraphQL side built in the lifespan, in a worker thread,
    # after the watchers started: their first LISTs are on their way meanwhile. The app
    # answers GraphQL (and /mcp's tools) once started; a bad registered document still stops
    # the start.
    code = """
import asyncio, json, sys, threading
import httpx
from asgi_lifespan import LifespanManager
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore

seen = {}
schema_threads = set()
class Watch:  # records which thread imports the schema package
    def find_spec(self, name, path=None, target=None):
        if name == "dra_mirror.schema":
            schema_threads.add(threading.current_thread() is threading.main_thread())
        return None
sys.meta_path.insert(0, Watch())

async def start_reactors():
    seen["at_watchers"] = "strawberry" in sys.modules or "graphql" in sys.modules
    return None

async def main():
    app = compose_app(Settings(), store=MemoryStore(), watchers=start_reactors,
                     graphql_in_lifespan=True)
    seen["at_build"] = "strawberry" in sys.modules or "graphql" in sys.modules
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://mirror") as http:
            answer = await http.post("/graphql", json={"query": "{ __typename }"})
            seen["answer"] = answer.json()
            seen["get"] = (await http.get("/graphql?query={__typename}")).json()
    seen["schema_in_main_thread"] = sorted(schema_threads)
    print(json.dumps(seen))

asyncio.run(main())
"""
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "at_build": False,
        "at_watchers": False,
        "answer": {"data": {"__typename": "Query"}},
        "get": {"data": {"__typename": "Query"}},
        "schema_in_main_thread": [False],
    }
