"""Plain field resolvers: a method field answered by calling the method.

Most fields of the graph are small methods on the types that wrap a record
(`ResourceClaim.name` returns `self.record.meta.name`). strawberry calls each through its
general resolver pipeline — an `Info` object, argument conversion (of no arguments), the field
extension chain (empty), exception-handler checks — some microseconds per resolved field,
most of the cost of a small query such as `whoHolds`, and of every field of a long list.

`direct_resolvers(schema)` gives each field that needs none of that a resolver calling its
method directly: a field whose resolver takes `self` (and optionally `info`, then given the
same `Info` strawberry builds) and GraphQL arguments, if any, of the types strawberry hands
over unconverted (String, Int, Float, Boolean, ID, nullable or not: graphql-core's coerced
values, under their Python names), with no field extensions (permission classes are
extensions) and no exception handlers. Every other field keeps strawberry's resolver. Results
are exactly the method's; graphql-core awaits the coroutine of an async method as it awaits
strawberry's. A synchronous method without arguments or `info` whose type is a scalar or an
enum, and such a field without resolver (an attribute), are also marked for
`schema.execution`, which calls them without building resolve info.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any

import strawberry
from graphql import (
    GraphQLField,
    GraphQLObjectType,
    GraphQLResolveInfo,
    is_leaf_type,
    is_non_null_type,
)
from strawberry.types.arguments import StrawberryArgument
from strawberry.types.base import StrawberryObjectDefinition, StrawberryOptional
from strawberry.types.field import StrawberryField

from .execution import PLAIN_LEAF

# Argument types strawberry passes to the resolver as graphql-core coerced them.
_UNCONVERTED = (str, int, float, bool, strawberry.ID)


def _unconverted(argument: StrawberryArgument) -> bool:
    kind = argument.type
    if type(kind) is StrawberryOptional:  # not Maybe (a subclass), which wraps its value
        kind = kind.of_type
    return any(kind is plain for plain in _UNCONVERTED)


def _direct(field: StrawberryField, info_class: Any, names: dict[str, str]) -> Any:
    """The direct resolver of `field`, or None; `names`: its arguments' Python names by
    GraphQL name."""
    resolver = field.base_resolver
    if resolver is None or field.extensions:
        return None
    if resolver.root_parameter or resolver.parent_parameter or not resolver.self_parameter:
        return None
    if not all(_unconverted(argument) for argument in field.arguments):
        return None
    method: Callable[..., Any] = resolver.wrapped_func  # type: ignore[assignment]
    info = resolver.info_parameter
    if len(resolver.signature.parameters) != 1 + (info is not None) + len(names):
        return None
    renamed = any(graphql != python for graphql, python in names.items())
    if info is None:
        if not names:

            def plain(source: Any, _info: GraphQLResolveInfo) -> Any:
                return method(source)

            return plain
        if not renamed:

            def with_arguments(source: Any, _info: GraphQLResolveInfo, **kwargs: Any) -> Any:
                return method(source, **kwargs)

            return with_arguments

        def with_renamed(source: Any, _info: GraphQLResolveInfo, **kwargs: Any) -> Any:
            return method(source, **{names[name]: value for name, value in kwargs.items()})

        return with_renamed
    info_name = info.name

    def with_info(source: Any, raw: GraphQLResolveInfo, **kwargs: Any) -> Any:
        if renamed:
            kwargs = {names[name]: value for name, value in kwargs.items()}
        return method(source, **kwargs, **{info_name: info_class(_raw_info=raw, _field=field)})

    return with_info


def _mark_plain_attribute(graphql_field: GraphQLField, field: StrawberryField) -> None:
    """Mark a field without resolver (strawberry answers `getattr(source, python_name)`) of a
    scalar or enum type for `schema.execution`."""
    if field.extensions or field.default_resolver is not getattr or not field.python_name:
        return
    if not getattr(graphql_field.resolve, "_is_default", False):  # strawberry's basic resolver
        return
    _mark(graphql_field, operator.attrgetter(field.python_name))


def _mark_plain_leaf(graphql_field: GraphQLField, field: StrawberryField) -> None:
    """Mark a plain synchronous method field of a scalar or enum type for
    `schema.execution` (see the module docstring)."""
    method: Any = field.base_resolver.wrapped_func  # type: ignore[union-attr]
    if inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method):
        return
    _mark(graphql_field, method)


def _mark(graphql_field: GraphQLField, method: Callable[[Any], Any]) -> None:
    kind: Any = graphql_field.type
    non_null = is_non_null_type(kind)
    named = kind.of_type if non_null else kind
    if is_leaf_type(named):
        plan = (method, named, non_null)
        graphql_field.extensions = {**graphql_field.extensions, PLAIN_LEAF: plan}


def direct_resolvers(schema: strawberry.Schema) -> int:
    """Give every eligible field of `schema` its direct resolver; returns how many."""
    converter = schema.schema_converter
    if converter.exception_handlers:
        return 0  # handlers are matched per field inside strawberry's resolver
    roots = {schema._schema.subscription_type, schema._schema.mutation_type} - {None}
    naming = schema.config.name_converter
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
            if field.base_resolver is None:
                _mark_plain_attribute(graphql_field, field)
                continue
            names = {naming.from_argument(a): a.python_name or "" for a in field.arguments}
            direct = _direct(field, schema.config.info_class, names)
            if direct is not None:
                graphql_field.resolve = direct
                count += 1
                if not names and field.base_resolver.info_parameter is None:
                    _mark_plain_leaf(graphql_field, field)
    return count
