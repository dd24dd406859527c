"""Chatops: Slack slash commands answering "who holds GPU X" from the mirror's graph.

    config     SlackSettings (signing secret from a file or DRA_MIRROR_SLACK_SIGNING_SECRET)
    endpoint   POST /slack/commands: signature check, answer in 3 s or post to response_url
    commands   the command text parsed and answered
    replies    the answers as Block Kit messages (facts: explanations, lint, history)
    blocks     Block Kit building blocks, help and errors

The questions and their answers are `service.questions` (`LocalQuestions`: read from the
store in this process, through the asker's scope), the very answers the graph, the MCP tools
and the command line give. This package never reads a store, nor asks the graph, itself.
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
