"""graphql-core's execution of this graph, with less work per field and per document.

`PlainFieldsExecution` is the execution context class the schema executes with (the guards'
budget, `schema.guard.budget`, builds on it). It answers exactly what graphql-core's executor
answers, with these shortcuts:

* **plain leaf fields** — a field whose resolver `schema.resolvers.direct_resolvers` made a
  plain call of a synchronous method without arguments, and whose type is a scalar or an enum
  (nullable or not), carries its method and type (`PLAIN_LEAF`, in the field's extensions). It
  is executed by calling the method and coercing what it returns, without the resolve info,
  argument values, response path and completion dispatch graphql-core prepares for any field:
  most fields of an answer (names, namespaces, states) are such fields. Errors are located
  and handled as graphql-core handles them (same messages, paths and null propagation); a
  method that returns an awaitable after all is completed by graphql-core as usual.
* **field plans** — which fields of a selection are plain leaves is worked out once per
  selection (`_plan`), and the selection's fields are executed from that plan.
* **sub-selections collected once per document** — graphql-core collects the fields of every
  sub-selection anew for each execution. When the caller passes `collected` (a dict that lives
  as long as its parsed document: the HTTP view's document cache keeps one per document that
  has no directives, so that which fields are collected cannot depend on variables), the
  collected fields of each sub-selection, and their plans, are kept there (by the return type
  and the field nodes, which the document keeps alive) and reused by later executions.

`admit_field()` is asked before every field executes, plain or not (the budget counts there).
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLField, GraphQLObjectType, Undefined
from graphql.execution.collect_fields import CollectedFields, FieldDetailsList, GroupedFieldSet
from graphql.execution.executor import to_nodes
from graphql.pyutils import Path, gather_with_cancel
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

# The key, in a GraphQLField's extensions, of (method, leaf type, non-null) for a plain
# synchronous method field of a scalar or enum type (set by `schema.resolvers`).
PLAIN_LEAF = "dra_mirror.plain_leaf"

# (response name, field group, (field, leaf plan) or None) for each field of a selection
FieldPlan = list[tuple[str, FieldDetailsList, tuple[GraphQLField, Any] | None]]


class PlainFieldsExecution(StrawberryGraphQLCoreExecutionContext):
    """strawberry's graphql-core execution context with the shortcuts of the module
    docstring; `collected` (keyword, optional): the per-document store of collected
    sub-selections and their plans."""

    keeps_collected = True  # takes `collected` (the HTTP view passes it to such classes only)

    def __init__(self, *args: Any, collected: dict[Any, Any] | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.collected = collected
        self._plans: dict[int, tuple[GroupedFieldSet, FieldPlan | None]] = {}

    def build_per_event_executor(self, payload: Any) -> Any:
        # A subscription's event executor is a copy of this one: its plans are its own (the
        # root's field groups are collected anew for every event; none are kept across).
        executor: Any = super().build_per_event_executor(payload)
        executor._plans = {}
        return executor

    def admit_field(self) -> bool:
        """Asked before each field executes: False skips the field (as graphql-core skips a
        field it does not know); it may raise, which stops the selection."""
        return True

    def execute_field(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: FieldDetailsList,
        path: Path,
        position_context: Any,
    ) -> Any:
        if not self.admit_field():
            return Undefined
        return super().execute_field(
            parent_type, source, field_details_list, path, position_context
        )

    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path | None,
        grouped_field_set: GroupedFieldSet,
        position_context: Any,
    ) -> Any:
        plan = self._plan(parent_type, grouped_field_set)
        if plan is None:
            return super().execute_fields(
                parent_type, source_value, path, grouped_field_set, position_context
            )
        # graphql-core's execute_fields, with plain leaves executed in place
        results: dict[str, Any] = {}
        is_awaitable = self.is_awaitable
        awaitable_fields: list[str] = []
        try:
            for response_name, field_details_list, leaf in plan:
                if leaf is None:
                    result = self.execute_field(
                        parent_type,
                        source_value,
                        field_details_list,
                        Path(path, response_name, parent_type.name),
                        position_context,
                    )
                elif self.admit_field():
                    result = self._plain_leaf(
                        parent_type, source_value, field_details_list, path, response_name,
                        leaf, position_context,
                    )  # fmt: skip
                else:
                    result = Undefined
                if result is not Undefined:
                    results[response_name] = result
                    if is_awaitable(result):
                        awaitable_fields.append(response_name)
        except Exception:
            if awaitable_fields:
                self.settle_in_background([results[field] for field in awaitable_fields])
            raise
        if not awaitable_fields:
            return results

        async def get_results() -> dict[str, Any]:
            if len(awaitable_fields) == 1:
                field = awaitable_fields[0]
                results[field] = await results[field]
            else:
                awaited = await gather_with_cancel(*(results[f] for f in awaitable_fields))
                results.update(zip(awaitable_fields, awaited, strict=True))
            return results

        return get_results()

    def _plain_leaf(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: FieldDetailsList,
        parent_path: Path | None,
        response_name: str,
        leaf: tuple[GraphQLField, Any],
        position_context: Any,
    ) -> Any:
        """graphql-core's execute_field and complete_value for a plain leaf field."""
        field_def, (method, leaf_type, non_null) = leaf
        try:
            result = method(source)
            if self.is_awaitable(result):  # not plain after all: graphql-core completes it
                path = Path(parent_path, response_name, parent_type.name)
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
                        f" {parent_type}.{field_details_list[0].node.name.value}."
                    )
                return None
            return self.complete_leaf_value(leaf_type, result)
        except Exception as raw_error:
            path = Path(parent_path, response_name, parent_type.name)
            self.handle_field_error(raw_error, field_def.type, field_details_list, path)
            return None

    def _plan(
        self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet
    ) -> FieldPlan | None:
        """The selection's plan (None: graphql-core executes it as it is), kept with the
        document's collected fields when they are kept, else for this execution."""
        key = id(grouped_field_set)
        shared = self.collected
        if shared is not None:
            kept = shared.get(("plan", key))
            if kept is not None and kept[0] is grouped_field_set:
                return kept[1]
        kept = self._plans.get(key)
        if kept is not None and kept[0] is grouped_field_set:
            return kept[1]
        plan = self._make_plan(parent_type, grouped_field_set)
        self._plans[key] = (grouped_field_set, plan)  # it keeps the set, and so its id, alive
        return plan

    def _make_plan(
        self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet
    ) -> FieldPlan | None:
        if self.middleware_manager is not None:
            return None
        plan: FieldPlan = []
        leaves = 0
        for response_name, field_details_list in grouped_field_set.items():
            field_def = self.schema.get_field(parent_type, field_details_list[0].node.name.value)
            leaf = field_def.extensions.get(PLAIN_LEAF) if field_def is not None else None
            if field_def is None or leaf is None:
                plan.append((response_name, field_details_list, None))
                continue
            leaves += 1
            plan.append((response_name, field_details_list, (field_def, leaf)))
        return plan if leaves else None

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
            fields = found.grouped_field_set  # kept alive by `shared`, as its plan
            shared[("plan", id(fields))] = (fields, self._make_plan(return_type, fields))
        return found
