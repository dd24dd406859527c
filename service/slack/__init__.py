"""Chatops: Slack slash commands answering "who holds GPU X" from the mirror's graph.

    config     SlackSettings (signing secret from a file or DRA_MIRROR_SLACK_SIGNING_SECRET)
    endpoint   POST /slack/commands: signature check, answer in 3 s or post to response_url
    commands   the command text parsed and answered
    questions  the GraphQL documents and the rows they give (shared with the CLI client)
    holdings   who-holds: whoHolds as rows, holding since from history
    explain    explainClaim asked through introspection (its shape belongs to diagnostics)
    blocks     Block Kit rendering

The package reads the graph only through GraphQL documents (in-process here, over HTTP in
`service.cli_client`); it never reads the stores itself.
"""

from typing import Any

from .config import SigningSecret, SlackSettings

__all__ = ["SigningSecret", "SlackCommands", "SlackSettings"]


def __getattr__(name: str) -> Any:
    # The endpoint pulls in Starlette and slack_sdk; the CLI client needs neither, so they
    # load only when the app asks for the endpoint.
    if name == "SlackCommands":
        from .endpoint import SlackCommands

        return SlackCommands
    raise AttributeError(name)
