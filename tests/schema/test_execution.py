"""The execution shortcuts (`schema.execution`) answer exactly what graphql-core answers:
plain leaf fields, their errors and nulls, and sub-selections collected once per document."""

from __future__ import annotations

import asyncio
import enum
from typing import Any

import strawberry
from graphql import DocumentNode, execute, parse

from dra_mirror.schema.execution import PLAIN_LEAF, PlainFieldsExecution
from dra_mirror.schema.resolvers import direct_resolvers
from dra_mirror.service.http.documents import DocumentCache


@strawberry.enum
class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@strawberry.type
class Item:
    n: strawberry.Private[int]
    label: str | None = None  # an attribute: no resolver

    @strawberry.field
    def name(self) -> str:
        return f"item-{self.n}"

    @strawberry.field
    def colour(self) -> Colour:
        return Colour.RED if self.n % 2 else Colour.BLUE

    @strawberry.field
    def maybe(self) -> int | None:
        return self.n if self.n % 2 else None

    @strawberry.field
    def broken(self) -> str | None:
        raise ValueError(f"no value for {self.n}")

    @strawberry.field
    def missing(self) -> str:  # declared non-null, answers null: the parent is nulled
        return None  # type: ignore[return-value]

    @strawberry.field
    def wrong(self) -> int:  # not an Int: coercion fails
        return "seven"  # type: ignore[return-value]

    @strawberry.field
    def later(self) -> str:  # a plain-looking method answering an awaitable
        async def value() -> str:
            return f"later-{self.n}"

        return value()  # type: ignore[return-value]


@strawberry.type
class Query:
    @strawberry.field
    def items(self, count: int, prefix: str | None = None) -> list[Item]:
        return [Item(n=n, label=prefix and f"{prefix}{n}") for n in range(count)]

    @strawberry.field
    def item(self, n: int) -> Item | None:
        return Item(n=n)


def schemas() -> tuple[strawberry.Schema, strawberry.Schema]:
    fast = strawberry.Schema(query=Query, execution_context_class=PlainFieldsExecution)
    assert direct_resolvers(fast) > 5
    return fast, strawberry.Schema(query=Query)


def answer(
    schema: strawberry.Schema, text: str | DocumentNode, variables: dict | None = None, **kwargs
):
    result = execute(
        schema._schema,
        parse(text) if isinstance(text, str) else text,
        variable_values=variables,
        executor_class=schema.execution_context_class,
        **kwargs,
    )
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    errors = [(e.message, e.path) for e in result.errors or ()]
    return result.data, sorted(errors, key=str)


def test_plain_leaf_fields_are_marked() -> None:
    fast, _ = schemas()
    item = fast._schema.type_map["Item"]
    assert {name for name, f in item.fields.items() if PLAIN_LEAF in f.extensions} == {
        "name",
        "colour",
        "maybe",
        "broken",
        "missing",
        "wrong",
        "later",
        "label",
    }
    assert PLAIN_LEAF not in fast._schema.query_type.fields["items"].extensions


def test_plain_leaf_fields_answer_values_errors_and_nulls_as_graphql_core() -> None:
    fast, plain = schemas()
    for text in (
        "{ items(count: 3) { name colour maybe } }",
        "{ items(count: 2) { name broken } }",
        "{ items(count: 2) { name missing } }",
        "{ item(n: 1) { name missing } }",
        "{ items(count: 2) { wrong } }",
        "{ items(count: 2, prefix: null) { name later label } }",
        '{ items(count: 3, prefix: "x") { label name } }',
    ):
        expected = answer(plain, text)
        assert answer(fast, text) == expected, text
        assert expected[0] is not None or expected[1], text
    data, errors = answer(fast, "{ items(count: 2) { name broken } }")
    assert data == {"items": [{"name": "item-0", "broken": None},
                              {"name": "item-1", "broken": None}]}  # fmt: skip
    assert errors == [("no value for 0", ["items", 0, "broken"]),
                      ("no value for 1", ["items", 1, "broken"])]  # fmt: skip


def test_sub_selections_collected_once_per_document_answer_every_variable_alike() -> None:
    fast, plain = schemas()
    text = """query($count: Int!) { items(count: $count) { name ...more } item(n: 1) { name } }
              fragment more on Item { colour maybe }"""
    # `collected` lives as long as its parsed document, as in the HTTP view's document cache
    # (its keys are the ids of the document's nodes: a document parsed anew could reuse them)
    document = parse(text)
    collected: dict = {}
    for count in (1, 3, 0, 2):
        variables = {"count": count}
        expected = answer(plain, text, variables)
        assert answer(fast, document, variables, collected=collected) == expected
    assert collected  # kept, and reused by the later executions


def test_documents_with_directives_collect_their_fields_each_time() -> None:
    fast, _ = schemas()
    cache = DocumentCache(fast._schema, max_bytes=10_000, max_document_bytes=1_000)
    assert cache.prepare("{ items(count: 1) { name } }").collected == {}
    skipping = cache.prepare(
        "query($more: Boolean!) { items(count: 1) { name colour @include(if: $more) } }"
    )
    assert skipping.document is not None and skipping.collected is None
    for more in (True, False):
        data, _ = answer(fast, "query($more: Boolean!) { items(count: 1) { name colour "
                         "@include(if: $more) } }", {"more": more})  # fmt: skip
        assert ("colour" in data["items"][0]) is more
    assert cache.prepare("{ items(count: 1) { nope } }").collected is None  # invalid


def test_the_budget_counts_plain_leaf_fields() -> None:
    from dra_mirror.schema.guard.budget import budgeted_execution

    text = "{ items(count: 30) { name colour maybe } }"  # 1 + 30 * 3 fields
    for max_fields, exceeded in ((80, True), (91, False)):
        budgeted = strawberry.Schema(
            query=Query, execution_context_class=budgeted_execution(max_fields=max_fields,
                                                                    max_seconds=5.0),
        )  # fmt: skip
        direct_resolvers(budgeted)

        async def run(schema: strawberry.Schema = budgeted) -> object:
            return await schema.execute(text)

        result: Any = asyncio.run(run())
        codes = [e.extensions["code"] for e in result.errors or ()]
        assert codes == (["BUDGET_EXCEEDED"] if exceeded else []), (max_fields, result.errors)
        assert (result.data is None) is exceeded


def test_a_subscription_event_keeps_no_plans_of_earlier_events() -> None:
    fast, _ = schemas()
    executor: Any = PlainFieldsExecution.build(fast._schema, parse("{ items(count: 2) { name } }"))
    first = executor.build_per_event_executor(None)
    assert first.execute_operation().data == {"items": [{"name": "item-0"}, {"name": "item-1"}]}
    assert first._plans and first._plans is not executor._plans
    assert executor.build_per_event_executor(None)._plans == {}
