"""Relay-style connections (`first`/`after`, `edges { node cursor }`, `pageInfo`, `totalCount`).

Cursors are keyset cursors, not offsets: a cursor is the sort key of the last item seen
(base64 of its JSON), and the next page starts strictly after that key. So paging stays
correct while objects come and go between requests — an item inserted before the cursor is
simply not repeated. Every connection sorts by object identity (cluster, namespace, name or
the device key), which is total and stable. `paginate` sorts the items itself, unless the
caller says they are `presorted`; the cursors are the same either way.

Lists a store pages itself (`StateReader.select`: claims, pods, devices) come as a `Page` that
`connection` turns into the same connection, cursors and all (`cursor_key` reads a cursor for
the store).

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
from dra_mirror.service.stores.protocols import Page

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


MAX_CURSOR = 1024
"""Longest cursor read, in characters: ours are base64 of a few keys (a hundred or so)."""
_SHOWN = 16  # characters of a bad cursor repeated in its error


def bad_cursor(cursor: str, problem: str) -> GraphQLError:
    """The error for a cursor the client made up or mangled: it names the problem and repeats
    at most a short prefix of the cursor (never a megabyte of it)."""
    shown = cursor if len(cursor) <= _SHOWN else cursor[:_SHOWN] + "…"
    return GraphQLError(
        f"invalid cursor {shown!r} ({len(cursor)} characters): {problem}",
        extensions={"code": "BAD_CURSOR"},
    )


_SCALARS = (str, int, float, bool, type(None))


def decode_cursor(cursor: str) -> SortKey:
    if len(cursor) > MAX_CURSOR:
        raise bad_cursor(cursor, f"longer than {MAX_CURSOR} characters")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        raw = base64.b64decode(padded.encode(), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise bad_cursor(cursor, "not base64url") from None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_cursor(cursor, "not a cursor of this API") from None
    if not isinstance(value, list) or not all(isinstance(part, _SCALARS) for part in value):
        raise bad_cursor(cursor, "not a cursor of this API")
    return tuple(value)


def page_size(first: int | None, settings: GraphQLSettings) -> int:
    if first is None:
        return min(settings.default_page_size, settings.max_page_size)
    if first < 0:
        raise GraphQLError("`first` must not be negative", extensions={"code": "BAD_PAGE"})
    return min(first, settings.max_page_size)


def cursor_key(after: str | None) -> SortKey | None:
    """The sort key a cursor names, for a store's `select` (keys are strings: a cursor of any
    other shape is not one of these lists')."""
    if not after:
        return None
    key = decode_cursor(after)
    if not key or not all(isinstance(part, str) and "\0" not in part for part in key):
        raise bad_cursor(after, "not a cursor of this list")
    return key


def connection(page: Page, *, key: Callable[[I], SortKey], node: Callable[[I], T]) -> Connection[T]:
    """A store's page (`StateReader.select`) as a connection."""
    edges = [Edge(node=node(item), cursor=encode_cursor(tuple(key(item)))) for item in page.items]
    return Connection(
        edges=edges,
        page_info=PageInfo(
            has_next_page=page.has_next,
            has_previous_page=page.has_previous,
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else None,
        ),
        total_count=page.total,
    )


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
        try:
            start = bisect_right(ordered, decode_cursor(after), key=lambda item: tuple(key(item)))
        except TypeError:  # a made-up key whose parts do not compare with this list's keys
            raise bad_cursor(after, "not a cursor of this list") from None
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
