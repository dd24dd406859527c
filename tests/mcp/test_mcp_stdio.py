"""`dra-mirror mcp` over stdio, driven by the `mcp` SDK's own stdio client: the installed
console script in a subprocess, asking a mirror served by uvicorn on loopback."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from tests.plan.conftest import demo_world
from tests.plan.test_plan import deployment
from tests.slack.conftest import served

DRA_MIRROR = str(Path(sys.executable).with_name("dra-mirror"))


async def test_the_tools_over_stdio() -> None:
    world = await demo_world()
    async with served(compose_app(Settings(), store=world.store)) as url:
        params = StdioServerParameters(command=DRA_MIRROR, args=["mcp", "--server", url])
        async with Client(params) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"who_holds", "plan", "why_pending"} <= tools
            holds = await session.call_tool("who_holds", {"device": "east-h200-1/gpu-0"})
            assert holds.structured_content["holdings"][0]["claim"] == "research/notebook-gpu"
            plan = await session.call_tool("plan", {"manifests": deployment("trainer-b", 1)})
            clusters = {c["cluster"]: c for c in plan.structured_content["clusters"]}
            assert clusters["east"]["placeable"] and not clusters["west"]["placeable"]
