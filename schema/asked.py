"""The questions' answers in the graph: a `QuestionError` becomes a GraphQL error with its code.

    rows = await asked(history.device_history(info.context.asker, ...))

Resolvers that answer a question of `service.questions` await it through `asked`, so a bad
argument, history off or a store outage reaches the client as a GraphQL error whose
`extensions.code` says which (`BAD_INPUT`, `FORBIDDEN`, `HISTORY_DISABLED`,
`HISTORY_STORE_UNAVAILABLE`, `UNKNOWN_CLUSTER`…), never as an HTTP 500.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from graphql import GraphQLError

from dra_mirror.service.questions.asking import QuestionError

T = TypeVar("T")


def graphql_error(error: QuestionError) -> GraphQLError:
    return GraphQLError(str(error), extensions={"code": error.code})


async def asked(answer: Awaitable[T]) -> T:
    try:
        return await answer
    except QuestionError as error:
        raise graphql_error(error) from error
