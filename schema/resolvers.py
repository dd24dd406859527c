"""Plain field resolvers: a method field without arguments answered by calling the method.

Most fields of the graph are small methods on the types that wrap a record
(`ResourceClaim.name` returns `self.record.meta.name`). strawberry calls each through its
general resolver pipeline — an `Info` object, argument conversion (of no arguments), the field
extension chain (empty), exception-handler checks — some microseconds per resolved field,
most of the cost of a small query such as `whoHolds`, and of every field of a long list.

`direct_resolvers(schema)` gives each field that needs none of that a resolver calling its
method directly: a field whose resolver takes `self` (and optionally `info`, then given the
same `Info` strawberry builds) and no GraphQL arguments, with no field extensions (permission
classes are extensions) and no exception handlers. Every other field keeps strawberry's
resolver. Results are exactly the method's; graphql-core awaits the coroutine of an async
method as it awaits strawberry's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import strawberry
from graphql import GraphQLObjectType, GraphQLResolveInfo
from strawberry.types.base import StrawberryObjectDefinition
from strawberry.types.field import StrawberryField


def _direct(field: StrawberryField, info_class: Any) -> Callable[..., Any] | None:
    resolver = field.base_resolver
    if resolver is None or field.extensions or field.arguments:
        return None
    if resolver.root_parameter or resolver.parent_parameter or not resolver.self_parameter:
        return None
    method: Callable[..., Any] = resolver.wrapped_func  # type: ignore[assignment]
    info = resolver.info_parameter
    if info is None:
        if len(resolver.signature.parameters) != 1:
            return None

        def plain(source: Any, _info: GraphQLResolveInfo) -> Any:
            return method(source)

        return plain
    if len(resolver.signature.parameters) != 2:
        return None
    name = info.name

    def with_info(source: Any, raw: GraphQLResolveInfo) -> Any:
        return method(source, **{name: info_class(_raw_info=raw, _field=field)})

    return with_info


def direct_resolvers(schema: strawberry.Schema) -> int:
    """Give every eligible field of `schema` its direct resolver; returns how many."""
    converter = schema.schema_converter
    if converter.exception_handlers:
        return 0  # handlers are matched per field inside strawberry's resolver
    roots = {schema._schema.subscription_type, schema._schema.mutation_type} - {None}
    count = 0
    for concrete in converter.type_map.values():
        definition = concrete.definition
        implementation = concrete.implementation
        if (
            not isinstance(definition, StrawberryObjectDefinition)
            or not isinstance(implementation, GraphQLObjectType)
            or implementation in roots
        ):
            continue
        for field in definition.fields:
            graphql_field = implementation.fields.get(
                schema.config.name_converter.from_field(field)
            )
            if graphql_field is None:
                continue
            direct = _direct(field, schema.config.info_class)
            if direct is not None:
                graphql_field.resolve = direct
                count += 1
    return count
