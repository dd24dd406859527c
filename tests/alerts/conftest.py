"""The alerts' fake Slack Web API: every method answered ok (or refused while `fail` is set),
each call recorded, served by uvicorn on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.slack.conftest import served


class FakeSlack:
    def __init__(self) -> None:
        self.url = ""
        self.calls: list[tuple[str, dict]] = []
        self.fail = False

    async def method(self, request: Request) -> JSONResponse:
        name = request.path_params["method"]
        body = await request.json()
        if self.fail:
            return JSONResponse({"ok": False, "error": "ratelimited"})
        self.calls.append((name, body))
        return JSONResponse({"ok": True, "channel": "C0ALERTS", "ts": f"{len(self.calls)}.0001"})


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    async with served(
        Starlette(routes=[Route("/api/{method}", fake.method, methods=["POST"])])
    ) as url:
        fake.url = url
        yield fake
