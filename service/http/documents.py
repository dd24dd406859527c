"""GraphQL documents parsed and validated once, kept by the SHA-256 of their text.

Parsing and validating a dashboard's query costs milliseconds; executing it, a fraction of
one. `DocumentCache.prepare(text, key)` answers a `PreparedDocument` — the parsed document,
its validation errors, the type of each operation it defines — from the cache when the same
text came before, else parses and validates it now (with strawberry's rules, exactly as its
own pipeline does) and keeps it.

Promises:

* the cache is bounded in bytes of document text, not in entries: at most `max_bytes` in all,
  least recently used first out, and a document over `max_document_bytes` is prepared for its
  request and never kept (a 10 MB query does not stay resident);
* keys are the SHA-256 hex digest of the text (`document_key`), the hash persisted queries
  use, so a persisted query is found under the hash it was sent with;
* a document that does not parse is prepared too (its syntax error as its only error), so a
  client repeating a broken query costs one lookup;
* a document without directives (so that which fields each selection collects cannot depend
  on variables) carries `collected`, the store where executions of it keep the fields they
  collected (`schema.execution`); it lives, and is evicted, with its document.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, NamedTuple

from graphql import DocumentNode, GraphQLError, GraphQLSchema, OperationType, parse
from graphql.language import (
    BREAK,
    FragmentDefinitionNode,
    OperationDefinitionNode,
    Visitor,
    visit,
)
from graphql.validation import specified_rules
from strawberry.schema.schema import validate_document


def document_key(text: str) -> str:
    """The SHA-256 hex digest of a document's text (UTF-8), as persisted queries name it."""
    return hashlib.sha256(text.encode()).hexdigest()


class PreparedDocument(NamedTuple):
    """A document ready to execute, or the errors that say why it cannot be."""

    document: DocumentNode | None  # None: the text does not parse
    errors: tuple[GraphQLError, ...]  # the syntax error, or the validation errors
    operations: dict[str | None, OperationType]  # by name; None for an anonymous operation
    size: int  # bytes of text: what keeping it costs the cache
    collected: dict[Any, Any] | None = None  # fields its executions collected (no directives)

    def operation_type(self, name: str | None) -> OperationType | None:
        """The type of the operation `name` selects (the only one when `name` is None), or
        None when that does not name exactly one operation of the document."""
        if name is None:
            if len(self.operations) != 1:
                return None
            return next(iter(self.operations.values()))
        return self.operations.get(name)


class _Directives(Visitor):
    found = False

    def enter_directive(self, *_args: Any) -> Any:
        self.found = True
        return BREAK


def _collects_alike(document: DocumentNode) -> bool:
    """Whether each selection of `document` collects the same fields whatever the variables:
    no directive anywhere (`@skip`, `@include`, `@defer`…) and no fragment variables."""
    if any(
        isinstance(d, FragmentDefinitionNode) and d.variable_definitions
        for d in document.definitions
    ):
        return False
    visitor = _Directives()
    visit(document, visitor)
    return not visitor.found


def _prepare(
    schema: GraphQLSchema, text: str, size: int, max_tokens: int | None
) -> PreparedDocument:
    try:
        document = parse(text, max_tokens=max_tokens)
    except GraphQLError as error:
        return PreparedDocument(None, (error,), {}, size)
    operations = {
        (d.name.value if d.name else None): d.operation
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
    }
    errors = validate_document(schema, document, tuple(specified_rules))
    collected: dict[Any, Any] | None = {} if not errors and _collects_alike(document) else None
    return PreparedDocument(document, tuple(errors), operations, size, collected)


class DocumentCache:
    """Prepared documents by key, bounded in bytes of text (see the module docstring)."""

    def __init__(
        self,
        schema: GraphQLSchema,
        *,
        max_bytes: int,
        max_document_bytes: int,
        max_tokens: int | None = None,
    ) -> None:
        """`max_tokens`: the parser stops past that many tokens (the guards' token limit)."""
        self.schema = schema
        self.max_tokens = max_tokens
        self.max_bytes = max_bytes
        self.max_document_bytes = min(max_document_bytes, max_bytes)
        self.bytes = 0
        self._documents: OrderedDict[str, PreparedDocument] = OrderedDict()

    def __len__(self) -> int:
        return len(self._documents)

    def prepare(self, text: str, key: str | None = None) -> PreparedDocument:
        """The prepared document of `text`; `key` is its `document_key` when known."""
        data = text.encode()
        size = len(data)
        if size > self.max_document_bytes:
            return _prepare(self.schema, text, size, self.max_tokens)
        key = key or hashlib.sha256(data).hexdigest()
        found = self._documents.get(key)
        if found is not None:
            self._documents.move_to_end(key)
            return found
        prepared = _prepare(self.schema, text, size, self.max_tokens)
        self._documents[key] = prepared
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, evicted = self._documents.popitem(last=False)
            self.bytes -= evicted.size
        return prepared
