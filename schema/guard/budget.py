"""An execution budget enforced inside execution: time, resolved fields, the client leaving.

`budgeted_execution(max_fields=…, max_seconds=…)` returns the graphql-core execution context
class the schema executes with (strawberry's `execution_context_class`). Each query or
mutation execution gets a `Budget`, wired to graphql-core's abort signal:

* every resolved field is counted in `execute_field`; past `max_fields`, or past the deadline
  (checked every 128 fields, and by a timer for executions waiting on the store), the
  execution is aborted: graphql-core stops resolving, in-flight awaits are cancelled, and the
  answer is one error `execution budget exceeded` (code BUDGET_EXCEEDED) — never a huge
  partial answer;
* a request that registers a `RequestAborts` in its ASGI state (the HTTP guard does, and
  aborts it when the client disconnects or the request times out) aborts its executions too.

Subscriptions are not budgeted here (they live as long as their connection; the WebSocket
guard bounds how many a connection has).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any

from graphql import ExecutionResult, GraphQLError, OperationType
from graphql.execution.aborted_graphql_execution_error import AbortedGraphQLExecutionError
from graphql.pyutils import AbortController, Undefined
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

ABORTS_KEY = "dra_mirror.aborts"
CHECK_EVERY = 128


class BudgetExceeded(GraphQLError):
    def __init__(self, what: str) -> None:
        super().__init__(
            f"execution budget exceeded: {what}; ask for less (fewer fields, smaller pages)",
            extensions={"code": "BUDGET_EXCEEDED"},
        )


class ClientGone(GraphQLError):
    def __init__(self, why: str = "the client disconnected") -> None:
        super().__init__(f"execution stopped: {why}", extensions={"code": "REQUEST_ABORTED"})


class RequestAborts:
    """The abort controllers of one HTTP request's executions (a batch has several)."""

    def __init__(self) -> None:
        self.controllers: list[AbortController] = []
        self.reason: GraphQLError | None = None

    def add(self, controller: AbortController) -> None:
        if self.reason is not None:
            controller.abort(self.reason)
        self.controllers.append(controller)

    def abort(self, reason: GraphQLError) -> None:
        if self.reason is None:
            self.reason = reason
        for controller in self.controllers:
            controller.abort(reason)


class Budget:
    def __init__(self, *, max_fields: int, max_seconds: float) -> None:
        self.controller = AbortController()
        self.max_fields = max_fields
        self.deadline = time.monotonic() + max_seconds
        self.fields = 0
        self.reported = False
        self.timer: asyncio.TimerHandle | None = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self.timer = loop.call_later(max_seconds, self.exceed, f"over {max_seconds:g} s")

    def exceed(self, what: str) -> None:
        self.controller.abort(BudgetExceeded(what))

    def count(self) -> None:
        self.fields += 1
        if self.fields > self.max_fields:
            self.exceed(f"over {self.max_fields} fields resolved")
        elif not self.fields % CHECK_EVERY and time.monotonic() > self.deadline:
            self.exceed("out of time")

    def done(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def _request_aborts(context: Any) -> RequestAborts | None:
    request = getattr(context, "request", None)
    scope = getattr(request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    found = state.get(ABORTS_KEY) if isinstance(state, dict) else None
    return found if isinstance(found, RequestAborts) else None


def _aborted(error: AbortedGraphQLExecutionError) -> ExecutionResult:
    partial = error.aborted_result
    if inspect.iscoroutine(partial):
        partial.close()
    reason = error.reason
    found = reason if isinstance(reason, GraphQLError) else GraphQLError(str(error))
    return ExecutionResult(data=None, errors=[found])


def budgeted_execution(*, max_fields: int, max_seconds: float) -> type:
    class BudgetedExecutionContext(StrawberryGraphQLCoreExecutionContext):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.budget: Budget | None = None
            if self.operation.operation is OperationType.SUBSCRIPTION:
                return
            budget = Budget(max_fields=max_fields, max_seconds=max_seconds)
            self.budget = budget
            if self.abort_signal is None:
                self.abort_signal = budget.controller.signal
            aborts = _request_aborts(self.context_value)
            if aborts is not None:
                aborts.add(budget.controller)

        def execute_field(self, *args: Any, **kwargs: Any) -> Any:
            budget = self.budget
            if budget is not None:
                budget.count()
                if budget.controller.signal.aborted:
                    if budget.reported:
                        return Undefined
                    budget.reported = True
                    budget.done()
                    raise self.abort_error()
            return super().execute_field(*args, **kwargs)

        def execute_operation(self, *args: Any, **kwargs: Any) -> Any:
            # An aborted execution is one error and no data (never a partial answer), and it
            # is answered here rather than raised through strawberry's operation hooks.
            try:
                result = super().execute_operation(*args, **kwargs)
            except AbortedGraphQLExecutionError as error:
                return _aborted(error)
            if not self.is_awaitable(result):
                return result

            async def settled() -> Any:
                try:
                    return await result
                except AbortedGraphQLExecutionError as error:
                    return _aborted(error)

            return settled()

        def build_response(self, *args: Any, **kwargs: Any) -> Any:
            if self.budget is not None:
                self.budget.done()
            return super().build_response(*args, **kwargs)

    return BudgetedExecutionContext
