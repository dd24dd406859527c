"""The shape of a GraphQL operation before it runs: depth, aliases and estimated cost.

`measure(schema, document, operation, variables, …)` walks the operation once, with the
schema's types, and returns a `Shape`:

* `depth`: the deepest field nesting, fragments expanded;
* `aliases`: aliased fields, each use of a fragment counting its aliases again (so aliases
  hidden in fragments count);
* `cost`: every field counts once for each object it is expected to be resolved for: a list
  multiplies what is selected under it by its expected size — the page size of a connection
  (`first`, literal or variable, clamped to the page cap; the default page without it), else
  the field's estimate in `costs.LIST_SIZES`, else `default_list`; some fields cost more than
  one by themselves (`costs.FIELD_COSTS`: scans, audits).

Promises: linear in the size of the document — each fragment is measured once per page size
and reused wherever it is spread (strawberry's own depth and alias limiters walk every path
through the fragments again, which is exponential in their nesting: a 1 KB document of 20
fragments each spreading the next twice takes seconds); a fragment cycle (refused by
validation anyway) counts as nothing instead of recursing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLList,
    GraphQLNonNull,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
    get_named_type,
)

from .costs import FIELD_COSTS, LIST_SIZES


@dataclass(frozen=True)
class Shape:
    depth: int
    aliases: int
    cost: float


def _is_list(type_: Any) -> bool:
    while isinstance(type_, GraphQLNonNull):
        type_ = type_.of_type
    return isinstance(type_, GraphQLList)


class _Walk:
    def __init__(
        self,
        schema: GraphQLSchema,
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: Mapping[str, Any],
        *,
        max_page: int,
        default_page: int,
        default_list: int,
    ) -> None:
        self.schema, self.fragments, self.variables = schema, fragments, variables
        self.max_page, self.default_page, self.default_list = max_page, default_page, default_list
        self.memo: dict[tuple[str, int], tuple[int, int, float]] = {}
        self.active: set[str] = set()

    def _page(self, field: FieldNode) -> int:
        for argument in field.arguments or ():
            if argument.name.value != "first":
                continue
            value = argument.value
            if isinstance(value, VariableNode):
                found = self.variables.get(value.name.value)
            elif isinstance(value, IntValueNode):
                found = int(value.value)
            else:
                found = None
            if isinstance(found, int) and not isinstance(found, bool):
                return max(0, min(found, self.max_page))
        return self.default_page

    def selection_set(
        self, selections: SelectionSetNode | None, parent: Any, page: int
    ) -> tuple[int, int, float]:
        """(depth, aliases, cost) of a selection set on type `parent`."""
        if selections is None or parent is None:
            return 0, 0, 0.0
        depth, aliases, cost = 0, 0, 0.0
        for node in selections.selections:
            if isinstance(node, FieldNode):
                d, a, c = self.field(node, parent, page)
            elif isinstance(node, InlineFragmentNode):
                condition = node.type_condition
                on = self.schema.get_type(condition.name.value) if condition else parent
                d, a, c = self.selection_set(node.selection_set, on, page)
            elif isinstance(node, FragmentSpreadNode):
                d, a, c = self.fragment(node.name.value, page)
            else:  # pragma: no cover - graphql-core has no other selection kinds
                continue
            depth, aliases, cost = max(depth, d), aliases + a, cost + c
        return depth, aliases, cost

    def fragment(self, name: str, page: int) -> tuple[int, int, float]:
        key = (name, page)
        if key in self.memo:
            return self.memo[key]
        definition = self.fragments.get(name)
        if definition is None or name in self.active:
            return 0, 0, 0.0
        self.active.add(name)
        try:
            on = self.schema.get_type(definition.type_condition.name.value)
            found = self.selection_set(definition.selection_set, on, page)
        finally:
            self.active.discard(name)
        self.memo[key] = found
        return found

    def field(self, node: FieldNode, parent: Any, page: int) -> tuple[int, int, float]:
        name = node.name.value
        alias = 1 if node.alias is not None else 0
        fields = getattr(parent, "fields", None) or {}
        definition = fields.get(name)
        if definition is None:  # __typename, or a field validation refuses anyway
            return 1, alias, 1.0
        named = get_named_type(definition.type)
        key = f"{parent.name}.{name}"
        child_page = page
        if named.name.endswith("Connection"):
            child_page = self._page(node)
        if _is_list(definition.type):
            if parent.name.endswith("Connection"):
                size = page
            else:
                size = LIST_SIZES.get(key, self.default_list)
        else:
            size = 1
        d, a, c = self.selection_set(node.selection_set, named, child_page)
        own = FIELD_COSTS.get(key, 1.0)
        return d + 1, alias + a, size * (own + c)


def measure(
    schema: GraphQLSchema,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: Mapping[str, Any] | None,
    *,
    max_page: int,
    default_page: int,
    default_list: int = 10,
) -> Shape:
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    walk = _Walk(schema, fragments, variables or {}, max_page=max_page,
                 default_page=default_page, default_list=default_list)  # fmt: skip
    root = schema.get_root_type(operation.operation)
    depth, aliases, cost = walk.selection_set(operation.selection_set, root, default_page)
    return Shape(depth=depth, aliases=aliases, cost=cost)
