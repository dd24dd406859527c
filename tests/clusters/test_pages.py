"""The next page of a LIST is asked for while the current one is decoded (`PagedList`), and only
the pages the list names are ever used."""

from __future__ import annotations

import asyncio
import gc

import orjson
import pytest

from dra_mirror.service.clusters.errors import Expired
from dra_mirror.service.clusters.pages import PagedList, continue_token


def page(token: str, items: int = 2) -> bytes:
    metadata = {"resourceVersion": "7", **({"continue": token} if token else {})}
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": metadata}
    return orjson.dumps({**body, "items": [{"metadata": {"name": str(i)}} for i in range(items)]})


def test_the_token_is_read_from_the_metadata_before_the_items() -> None:
    assert continue_token(page("abc")) == "abc"
    assert continue_token(page("")) is None
    items_first = b'{"items":[],"metadata":{"continue":"abc"}}'
    assert continue_token(items_first) is None  # not where an API server writes it: wait
    assert continue_token(b'{"metadata":{"continue":1},"items":[]}') is None
    assert continue_token(b"not json") is None
    assert continue_token(b'{"metadata":{"continue":"a"}') is None  # no items at all


class Server:
    """Pages a -> b -> c -> end; records each ask and when it was made."""

    def __init__(self, pages: dict[str | None, bytes]) -> None:
        self.pages = pages
        self.asked: list[str | None] = []
        self.gate: dict[str | None, asyncio.Event] = {}

    async def fetch(self, token: str | None) -> bytes:
        self.asked.append(token)
        if token in self.gate:
            await self.gate[token].wait()
        body = self.pages[token]
        if body == b"expired":
            raise Expired("continue token expired", cluster="c")
        return body


async def test_the_next_page_is_asked_for_before_the_current_one_is_decoded() -> None:
    server = Server({None: page("a"), "a": page("b"), "b": page("")})
    pages = PagedList(server.fetch)
    assert await pages.get(None) == page("a")
    assert server.asked == [None, "a"]  # on its way while the caller decodes page one
    assert await pages.get("a") == page("b")
    assert server.asked == [None, "a", "b"]
    assert await pages.get("b") == page("")
    assert server.asked == [None, "a", "b"]  # the last page names no next one
    pages.close()


async def test_a_page_read_ahead_for_another_token_is_dropped() -> None:
    server = Server({None: page("a"), "a": page(""), "other": page("")})
    server.gate["a"] = asyncio.Event()  # the read-ahead never answers
    pages = PagedList(server.fetch)
    await pages.get(None)
    assert await pages.get("other") == page("")  # the decoded page named another token
    assert server.asked == [None, "a", "other"]


async def test_an_error_of_the_page_read_ahead_is_raised_when_it_is_asked_for() -> None:
    server = Server({None: page("a"), "a": b"expired"})
    pages = PagedList(server.fetch)
    await pages.get(None)
    with pytest.raises(Expired):
        await pages.get("a")


async def test_a_page_read_ahead_and_not_used_is_cancelled_silently() -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    server = Server({None: page("a"), "a": b"expired", "b": page("c"), "c": page("")})
    server.gate["c"] = asyncio.Event()
    failed = PagedList(server.fetch)
    await failed.get(None)
    await asyncio.sleep(0.01)  # the read-ahead failed meanwhile; the list is abandoned
    failed.close()
    pending = PagedList(server.fetch)
    await pending.get("b")  # reads "c" ahead, which never answers
    ahead = pending._ahead
    assert ahead is not None and ahead[0] == "c"
    pending.close()
    await asyncio.sleep(0.01)
    assert ahead[1].cancelled()
    del failed, pending, ahead
    gc.collect()
    await asyncio.sleep(0)
    assert seen == []  # nothing logged: neither the failure nor the cancellation
