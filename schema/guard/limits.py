"""Limits on what one GraphQL document may ask, checked before anything is resolved.

`limit_extensions(settings, registry=None)` gives the strawberry extension classes (classes,
never shared instances: strawberry builds one per request) that enforce, in this order:

1. registered documents only (`refuse_unregistered`, with a `DocumentRegistry`): a document
   whose SHA-256 is not registered is refused (PERSISTED_QUERY_NOT_FOUND);
2. document size (`max_document_bytes`) before parsing, and the parser's token limit
   (`max_tokens`: graphql-core stops lexing past it, so a 10 MB document of tokens costs
   milliseconds, not seconds);
3. after validation, the operation's shape (`shape.measure`): depth (`max_depth`), aliases
   counted through fragments (`max_aliases`), estimated cost (`max_cost`);
4. introspection (`__schema`, `__type`) refused when `introspection` is off.

A batch (several operations in one request) is held to the same aliases and cost limits as
a whole: `batch_refusal` sums its operations' shapes, so ten operations each just under the
limits are refused together rather than run ten times as much as one may.

Every refusal is a `GraphQLError` with a `code` extension (DOCUMENT_TOO_LARGE, TOO_DEEP,
TOO_MANY_ALIASES, TOO_COSTLY, PERSISTED_QUERY_NOT_FOUND) and no data: a request error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any, Protocol

from graphql import GraphQLError, OperationDefinitionNode
from strawberry.extensions import DisableIntrospection, SchemaExtension

from dra_mirror.service.settings import GraphQLSettings

from .errors import ShortPathChecked
from .shape import measure


class DocumentRegistry(Protocol):
    """Persisted documents by hash (the registry of dashboards' and bots' documents)."""

    def is_registered(self, sha256: str) -> bool: ...


def _refuse(message: str, code: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": code})


def _operation(document: Any, name: str | None) -> OperationDefinitionNode | None:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if name is None:
        return operations[0] if len(operations) == 1 else None
    return next((o for o in operations if o.name and o.name.value == name), None)


def document_refusal(
    query: str,
    settings: GraphQLSettings,
    registry: DocumentRegistry | None = None,
    *,
    registered_only: bool = True,
) -> GraphQLError | None:
    """Why a document's text may not run (size; unregistered when only registered documents
    may, unless `registered_only` is False: the mirror's own in-process documents), or None.
    Checked before parsing."""
    s = settings
    size = len(query.encode("utf-8")) if len(query) * 4 > s.max_document_bytes else 0
    if size > s.max_document_bytes:
        return _refuse(
            f"document too large: {size} bytes (at most {s.max_document_bytes})",
            "DOCUMENT_TOO_LARGE",
        )
    if s.refuse_unregistered and registered_only:
        digest = hashlib.sha256(query.encode("utf-8")).hexdigest()
        if registry is None or not registry.is_registered(digest):
            return _refuse(
                "this server executes only registered documents; register it "
                f"(sha256 {digest}) or send a persisted query",
                "PERSISTED_QUERY_NOT_FOUND",
            )
    return None


def shape_refusal(
    schema: Any,
    document: Any,
    operation_name: str | None,
    variables: dict[str, Any] | None,
    settings: GraphQLSettings,
) -> GraphQLError | None:
    """Why a validated operation may not run (too deep, too many aliases, too costly), or
    None. `schema` is the graphql-core schema."""
    s = settings
    operation = _operation(document, operation_name)
    if operation is None:
        return None
    shape = measure(schema, document, operation, variables,
                    max_page=s.max_page_size, default_page=s.default_page_size)  # fmt: skip
    if shape.depth > s.max_depth:
        return _refuse(f"query too deep: {shape.depth} levels (at most "
                       f"{s.max_depth})", "TOO_DEEP")  # fmt: skip
    if shape.aliases > s.max_aliases:
        return _refuse(f"too many aliases: {shape.aliases} (at most "
                       f"{s.max_aliases})", "TOO_MANY_ALIASES")  # fmt: skip
    if shape.cost > s.max_cost:
        return _refuse(
            f"query too costly: an estimated {shape.cost:,.0f} (at most "
            f"{s.max_cost:,}); use smaller pages or fewer nested lists",
            "TOO_COSTLY",
        )
    return None


def batch_refusal(
    schema: Any,
    operations: list[tuple[Any, str | None, dict[str, Any] | None]],
    settings: GraphQLSettings,
) -> GraphQLError | None:
    """Why a batch of validated operations — (document, operation name, variables) each — may
    not run as one request: their aliases or estimated costs together over one operation's
    limits. `schema` is the graphql-core schema."""
    s = settings
    aliases, cost = 0, 0.0
    for document, name, variables in operations:
        operation = _operation(document, name)
        if operation is None:
            continue
        shape = measure(schema, document, operation, variables,
                        max_page=s.max_page_size, default_page=s.default_page_size)  # fmt: skip
        aliases += shape.aliases
        cost += shape.cost
    if aliases > s.max_aliases:
        return _refuse(f"too many aliases in the batch as a whole: {aliases} (at most "
                       f"{s.max_aliases} for the request)", "TOO_MANY_ALIASES")  # fmt: skip
    if cost > s.max_cost:
        return _refuse(
            f"the batch as a whole is too costly: an estimated {cost:,.0f} (at most "
            f"{s.max_cost:,} for the request); send fewer operations or smaller pages",
            "TOO_COSTLY",
        )
    return None


def limit_extensions(
    settings: GraphQLSettings, *, registry: DocumentRegistry | None = None
) -> list[type[SchemaExtension]]:
    s = settings

    class DocumentLimits(ShortPathChecked):
        # The /graphql short path (service.http.graphql) makes these same checks itself.

        def on_operation(self) -> Iterator[None]:
            context = self.execution_context
            if context.query is not None:
                refusal = document_refusal(context.query, s, registry, registered_only=True)
                if refusal is not None:
                    raise refusal
            context.parse_options["max_tokens"] = s.max_tokens
            yield

        def on_execute(self) -> Iterator[None]:
            context = self.execution_context
            document = context.graphql_document
            if document is not None:
                refusal = shape_refusal(
                    context.schema._schema, document, context.operation_name,
                    context.variables, s,
                )  # fmt: skip
                if refusal is not None:
                    raise refusal
            yield

    found: list[type[SchemaExtension]] = [DocumentLimits]
    if not s.introspection:
        found.append(DisableIntrospection)
    return found
