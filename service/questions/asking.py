"""The errors of the questions, and how a question reaches a mirror in another process.

Errors (every front end shows the message as it is):

    QuestionError             the question cannot be answered; the message says why
    ├── BadQuestion           the asker's input cannot be used (YAML, a selector, a time)
    ├── UnknownCluster        a cluster the asker named is not mirrored, or not in their scope
    ├── HistoryOff            history is not configured, or not in the asker's scope
    └── QuestionUnavailable   the state store or the history database cannot be reached now

`Ask` is how the command line and the MCP stdio server reach a running mirror: one GraphQL
document and its variables in, the `data` out (`service.cli.asking.over_http`); a refusal of
the graph or of the server raises `QuestionError`. In the mirror's own process the questions
read the store (`service.questions.local`), never the graph.

Promises: no I/O here.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "Ask",
    "BadQuestion",
    "HistoryOff",
    "QuestionError",
    "QuestionUnavailable",
    "UnknownCluster",
]

Ask = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]


class QuestionError(Exception):
    """The question cannot be answered (bad argument, history off, server unreachable...).
    `code` is what the graph puts in the error's `extensions.code`."""

    code = "QUESTION_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class BadQuestion(QuestionError):
    """The asker's input cannot be used; the message says why."""

    code = "BAD_INPUT"


class HistoryOff(QuestionError):
    """History is not configured (`HISTORY_DISABLED`), or not in the asker's scope
    (`FORBIDDEN`)."""

    code = "HISTORY_DISABLED"


class QuestionUnavailable(QuestionError):
    """The state store or the history database cannot be reached now: try again later."""

    code = "STORE_UNAVAILABLE"


class UnknownCluster(QuestionError):
    """A cluster name that names no cluster the asker may see: the known ones listed, and the
    nearest one offered."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = sorted(known)
        near = difflib.get_close_matches(name, self.known, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        listed = ", ".join(self.known) or "none"
        super().__init__(f"no cluster named {name!r} (clusters: {listed}){hint}")

    code = "UNKNOWN_CLUSTER"
