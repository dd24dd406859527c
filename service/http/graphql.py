"""The GraphQL endpoint: strawberry's ASGI view, with a short path for queries over HTTP.

`MirrorGraphQL(schema, state=..., graphiql=...)` serves `/graphql` over HTTP (GET and POST)
and WebSocket (subscriptions). Every request gets a fresh typed context
(`schema.context.make_context`: the request's access scope, fresh DataLoaders), responses are
encoded with orjson, and each operation's latency is observed by operation name
(`state.metrics.timed_operation`).

A query over HTTP — a JSON POST, or a GET with `query` or a persisted-query extension — takes
the short path: the body is read with orjson, the document comes prepared from the
`DocumentCache` (parsed and validated once per distinct text, bounded in bytes), persisted
queries are resolved against the `PersistedQueries` registry (Apollo's protocol:
`service.http.persisted`), and the operation runs on graphql-core's executor exactly as
strawberry's `Schema.execute` would run it (same executor class, same error logging and
response shape) — without strawberry's per-request extension and request-adapter machinery,
most of a small query's cost. Everything else goes to strawberry's view unchanged: WebSocket
subscriptions, GraphiQL, batches, multipart, mutations and subscriptions over HTTP, malformed
requests (its 400 answers), clients asking for `application/graphql-response+json` — except
a subscription, which over HTTP is a 400 naming the WebSocket it is served on. So does
every request when the schema carries extensions or directives whose work the short path
would skip. The guards (`schema.guard`) it does itself: the document limits before parsing,
the token limit while parsing, the shape limits before executing, the execution budget (the
schema's execution context class), the error masking after; a document the guards or
validation refuse is handed to strawberry's view, which answers it exactly as it always does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import orjson
from cross_web import HTTPException
from graphql import ExecutionResult, OperationType, execute
from starlette.requests import Request
from starlette.types import Receive, Scope, Send
from strawberry.asgi import GraphQL
from strawberry.execution import optimized_is_awaitable
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache

from dra_mirror.schema.context import Context, make_context
from dra_mirror.schema.guard.errors import ShortPathChecked, masked
from dra_mirror.schema.guard.limits import batch_refusal, document_refusal, shape_refusal
from dra_mirror.schema.reader import ReadScope
from dra_mirror.service.http.access import subject_of
from dra_mirror.service.http.documents import DocumentCache, PreparedDocument
from dra_mirror.service.http.graphql_http import GraphQLOverHttp
from dra_mirror.service.http.graphql_requests import (
    QueryRequest,
    answers_plain_json,
    is_json,
    new_sub_response,
    query_params,
    read_body,
    replay,
    request_fields,
)
from dra_mirror.service.http.live_frames import TextFrames
from dra_mirror.service.http.persisted import (
    DocumentRegistry,
    PersistedQueries,
    PersistedQueryError,
    resolve_persisted,
    with_query,
)
from dra_mirror.service.http.shapes import ShapeVerdicts
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.protocols import StateReader

# Extensions whose work the short path does itself (its document cache).
_REPLACED_EXTENSIONS = (ParserCache, ValidationCache)


class ViewState(Protocol):
    """What the view reads of the app's shared state."""

    settings: Settings

    @property
    def store(self) -> StateReader: ...

    history: Any
    scope_for: Callable[[Any], ReadScope]
    now: Callable[[], datetime]
    metrics: Any
    access: Any  # the app's AccessControl (service.access), once the lifespan opened it
    utilization: Any  # the dcgm readings (service.utilization), when configured


class Operation(NamedTuple):
    """One GraphQL operation of a request, as the metrics name it."""

    query: str | None
    operation_name: str | None


def _short_path_applies(schema: Any) -> bool:
    extensions = [e if isinstance(e, SchemaExtension) else e() for e in schema.extensions]
    return (
        all(isinstance(e, (*_REPLACED_EXTENSIONS, ShortPathChecked)) for e in extensions)
        and not schema.directives
        and not schema.config.disable_field_suggestions
    )


