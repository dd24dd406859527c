"""`dra-mirror mcp`: the MCP tools over stdio, for an agent running on this machine.

    dra-mirror mcp [--server URL] [--token T]

An MCP client (an IDE, a desktop agent) starts this command and speaks MCP on its stdin and
stdout; each tool call is asked of the mirror at `--server` (default `$DRA_MIRROR_SERVER` or
http://127.0.0.1:8000) over `/graphql` (`RemoteQuestions`) with `--token` (`$DRA_MIRROR_TOKEN`)
as the bearer, so the answers are what that token's scope may see — the same tools as the server's `/mcp`
(`service.mcp`, built by `service.runtime.standalone`). Nothing but MCP is written to stdout;
logs go to stderr.
"""

from __future__ import annotations

import asyncio

import click

from dra_mirror.service.cli.asking import DEFAULT_SERVER, TIMEOUT, over_http
from dra_mirror.service.questions.remote import RemoteQuestions


async def serve_stdio(server_url: str, token: str | None) -> None:
    import httpx  # the client command's, not loaded by the commands that serve

    from dra_mirror.service.runtime.standalone import serve_mcp_stdio  # the MCP SDK, this command's

    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(
        base_url=server_url.rstrip("/"), headers=headers, timeout=TIMEOUT
    ) as http:
        questions = RemoteQuestions(over_http(http))

        async def questions_for(_ctx: object) -> RemoteQuestions:
            return questions

        await serve_mcp_stdio(questions_for)


@click.command("mcp")
@click.option(
    "--server",
    envvar="DRA_MIRROR_SERVER",
    default=DEFAULT_SERVER,
    show_default=True,
    help="The mirror the tools ask [env DRA_MIRROR_SERVER].",
)
@click.option("--token", envvar="DRA_MIRROR_TOKEN", default=None, help="Bearer token.")
def mcp(server: str, token: str | None) -> None:
    """Serve the mirror's questions as MCP tools on stdio (for a local agent)."""
    asyncio.run(serve_stdio(server, token))
