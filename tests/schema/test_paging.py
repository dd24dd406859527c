"""Relay paging: keyset cursors, page-size cap, totalCount, bad input."""

from __future__ import annotations

from dra_mirror.schema.paging import decode_cursor, encode_cursor, paginate
from dra_mirror.service.settings import GraphQLSettings

from . import world

Q = """query($first: Int, $after: String) { devices(first: $first, after: $after) {
  totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  edges { cursor node { cluster driver pool name } } nodes { name } } }"""


async def test_pages_cover_everything_once_in_order(gql):
    seen, after, pages = [], None, 0
    while True:
        page = (await gql(Q, first=2, after=after))["devices"]
        pages += 1
        assert page["pageInfo"]["hasPreviousPage"] is (after is not None)
        assert [e["node"]["name"] for e in page["edges"]] == [n["name"] for n in page["nodes"]]
        assert page["pageInfo"]["endCursor"] == page["edges"][-1]["cursor"]
        seen += [tuple(e["node"].values()) for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == sorted(world.valid_devices())
    assert pages == (len(seen) + 1) // 2


async def test_first_is_capped_and_defaults(gql):
    capped = (await gql(Q, first=10_000))["devices"]  # the tests' app caps pages at 5
    assert len(capped["edges"]) == 5 and capped["pageInfo"]["hasNextPage"]
    assert capped["totalCount"] == len(world.valid_devices())
    default = (await gql(Q))["devices"]
    assert len(default["edges"]) == 3
    empty = (await gql(Q, first=0))["devices"]
    assert empty["edges"] == [] and empty["pageInfo"]["startCursor"] is None


async def test_bad_first_and_cursor_are_graphql_errors(gql):
    negative = await gql.raw(Q, first=-1)
    assert negative["errors"][0]["message"] == "`first` must not be negative"
    bad = await gql.raw(Q, after="not a cursor!")
    assert bad["errors"][0]["message"].startswith("invalid cursor")


def test_cursor_after_a_vanished_item_continues_after_its_place():
    settings = GraphQLSettings(default_page_size=2, max_page_size=2)
    items = ["a", "c", "d", "f"]
    page = paginate(
        items,
        key=lambda s: (s,),
        node=str.upper,
        first=2,
        after=encode_cursor(("b",)),
        settings=settings,
    )
    assert [e.node for e in page.edges] == ["C", "D"] and page.page_info.has_next_page
    assert decode_cursor(page.edges[-1].cursor) == ("d",)


def test_presorted_items_page_as_sorted_ones_do():
    settings = GraphQLSettings(default_page_size=2, max_page_size=2)
    ordered = ["a", "c", "d", "f", "g"]

    def page(items: list[str], after: str | None, presorted: bool) -> tuple:
        found = paginate(
            items,
            key=lambda s: (s,),
            node=str.upper,
            first=2,
            after=after,
            settings=settings,
            presorted=presorted,
        )
        return [(e.node, e.cursor) for e in found.edges], found.page_info, found.total_count

    after = encode_cursor(("c",))
    sorted_here = page(["f", "a", "g", "d", "c"], after, presorted=False)
    assert page(ordered, after, presorted=True) == sorted_here
    assert [node for node, _ in sorted_here[0]] == ["D", "F"] and sorted_here[2] == 5
    assert sorted_here[1].has_next_page and sorted_here[1].has_previous_page


async def test_bad_cursors_name_the_problem_and_never_echo_themselves(gql):
    huge = "A" * 200_000  # well over the cursor limit, under the request body limit
    mangled = {
        huge: "longer than 1024 characters",
        "not a cursor!": "not base64url",
        encode_cursor(()).replace("W", "e"): "not a cursor of this API",  # base64 of no JSON
        "eyJhIjoxfQ": "not a cursor of this API",  # {"a":1}
        encode_cursor(([1, 2], {"x": 1})): "not a cursor of this API",  # not scalars
        encode_cursor((1, 2, 3, 4)): "not a cursor of this list",  # ints against names
    }
    for cursor, problem in mangled.items():
        bad = await gql.raw(Q, after=cursor)
        (error,) = bad["errors"]
        assert error["extensions"]["code"] == "BAD_CURSOR", error
        assert error["message"].startswith("invalid cursor") and problem in error["message"]
        assert len(error["message"]) < 120
