"""graphql-core's execution of this graph, with less work per field and per document.

`PlainFieldsExecution` is the execution context class the schema executes with (the guards'
budget, `schema.guard.budget`, builds on it). It answers exactly what graphql-core's executor
answers, with two shortcuts:

* **plain leaf fields** — a field whose resolver `schema.resolvers.direct_resolvers` made a
  plain call of a synchronous method without arguments, and whose type is a scalar or an enum
  (nullable or not), carries its method and type (`PLAIN_LEAF`, in the field's extensions). It
  is executed by calling the method and coercing what it returns, without the resolve info,
  argument values and completion dispatch graphql-core prepares for any field: most fields of
  an answer (names, namespaces, states) are such fields. Errors are located and handled as
  graphql-core handles them (same messages, same null propagation); a method that returns
  an awaitable after all is completed by graphql-core as usual.
* **sub-selections collected once per document** — graphql-core collects the fields of every
  sub-selection anew for each execution. When the caller passes `collected` (a dict that lives
  as long as its parsed document: the HTTP view's document cache keeps one per document that
  has no directives, so that which fields are collected cannot depend on variables), the
  collected fields of each sub-selection are kept there, by the return type and the field
  nodes, and later executions of the same document reuse them.
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLObjectType, Undefined
from graphql.execution.collect_fields import CollectedFields, FieldDetailsList
from graphql.execution.executor import to_nodes
from graphql.pyutils import Path
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

# The key, in a GraphQLField's extensions, of (method, leaf type, non-null) for a plain
# synchronous method field of a scalar or enum type (set by `schema.resolvers`).
PLAIN_LEAF = "dra_mirror.plain_leaf"


class PlainFieldsExecution(StrawberryGraphQLCoreExecutionContext):
    """strawberry's graphql-core execution context with the shortcuts of the module
    docstring; `collected` (keyword, optional): the per-document store of collected
    sub-selections."""

    keeps_collected = True  # takes `collected` (the HTTP view passes it to such classes only)

    def __init__(self, *args: Any, collected: dict[Any, CollectedFields] | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.collected = collected

    def execute_field(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: FieldDetailsList,
        path: Path,
        position_context: Any,
    ) -> Any:
        node = field_details_list[0].node
        field_def = self.schema.get_field(parent_type, node.name.value)
        leaf = field_def.extensions.get(PLAIN_LEAF) if field_def is not None else None
        if field_def is None or leaf is None or self.middleware_manager is not None:
            return super().execute_field(
                parent_type, source, field_details_list, path, position_context
            )
        method, leaf_type, non_null = leaf
        try:
            result = method(source)
            if self.is_awaitable(result):  # not plain after all: graphql-core completes it
                info = self.build_resolve_info(
                    field_def, to_nodes(field_details_list), parent_type, path
                )
                return self.complete_awaitable_value(
                    field_def.type, field_details_list, info, path, result, position_context
                )
            if isinstance(result, Exception):
                raise result
            if result is None or result is Undefined:
                if non_null:
                    raise TypeError(
                        "Cannot return null for non-nullable field"
                        f" {parent_type}.{node.name.value}."
                    )
                return None
            return self.complete_leaf_value(leaf_type, result)
        except Exception as raw_error:
            self.handle_field_error(raw_error, field_def.type, field_details_list, path)
            return None

    def collect_subfields(
        self, return_type: GraphQLObjectType, field_details_list: FieldDetailsList
    ) -> CollectedFields:
        shared = self.collected
        if shared is None:
            return super().collect_subfields(return_type, field_details_list)
        # The document keeps its nodes alive as long as `shared` lives: their ids are theirs.
        key = (return_type, *[id(details.node) for details in field_details_list])
        found = shared.get(key)
        if found is None:
            found = shared[key] = super().collect_subfields(return_type, field_details_list)
        return found
