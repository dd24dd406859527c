"""The execution budget interrupts a pending await at once, and costs no task per resolver."""

from __future__ import annotations

import asyncio
import time

import strawberry

from dra_mirror.schema.guard.budget import budgeted_execution

tasks: list[asyncio.Task | None] = []


@strawberry.type
class Query:
    @strawberry.field
    async def quick(self) -> str:
        tasks.append(asyncio.current_task())
        await asyncio.sleep(0)
        return "ok"

    @strawberry.field
    async def hang(self) -> str:
        await asyncio.Event().wait()
        return "never"


def schema(max_seconds: float) -> strawberry.Schema:
    context = budgeted_execution(max_fields=100, max_seconds=max_seconds)
    return strawberry.Schema(query=Query, execution_context_class=context)


async def test_resolvers_run_in_the_executing_task():
    tasks.clear()
    result = await schema(5).execute("{ quick }")  # several fields: graphql-core gathers them
    assert result.errors is None and result.data == {"quick": "ok"}
    assert tasks == [asyncio.current_task()]


async def test_the_deadline_interrupts_a_hanging_resolver():
    began = time.monotonic()
    result = await schema(0.1).execute("{ quick hang }")
    assert time.monotonic() - began < 2
    assert result.data is None and result.errors
    assert result.errors[0].extensions["code"] == "BUDGET_EXCEEDED"
    assert asyncio.current_task().cancelling() == 0  # the interruption is taken back
