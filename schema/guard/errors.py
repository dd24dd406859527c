"""What a client sees of an error, and what the log keeps.

`GuardedSchema` is the strawberry `Schema` of the mirror with one error policy:

* an error the client caused (a syntax or validation error, a refused limit, bad input — any
  `GraphQLError` raised as such, with no foreign exception behind it) is logged at INFO, one
  line, no traceback;
* any other exception in a resolver is our failure: logged at ERROR with its traceback, and
  the client gets `internal error` (code INTERNAL) with the path — never the exception's text;
* every message a client gets passes `redact`: credentials in URLs (`redis://:secret@…`,
  `postgresql://user:pw@…`), bearer tokens and anything that looks like a kubeconfig secret
  are replaced by `***`.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Iterator
from typing import Any

import strawberry
from graphql import GraphQLError
from graphql.execution.aborted_graphql_execution_error import AbortedGraphQLExecutionError
from strawberry.extensions import SchemaExtension

log = logging.getLogger("dra_mirror.graphql")

_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)[^/\s@]*@")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9\-._~+/]+=*")
_SECRET_FIELDS = re.compile(
    r"(?i)(?P<key>(token|password|client-key-data|client-certificate-data|secret)\s*[:=]\s*)"
    r"[^\s,;'\"}]+"
)


def redact(text: str) -> str:
    text = _URL_CREDENTIALS.sub(r"\g<scheme>***@", text)
    text = _BEARER.sub(r"\g<1>***", text)
    return _SECRET_FIELDS.sub(r"\g<key>***", text)


def unwrap(error: GraphQLError) -> GraphQLError:
    """The error a guard raised, when graphql-core's abort machinery wrapped it (the abort
    reason of an `AbortedGraphQLExecutionError`); its unawaited partial result is closed."""
    original = error.original_error
    if isinstance(original, AbortedGraphQLExecutionError):
        partial = original.aborted_result
        if inspect.iscoroutine(partial):
            partial.close()
        if isinstance(original.reason, GraphQLError):
            return original.reason
    return error


def is_client_error(error: GraphQLError) -> bool:
    error = unwrap(error)
    original = error.original_error
    return original is None or isinstance(original, GraphQLError)


class GuardedSchema(strawberry.Schema):
    def process_errors(self, errors: list[GraphQLError], execution_context: Any = None) -> None:
        for error in map(unwrap, errors):
            if is_client_error(error):
                log.info("graphql: %s", redact(error.message))
            else:
                log.error(
                    "graphql: %s failed: %s",
                    ".".join(str(p) for p in error.path or ()) or "the operation",
                    redact(str(error.original_error)),
                    exc_info=error.original_error,
                )


class ShortPathChecked(SchemaExtension):
    """An extension whose work the /graphql short path (`service.http.graphql`) does itself,
    so a schema whose other extensions are all such may be answered by it."""


class MaskedErrors(ShortPathChecked):
    """Replaces what clients see of our failures, and redacts every message (after
    `GuardedSchema.process_errors` logged the original). The /graphql short path masks its
    answers with `masked` too."""

    def on_operation(self) -> Iterator[None]:
        yield
        result = self.execution_context.result
        errors = getattr(result, "errors", None)
        if result is not None and errors:
            result.errors = [self._masked(e) for e in errors]

    @staticmethod
    def _masked(error: GraphQLError) -> GraphQLError:
        return masked(error)


def masked(error: GraphQLError) -> GraphQLError:
    """What a client sees of an error: our failures replaced, every message redacted."""
    error = unwrap(error)
    if is_client_error(error):
        message = redact(error.message)
        extensions = error.extensions
    else:
        message, extensions = "internal error (see the mirror's log)", {"code": "INTERNAL"}
    if message == error.message and extensions is error.extensions:
        return error
    return GraphQLError(message, nodes=error.nodes, path=error.path,
                        extensions=extensions)  # fmt: skip
