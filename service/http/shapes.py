"""The guards' shape verdicts of repeated queries, remembered: a document asked again with the
same page sizes is not walked again.

`ShapeVerdicts(schema, settings, judge=shape_refusal).refusal(text, document, operation_name,
variables)` is `judge` (the guards' `schema.guard.limits.shape_refusal`) of that operation,
computed once per (document text,
operation name, values of the variables the walk reads). The walk reads a variable only where
it is a `first:` argument (a page size: `schema.guard.shape`), so those variables' values are
the whole key; a value that cannot be a key (not hashable) is judged afresh every time. At
most `max_entries` verdicts are kept; past that the oldest half is forgotten.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphql import ArgumentNode, DocumentNode, GraphQLError, VariableNode, visit
from graphql.language import Visitor

from dra_mirror.service.settings import GraphQLSettings

_MISSING = object()


class _PageVariables(Visitor):
    """The names of the variables given as a `first:` argument anywhere in a document."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def enter_argument(self, node: ArgumentNode, *_args: Any) -> None:
        if node.name.value == "first" and isinstance(node.value, VariableNode):
            self.names.add(node.value.name.value)


def page_variables(document: DocumentNode) -> tuple[str, ...]:
    found = _PageVariables()
    visit(document, found)
    return tuple(sorted(found.names))


class ShapeVerdicts:
    def __init__(
        self,
        schema: Any,
        settings: GraphQLSettings,
        *,
        judge: Callable[..., GraphQLError | None],
        max_entries: int = 4096,
    ) -> None:
        self.judge = judge
        self.schema = schema
        self.settings = settings
        self.max_entries = max_entries
        self._pages: dict[str, tuple[str, ...]] = {}
        self._verdicts: dict[tuple[Any, ...], GraphQLError | None] = {}

    def refusal(
        self,
        text: str,
        document: DocumentNode,
        operation_name: str | None,
        variables: dict[str, Any] | None,
    ) -> GraphQLError | None:
        names = self._pages.get(text)
        if names is None:
            names = page_variables(document)
            self._remember(self._pages, text, names)
        values = variables or {}
        key = (text, operation_name, *(values.get(name, _MISSING) for name in names))
        try:
            return self._verdicts[key]
        except KeyError:
            pass
        except TypeError:  # a page size that is not hashable (a list…): judged, not kept
            return self.judge(self.schema, document, operation_name, variables, self.settings)
        verdict = self.judge(self.schema, document, operation_name, variables, self.settings)
        self._remember(self._verdicts, key, verdict)
        return verdict

    def _remember(self, cache: dict[Any, Any], key: Any, value: Any) -> None:
        if len(cache) >= self.max_entries:
            for old in list(cache)[: len(cache) // 2]:  # dicts keep insertion order
                del cache[old]
        cache[key] = value
