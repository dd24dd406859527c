"""How a question reaches the graph: an `Ask` sends one GraphQL document and returns its data.

Every question of this package is a function of an `Ask`, so one question serves every front
end: Slack executes it on the app's own schema in-process (`in_process`, with the request's
context), the command line posts it to a running server's `/graphql` (`service.cli.asking`) or
executes it in-process over a store it filled itself, and the web page will do the same.

Errors: an `Ask` raises `QuestionError` when the graph refuses (a GraphQL error, an argument the
graph rejects, history off) or cannot be reached; front ends show its message as is.

Promises: no I/O here; `in_process` needs only something with strawberry's `Schema.execute`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

__all__ = ["Ask", "ExecutableSchema", "QuestionError", "in_process"]

Ask = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]


class QuestionError(Exception):
    """The graph refused the question (bad argument, history off, server unreachable...)."""


class ExecutableSchema(Protocol):
    """What `in_process` needs of a GraphQL schema (strawberry's `Schema` is one)."""

    async def execute(
        self, query: str, variable_values: dict[str, Any] | None = ..., context_value: Any = ...
    ) -> Any: ...


def in_process(schema: ExecutableSchema, context: Any) -> Ask:
    """An `Ask` executing documents on `schema` with one request's `context`."""

    async def ask(document: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        result = await schema.execute(
            document, variable_values=dict(variables), context_value=context
        )
        if result.errors:
            raise QuestionError("; ".join(e.message for e in result.errors))
        return result.data or {}

    return ask
