"""What a slash command's text asks, answered as a Block Kit message.

    who-holds <uuid | node/device | driver/pool/device | device> [cluster]
    free [class] [cluster]          waiting [class] [cluster]          idle [cluster]
    explain <namespace/claim> [cluster]          help

`answer(ask, text)` parses the text, asks the graph (`service.questions`) and renders the
reply (`service.slack.blocks`). Promises: it never raises for anything a person can type —
unknown commands, missing arguments, unknown classes or clusters and refusals of the graph all
come back as a message saying what went wrong.
"""

from __future__ import annotations

from datetime import datetime

from dra_mirror.service.questions.chatops import (
    Ask,
    QuestionError,
    ask_free,
    ask_idle,
    ask_waiting,
    read_scope,
)
from dra_mirror.service.questions.explain import ask_explain
from dra_mirror.service.questions.holdings import ask_who_holds

from . import blocks

ALIASES = {"whoholds": "who-holds", "who": "who-holds", "holds": "who-holds", "pending": "waiting"}


async def answer(
    ask: Ask,
    text: str,
    *,
    command: str = "/gpu",
    now: datetime | None = None,
    history: bool = True,
) -> blocks.Message:
    """The reply to `text`; `now` is the clock of "2h ago", `history` whether to ask the
    history fields (holding since) at all."""
    words = text.split()
    if not words or words[0].lower() in {"help", "-h", "--help", "?"}:
        return blocks.render_help(command)
    name = ALIASES.get(words[0].lower(), words[0].lower())
    args = words[1:]
    try:
        if name == "who-holds":
            if not args or len(args) > 2:
                raise QuestionError(f"usage: {command} who-holds <uuid | node/device | device>")
            return blocks.render_who_holds(
                await ask_who_holds(
                    ask,
                    args[0],
                    args[1] if len(args) > 1 else None,
                    history=history,
                    brief_when_ambiguous=True,
                ),
                now,
            )
        if name in {"free", "waiting"}:
            scope = await read_scope(ask, args)
            if scope.unknown:
                raise QuestionError(f"{' '.join(scope.unknown)}: no such class or cluster")
            if name == "free":
                return blocks.render_free(await ask_free(ask, scope.class_name, scope.cluster))
            return blocks.render_waiting(await ask_waiting(ask, scope.class_name, scope.cluster))
        if name == "idle":
            scope = await read_scope(ask, args)
            if scope.unknown or scope.class_name:
                raise QuestionError(f"{' '.join(args)}: no such cluster")
            return blocks.render_idle(await ask_idle(ask, scope.cluster), now)
        if name == "explain":
            return blocks.render_explain(await ask_explain(ask, args), args[0] if args else "")
    except QuestionError as error:
        return blocks.render_error(str(error))
    unknown = blocks.render_help(command)
    unknown["blocks"].insert(0, blocks.section(f"Unknown command `{blocks.escape(words[0])}`."))
    unknown["text"] = blocks.escape(f"Unknown command {words[0]}")
    return unknown
