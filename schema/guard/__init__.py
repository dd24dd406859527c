"""Guards of the GraphQL graph against abuse: limits, an execution budget, an error policy.

    limits   document size, tokens, depth, aliases (through fragments), cost, introspection,
             registered documents only — strawberry extension classes
    shape    the one-pass, fragment-memoized measure of an operation those limits use
    costs    expected list sizes and per-field costs of this graph
    budget   time and resolved fields counted inside execution; aborts on client disconnect
    errors   client mistakes at INFO, our failures at ERROR; masking and redaction

`guarded_schema_options(settings, registry=None)` is what `schema.build_schema` passes to
strawberry: the schema class, the extensions and the execution context class.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.settings import GraphQLSettings

from .budget import budgeted_execution
from .errors import GuardedSchema, MaskedErrors
from .limits import DocumentRegistry, limit_extensions


def guarded_schema_options(
    settings: GraphQLSettings, *, registry: DocumentRegistry | None = None
) -> dict[str, Any]:
    return {
        "schema_class": GuardedSchema,
        "extensions": [MaskedErrors, *limit_extensions(settings, registry=registry)],
        "execution_context_class": budgeted_execution(
            max_fields=settings.max_resolved_fields, max_seconds=settings.max_execution_seconds
        ),
    }