class MirrorGraphQL(GraphQLOverHttp, GraphQL):
    """strawberry's ASGI view with our per-request context, orjson encoding and the short
    path for queries over HTTP (see the module docstring), speaking GraphQL over HTTP
    (`service.http.graphql_http`), with live events as text frames (browsers need them) and
    GraphiQL from the package's own files."""

    websocket_adapter_class = TextFrames

    def __init__(
        self,
        schema: Any,
        *,
        state: ViewState,
        graphiql: bool,
        registry: DocumentRegistry | None = None,
    ) -> None:
        settings = state.settings.graphql
        super().__init__(
            schema,
            graphql_ide="graphiql" if graphiql else None,
            max_subscriptions_per_connection=settings.max_subscriptions_per_connection,
        )
        self.state = state
        self.max_batch = settings.max_batch
        self.documents = DocumentCache(
            schema._schema,
            max_bytes=settings.document_cache_bytes,
            max_document_bytes=settings.cached_document_max_bytes,
            max_tokens=settings.max_tokens,
        )
        self.persisted: DocumentRegistry = registry or PersistedQueries(
            max_bytes=settings.persisted_queries_bytes,
            max_document_bytes=settings.cached_document_max_bytes,
        )
        self.short_path = _short_path_applies(schema)
        self.keeps_collected = getattr(schema.execution_context_class, "keeps_collected", False)
        self.shapes = ShapeVerdicts(schema._schema, settings, judge=shape_refusal)

    async def get_context(self, request: Any, response: Any) -> Context:  # type: ignore[override]
        return make_context(
            self.state.store,
            scope=self.state.scope_for(request),
            settings=self.state.settings.graphql,
            history=self.state.history,
            now=self.state.now,
            request=request,
            response=response,
            viewer=subject_of(request),
            utilization=self.state.utilization,
        )

    @property
    def access(self) -> Any:
        return self.state.access

    def encode_json(self, data: object) -> bytes:
        return orjson.dumps(data)

    def parse_json(self, data: str | bytes) -> Any:
        found = super().parse_json(data)
        if isinstance(found, list):  # a batch: its limits hold for the request as a whole
            refusal = self._batch_refusal(found)
            if refusal is not None:
                code = (refusal.extensions or {}).get("code", "")
                raise HTTPException(400, f"{refusal.message} ({code})")
        return found

    def _batch_refusal(self, items: list[dict[str, Any]]) -> Any:
        operations = []
        for item in items:
            text = item.get("query")
            if not isinstance(text, str):
                continue  # a persisted hash alone: limited as its own operation
            prepared = self.documents.prepare(text)
            if prepared.document is not None and not prepared.errors:
                operations.append((prepared.document, item.get("operationName"),
                                   item.get("variables")))  # fmt: skip
        schema: Any = self.schema  # a strawberry.Schema: its graphql-core schema
        return batch_refusal(schema._schema, operations, self.state.settings.graphql)

    async def render_graphql_ide(self, request: Any) -> Any:
        from dra_mirror.service.web.routes import graphiql_response

        return graphiql_response(request)  # GraphiQL from the package's files, not a CDN

    async def execute_single(self, *args: Any, **kwargs: Any) -> Any:
        # One GraphQL operation (a batch runs several): its latency by operation name.
        data = kwargs.get("request_data")
        self._refuse_subscription(data)
        execution = super().execute_single(*args, **kwargs)
        return await self.state.metrics.timed_operation(data, execution)

    def _refuse_subscription(self, data: Any) -> None:
        """A subscription over HTTP is a 400 saying where subscriptions are served (the view
        would run it as a query, whose non-null result it cannot give)."""
        text = getattr(data, "query", None)
        if not isinstance(text, str):
            return
        prepared = self.documents.prepare(text)
        if prepared.document is None:
            return
        kind = prepared.operation_type(getattr(data, "operation_name", None))
        if kind is OperationType.SUBSCRIPTION:
            raise HTTPException(
                400, "subscriptions are served over WebSocket at /graphql (graphql-transport-ws)"
            )

    # --- the short path -------------------------------------------------------------------

    def takes_short_path(self, scope: Scope) -> bool:
        """Whether a request is a JSON POST the short path reads (`service.http.graphql_route`
        routes those here directly)."""
        return (
            self.short_path
            and scope.get("method") == "POST"
            and answers_plain_json(scope)
            and is_json(scope)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method")
        if (
            scope["type"] != "http"
            or not self.short_path
            or method not in ("GET", "POST")
            or not answers_plain_json(scope)
        ):
            return await super().__call__(scope, receive, send)
        body = b""
        if method == "GET":
            fields = query_params(scope)
        elif is_json(scope):
            body = await read_body(receive)
            try:
                fields = request_fields(orjson.loads(body))
            except orjson.JSONDecodeError:
                fields = None
        else:
            fields = None
        if fields is not None and await self._run(fields, scope, receive, send, body):
            return
        await super().__call__(scope, replay(body, receive), send)

    async def _run(
        self, fields: QueryRequest, scope: Scope, receive: Receive, send: Send, body: bytes
    ) -> bool:
        """Answer one query; False when strawberry's view must answer it instead."""
        text, key, register = fields.query, None, False
        rewrite: str | None = None  # the registered text a POST handed over must carry
        if fields.extensions:
            try:
                resolved = resolve_persisted(fields.extensions, text, self.persisted)
            except PersistedQueryError as error:
                await self._send(send, error.status, error.body(), error.headers)
                return True
            if resolved is not None:
                text, key, register = resolved
                if fields.query is None:  # strawberry's view sees the registered text too
                    if scope["method"] == "GET":
                        scope, body = with_query(scope, body, text)
                    else:
                        rewrite = text  # the body is rewritten only if it is handed over
        if text is None:
            return False
        limits = self.state.settings.graphql
        if document_refusal(text, limits, self.persisted) is not None:
            return await self._hand_over(
                scope, receive, send, body, rewrite
            )  # it answers the refusal
        prepared = self.documents.prepare(text, key)
        if prepared.errors or (
            prepared.document is not None
            and self.shapes.refusal(text, prepared.document, fields.operation_name,
                                    fields.variables) is not None
        ):  # fmt: skip
            return await self._hand_over(scope, receive, send, body, rewrite)
        if prepared.document is not None and (
            prepared.operation_type(fields.operation_name) is not OperationType.QUERY
        ):
            return await self._hand_over(scope, receive, send, body, rewrite)
        if register and key is not None and not limits.refuse_unregistered:
            # only documents that parse and validate; and only while clients may register
            self.persisted.register(key, text)
        request = Request(scope, receive)
        sub_response = new_sub_response(request)
        context = await self.get_context(request, sub_response)
        result = await self.state.metrics.timed_operation(
            Operation(text, fields.operation_name), self._execute(prepared, fields, context)
        )
        # strawberry's create_response, sent as it is: resolvers may set a status, headers or a
        # background task on the context's response.
        extra = [(name, value) for name, value in sub_response.headers.raw]
        status = sub_response.status_code or 200
        await _send_json(send, status, orjson.dumps(_response_data(result)), extra)
        if sub_response.background is not None:
            await sub_response.background()
        return True

    async def _hand_over(
        self, scope: Scope, receive: Receive, send: Send, body: bytes, text: str | None = None
    ) -> bool:
        # Not a query (or no single operation to run): strawberry's view answers, with the
        # persisted document's text in place of the hash.
        if text is not None:
            scope, body = with_query(scope, body, text)
        await super().__call__(scope, replay(body, receive), send)
        return True

    async def _execute(
        self, prepared: PreparedDocument, fields: QueryRequest, context: Context
    ) -> ExecutionResult:
        # What strawberry's Schema.execute runs once parsing and validation are done; a document
        # that did not parse or validate answers its errors, as strawberry's does.
        if prepared.errors:
            self.schema.process_errors(list(prepared.errors))
            return ExecutionResult(data=None, errors=list(prepared.errors))
        schema: Any = self.schema  # a strawberry.Schema: its graphql-core schema and executor
        result: Any = execute(
            schema._schema,
            prepared.document,  # type: ignore[arg-type]
            root_value=None,
            context_value=context,
            variable_values=fields.variables,
            operation_name=fields.operation_name,
            is_awaitable=optimized_is_awaitable,  # type: ignore[arg-type]
            executor_class=schema.execution_context_class,
            operation_extensions=fields.extensions,
            **self._collected(prepared),
        )
        if optimized_is_awaitable(result):
            result = await result
        if result.errors:
            self.schema.process_errors(result.errors)
            result.errors = [masked(error) for error in result.errors]
        return result

    def _collected(self, prepared: PreparedDocument) -> dict[str, Any]:
        # the per-document store of collected sub-selections, for an executor that keeps them
        # (schema.execution)
        if prepared.collected is None or not self.keeps_collected:
            return {}
        return {"collected": prepared.collected}

    async def _send(
        self,
        send: Send,
        status: int,
        data: dict[str, Any],
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        raw = [(name.encode(), value.encode()) for name, value in headers]
        await _send_json(send, status, orjson.dumps(data), raw)


async def _send_json(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    raw = [
        (b"content-length", str(len(body)).encode()),
        (b"content-type", b"application/json"),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _response_data(result: ExecutionResult) -> dict[str, Any]:
    data: dict[str, Any] = {"data": result.data}
    if result.errors:
        data["errors"] = [error.formatted for error in result.errors]
    return data
