"""Relay-style connections (`first`/`after`, `edges { node cursor }`, `pageInfo`, `totalCount`).

Cursors are keyset cursors, not offsets: a cursor is the sort key of the last item seen
(base64 of its JSON), and the next page starts strictly after that key. So paging stays
correct while objects come and go between requests — an item inserted before the cursor is
simply not repeated. Every connection sorts by object identity (cluster, namespace, name or
the device key), which is total and stable. `paginate` sorts the items itself, unless the
caller says they are `presorted`; the cursors are the same either way.

`first` defaults to `GraphQLSettings.default_page_size` and is clamped to `max_page_size`
(each resolved field costs microseconds of blocked event loop; pages stay in the hundreds).
"""

from __future__ import annotations

import base64
import binascii
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import orjson
import strawberry
from graphql import GraphQLError

from dra_mirror.service.settings import GraphQLSettings

T = TypeVar("T")
I = TypeVar("I")  # noqa: E741  (the item a node is built from)

SortKey = tuple[Any, ...]


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    node: T
    cursor: str


@strawberry.type
class Connection(Generic[T]):
    edges: list[Edge[T]]
    page_info: PageInfo
    total_count: int = strawberry.field(description="Items matching the filters, all pages.")

    @strawberry.field(description="The nodes of this page, without edges.")
    def nodes(self) -> list[T]:
        return [edge.node for edge in self.edges]


def encode_cursor(key: SortKey) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(key))).decode().rstrip("=")


def decode_cursor(cursor: str) -> SortKey:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, orjson.JSONDecodeError, ValueError):
        raise GraphQLError(
            f"invalid cursor {cursor!r}", extensions={"code": "BAD_CURSOR"}
        ) from None
    if not isinstance(value, list):
        raise GraphQLError(f"invalid cursor {cursor!r}", extensions={"code": "BAD_CURSOR"})
    return tuple(value)


def page_size(first: int | None, settings: GraphQLSettings) -> int:
    if first is None:
        return min(settings.default_page_size, settings.max_page_size)
    if first < 0:
        raise GraphQLError("`first` must not be negative", extensions={"code": "BAD_PAGE"})
    return min(first, settings.max_page_size)


def paginate(
    items: Sequence[I],
    *,
    key: Callable[[I], SortKey],
    node: Callable[[I], T],
    first: int | None,
    after: str | None,
    settings: GraphQLSettings,
    presorted: bool = False,
) -> Connection[T]:
    """One page of `items` after the cursor, in the order of `key`.

    `items` may come in any order: they are sorted here by `key`. With `presorted` the caller
    promises they already are in that order, and nothing is copied or sorted: finding the
    page then costs a binary search plus the page itself (findDevices, which sorts its
    100,000 devices anyway, sorts them once). `node` is called for the page's items only.
    """
    ordered = items if presorted else sorted(items, key=lambda item: tuple(key(item)))
    start = 0
    if after:
        # JSON round-trips tuples as lists of the same scalars, so comparisons hold.
        start = bisect_right(ordered, decode_cursor(after), key=lambda item: tuple(key(item)))
    size = page_size(first, settings)
    window = ordered[start : start + size]
    edges = [Edge(node=node(item), cursor=encode_cursor(tuple(key(item)))) for item in window]
    return Connection(
        edges=edges,
        page_info=PageInfo(
            has_next_page=start + size < len(ordered),
            has_previous_page=start > 0,
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else None,
        ),
        total_count=len(ordered),
    )
