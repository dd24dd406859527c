"""How the command line asks a running mirror: GraphQL documents posted to its `/graphql`.

`run_question(server, token, question)` opens one HTTP client to `server` (`--token` sent as
`Authorization: Bearer …`), hands `question` the server's `Questions` over it
(`service.questions.remote.RemoteQuestions` over `over_http`) and runs it to its answer. Every
question is one of `service.questions`, so a terminal, Slack and the MCP tools give the same
answers.

Promises: whatever goes wrong reaching or asking the server — unreachable, 401/403, a status
other than 200, a body that is not GraphQL JSON, GraphQL errors — ends the command with exit
status 1 and the reason on stderr (`click.ClickException`), never a traceback; a cluster the
mirror does not know (`UNKNOWN_CLUSTER`) is a usage error, exit status 2, the known names
listed with the nearest one offered (`refusal`); a cluster not synced yet (`NOT_SYNCED`) ends
it with status 1 and "not synced yet: NAME" rather than an empty answer. A question about
every cluster (`every_cluster=True`) that left clusters out because they have not synced says
so on stderr ("not synced yet, left out: west").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click
import orjson

from dra_mirror.service.questions.asking import Ask, QuestionError, UnknownCluster
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


class UnknownClusterUsage(click.ClickException):
    """A `--cluster` the mirror does not know: a usage error (exit status 2)."""

    exit_code = 2


def refusal(error: QuestionError) -> click.ClickException:
    """How the command line ends on a question's error (see the module docstring)."""
    if error.code == UnknownCluster.code:
        return UnknownClusterUsage(str(error))
    return click.ClickException(str(error))


def warn_unsynced(names: list[str]) -> None:
    if names:
        click.echo(f"warning: not synced yet, left out: {', '.join(names)}", err=True)


def run_question(
    server: str,
    token: str | None,
    question: Callable[[Questions], Awaitable[T]],
    *,
    timeout: float = TIMEOUT,
    every_cluster: bool = False,
) -> T:
    """`question`'s answer from the mirror at `server`."""

    import httpx

    async def go() -> tuple[T, list[str]]:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(
            base_url=server.rstrip("/"), headers=headers, timeout=timeout
        ) as client:
            questions = RemoteQuestions(over_http(client))
            answer = await question(questions)
            return answer, (await questions.unsynced() if every_cluster else [])

    try:
        answer, late = asyncio.run(go())
    except QuestionError as error:
        raise refusal(error) from error
    warn_unsynced(late)
    return answer
