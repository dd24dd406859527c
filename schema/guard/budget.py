"""An execution budget enforced inside execution: time, resolved fields, the client leaving.

`budgeted_execution(max_fields=…, max_seconds=…)` returns the graphql-core execution context
class the schema executes with (strawberry's `execution_context_class`). Each query or
mutation execution gets a `Budget`, wired to graphql-core's abort signal:

* every resolved field is counted (`admit_field`, asked before each field executes); past
  `max_fields`, or past the deadline (checked every 128 fields, and by a timer for
  executions waiting on the store), the execution is aborted: graphql-core stops resolving,
  in-flight awaits are cancelled (the `InterruptingController` cancels the tasks awaiting
  them), and the answer is one error `execution budget exceeded` (code BUDGET_EXCEEDED) —
  never a huge partial answer;
* a request that registers a `RequestAborts` in its ASGI state (the HTTP guard does, and
  aborts it when the client disconnects or the request times out) aborts its executions too,
  and its executions share ONE budget: the operations of a batch count their fields together
  against `max_fields` and run within one `max_seconds` from the first one's start (each of
  ten operations is not given the whole budget again).

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
from graphql.pyutils import AbortController

from dra_mirror.schema.execution import PlainFieldsExecution

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
    """The abort controllers of one HTTP request's executions (a batch has several), and the
    one budget they share (`budget`)."""

    def __init__(self) -> None:
        self.controllers: list[AbortController] = []
        self.reason: GraphQLError | None = None
        self.shared: Budget | None = None

    def budget(self, *, max_fields: int, max_seconds: float) -> Budget:
        """The request's budget: made by its first execution, shared by the others."""
        if self.shared is None:
            self.shared = Budget(max_fields=max_fields, max_seconds=max_seconds)
            self.shared.users = 0
            self.add(self.shared.controller)
        self.shared.users += 1
        return self.shared

    def add(self, controller: AbortController) -> None:
        if self.reason is not None:
            controller.abort(self.reason)
        self.controllers.append(controller)

    def abort(self, reason: GraphQLError) -> None:
        if self.reason is None:
            self.reason = reason
        for controller in self.controllers:
            controller.abort(reason)


class InterruptingController(AbortController):
    """An abort controller that also cancels the tasks awaiting inside the execution's abort
    regions (`with_abort_signal`), so an abort interrupts a pending await at once. graphql-core
    gets there by racing every awaited resolver against the signal in two tasks of its own and
    `asyncio.wait`; this costs no task at all until an abort. The task that aborts (a field
    past the budget, counted in its own task) is not cancelled: it sees the signal at its next
    field."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: dict[asyncio.Task[Any], int] = {}  # task -> regions it is inside
        self.interrupted: set[asyncio.Task[Any]] = set()

    def abort(self, reason: Any = None) -> None:
        if self.signal.aborted:
            return
        super().abort(reason)
        try:
            current = asyncio.current_task()
        except RuntimeError:  # no event loop: no region is awaiting
            current = None
        for task in list(self.waiting):
            if task is not current and not task.done():
                self.interrupted.add(task)
                task.cancel()

    async def region(self, awaitable: Any, abort_error: Any) -> Any:
        """Await `awaitable`; an abort meanwhile raises `abort_error()` instead."""
        task = asyncio.current_task()
        assert task is not None
        waiting = self.waiting
        waiting[task] = waiting.get(task, 0) + 1
        try:
            return await awaitable
        except asyncio.CancelledError:
            if task in self.interrupted:
                self.interrupted.discard(task)
                if task.uncancel() == 0:  # no one else cancelled it
                    raise abort_error() from None
            raise
        finally:
            left = waiting[task] - 1
            if left:
                waiting[task] = left
            else:
                del waiting[task]


class Budget:
    def __init__(self, *, max_fields: int, max_seconds: float) -> None:
        self.controller = InterruptingController()
        self.max_fields = max_fields
        self.deadline = time.monotonic() + max_seconds
        self.fields = 0
        self.users = 1  # executions using it; the timer goes when the last is done
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
        self.users -= 1
        if self.users <= 0 and self.timer is not None:
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
    class BudgetedExecutionContext(PlainFieldsExecution):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.budget: Budget | None = None
            self.reported = False  # this execution raised the abort once
            self.finished = False
            if self.operation.operation is OperationType.SUBSCRIPTION:
                return
            aborts = _request_aborts(self.context_value)
            if aborts is not None:  # one budget for every execution of the request
                budget = aborts.budget(max_fields=max_fields, max_seconds=max_seconds)
            else:
                budget = Budget(max_fields=max_fields, max_seconds=max_seconds)
            self.budget = budget
            if self.abort_signal is None:
                self.abort_signal = budget.controller.signal

        def admit_field(self) -> bool:
            # every field, plain or not (schema.execution asks before each)
            budget = self.budget
            if budget is None:
                return True
            budget.count()
            if not budget.controller.signal.aborted:
                return True
            if self.reported:
                return False
            self.reported = True
            self._finish()
            raise self.abort_error()

        def _finish(self) -> None:
            if self.budget is not None and not self.finished:
                self.finished = True
                self.budget.done()

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

        def _interrupting(self) -> InterruptingController | None:
            budget = self.budget
            if budget is None or self.abort_signal is not budget.controller.signal:
                return None
            return budget.controller

        async def with_abort_signal(self, awaitable: Any) -> Any:
            # graphql-core's race of each awaited resolver, without its two tasks
            controller = self._interrupting()
            if controller is None or controller.signal.aborted:
                return await super().with_abort_signal(awaitable)
            return await controller.region(awaitable, self.abort_error)

        async def with_aborted_execution_error(self, awaitable: Any) -> Any:
            # The operation settles once its pending awaits are interrupted (their regions
            # raise the abort); an aborted one is then rejected as graphql-core rejects it.
            if self._interrupting() is None:
                return await super().with_aborted_execution_error(awaitable)
            result = await awaitable
            if self.abort_signal is not None and self.abort_signal.aborted:
                raise self.create_aborted_execution_error(result)
            return result

        def build_response(self, *args: Any, **kwargs: Any) -> Any:
            self._finish()
            return super().build_response(*args, **kwargs)

    return BudgetedExecutionContext
