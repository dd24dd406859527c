"""The pages of one paged LIST, the next one asked for while the current one is decoded.

A LIST of 40,000 claims is 80 pages of 500; asked one after the other, each page waits for the
API server's answer (tens of ms for a real one) and then for its own decoding, so the sync takes
the sum of both. `PagedList` asks for the next page as soon as a page's body is in: the
`continue` token is read from the body's list metadata, which the API server writes before
its items (`{"kind":…,"apiVersion":…,"metadata":{…,"continue":"…"},"items":[…]}`), by
decoding only those first bytes. While the current page is decoded, the next is on its way.

Promises: the pages are the ones asked for one after the other — a body read ahead is used only
when its token is the one the decoded page names (otherwise it is dropped and the right page is
asked for); at most one page is read ahead; a page read ahead and not used (the list ended,
failed or was cancelled) is cancelled, its error never raised nor logged. An error of the page
read ahead (an expired token, an unreachable server) is raised when that page is asked for, as
it was without reading ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import msgspec

# How far into a body the list metadata is looked for (it is the first ~300 bytes).
_HEAD_BYTES = 4096
_ITEMS = b'"items":'


class _ListMeta(msgspec.Struct):
    continue_: str = msgspec.field(default="", name="continue")


class _Head(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)


_head = msgspec.json.Decoder(_Head)


def continue_token(body: bytes) -> str | None:
    """The list's `continue` token read from the metadata before its items; None when there is
    none, or the body does not start so (the caller then waits for its decoding)."""
    at = body.find(_ITEMS, 0, _HEAD_BYTES)
    if at <= 0:
        return None
    try:
        head = _head.decode(body[:at] + b'"items":[]}')
    except (msgspec.DecodeError, ValueError):
        return None
    return head.metadata.continue_ or None


def _forget(task: asyncio.Task[bytes]) -> None:
    """Cancel a page read ahead and not used; its outcome is nobody's."""
    task.cancel()

    def retrieved(done: asyncio.Task[bytes]) -> None:
        if not done.cancelled():
            done.exception()  # retrieved: asyncio does not log it

    task.add_done_callback(retrieved)


class PagedList:
    """`get(token)` gives the page after `token` (None: the first), read ahead when it can be."""

    def __init__(self, fetch: Callable[[str | None], Awaitable[bytes]]) -> None:
        self._fetch = fetch
        self._ahead: tuple[str, asyncio.Task[bytes]] | None = None

    async def _asked(self, token: str | None) -> bytes:
        return await self._fetch(token)

    async def get(self, token: str | None) -> bytes:
        """The page after `token`; then the page after it is asked for already."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == token:
            body = await ahead[1]
        else:
            if ahead is not None:
                _forget(ahead[1])
            body = await self._fetch(token)
        following = continue_token(body)
        if following is not None:
            task = asyncio.ensure_future(self._asked(following))
            self._ahead = (following, task)
            # One turn of the loop: the request leaves (a pooled connection sends it without
            # waiting) before the caller decodes this page, which holds the loop.
            await asyncio.sleep(0)
        return body

    def close(self) -> None:
        """Cancel the page read ahead, if any (the list ended, failed or was cancelled)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs it
                _forget(ahead[1])
