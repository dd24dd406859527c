"""Chatops: Slack slash commands answering "who holds GPU X" from the mirror's graph.

    config     SlackSettings (signing secret from a file or DRA_MIRROR_SLACK_SIGNING_SECRET)
    endpoint   POST /slack/commands: signature check, answer in 3 s or post to response_url
    commands   the command text parsed and answered
    blocks     Block Kit rendering

The questions, their GraphQL documents and the rows they give are `service.questions`
(`chatops`, `holdings`, `explain`), shared with the command line. The package reads the graph
only through those documents (in-process here, over HTTP in `service.cli.client`); it never
reads the stores itself.
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
