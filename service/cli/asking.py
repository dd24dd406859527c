"""How the command line asks a running mirror: GraphQL documents posted to its `/graphql`.

`run_question(server, token, question)` opens one HTTP client to `server` (`--token` sent as
`Authorization: Bearer …`), hands `question` the server's `Questions` over it
(`service.questions.remote.RemoteQuestions` over `over_http`) and runs it to its answer. Every
question is one of `service.questions`, so a terminal, Slack and the MCP tools give the same
answers.

Promises: whatever goes wrong reaching or asking the server — unreachable, 401/403, a status
other than 200, a body that is not GraphQL JSON, GraphQL errors — ends the command with exit
status 1 and the reason on stderr (`click.ClickException`), never a traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from dra_mirror.service.questions.asking import Ask, QuestionError
from dra_mirror.service.questions.protocol import Questions
from dra_mirror.service.questions.remote import RemoteQuestions

if TYPE_CHECKING:  # httpx is imported when a command asks (it costs `serve` ~0.1 s at start)
    import httpx

DEFAULT_SERVER = "http://127.0.0.1:8000"
TIMEOUT = 30.0

T = TypeVar("T")


def over_http(client: httpx.AsyncClient) -> Ask:
    """An `Ask` posting documents to the server's `/graphql`."""

    import httpx

    async def ask(document: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        try:
            response = await client.post(
                "/graphql", json={"query": document, "variables": dict(variables)}
            )
        except httpx.HTTPError as error:
            raise QuestionError(f"cannot reach {client.base_url}: {error}") from error
        if response.status_code in (401, 403):
            raise QuestionError(f"{client.base_url} refused: {response.status_code} (--token?)")
        if response.status_code != 200:
            raise QuestionError(f"{client.base_url} answered {response.status_code}")
        try:
            body = orjson.loads(response.content)
        except orjson.JSONDecodeError as error:
            raise QuestionError(f"{client.base_url} did not answer GraphQL JSON") from error
        errors = body.get("errors")
        if errors:
            codes = [(e.get("extensions") or {}).get("code") for e in errors]
            raise QuestionError(
                "; ".join(e.get("message", "?") for e in errors), code=codes[0] or None
            )
        data = body.get("data")
        if not isinstance(data, dict):
            raise QuestionError(f"{client.base_url} gave no data")
        return data

    return ask


def run_question(
    server: str,
    token: str | None,
    question: Callable[[Questions], Awaitable[T]],
    *,
    timeout: float = TIMEOUT,
) -> T:
    """`question`'s answer from the mirror at `server`."""

    import httpx

    async def go() -> T:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(
            base_url=server.rstrip("/"), headers=headers, timeout=timeout
        ) as client:
            return await question(RemoteQuestions(over_http(client)))

    try:
        return asyncio.run(go())
    except QuestionError as error:
        raise click.ClickException(str(error)) from error
