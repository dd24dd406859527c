"""Slack's own answer to "who is this asker": user groups and accounts through the Web API.

`SlackDirectory` is the access mapping's `UserGroups` (`service.access.slack`), built from
the Slack settings when a bot token is configured (`DRA_MIRROR_SLACK_BOT_TOKEN(_FILE)`,
scopes `usergroups:read` and `users:read`):

* `groups_of(user, candidates)`: which of the mapped user groups (`candidates`, from the
  access file's `slack.userGroups`) have the user among their members — one
  `usergroups.users.list` call per group;
* `account(user)`: the account (`users.info`): deactivated, a bot, a guest.

Both go through slack_sdk's `AsyncWebClient` (its retry handlers wait out Slack's rate
limits, `Retry-After`, once). Answers are cached `ttl` seconds (60 by default: a person added
to a group is recognised within a minute), bounded: at most `max_groups` groups and
`max_accounts` accounts, least recently used out, and a group's member list at most
`max_members` long (Slack's own limit on a user group is far above any team's). Concurrent
askers share one call per group or account.

Failures — Slack unreachable, an error answer (`invalid_auth`, `missing_scope`, `ratelimited`
after the retry), a malformed answer — raise `ReviewUnavailable`: the asker is told to try
again (fail closed; the error names Slack's error code, never the token).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Generic, TypeVar

import aiohttp
from cachetools import TTLCache
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from dra_mirror.service.access.errors import ReviewUnavailable
from dra_mirror.service.access.slack import SlackAccount

from .config import SlackSettings

log = logging.getLogger(__name__)

T = TypeVar("T")
UNAVAILABLE = "Slack cannot tell this mirror who you are right now ({why}); try again shortly."


class _Cache(Generic[T]):
    """Values by key for `ttl` seconds, at most `size` of them (cachetools' TTLCache, least
    recently used out); one load per key at a time, shared by the askers waiting for it."""

    def __init__(self, *, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self._values: TTLCache[str, T] = TTLCache(maxsize=size, ttl=ttl, timer=clock)
        self._loading: dict[str, asyncio.Future[T]] = {}

    async def get(self, key: str, load: Callable[[], Awaitable[T]]) -> T:
        if key in self._values:
            return self._values[key]
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            value = await load()
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # marked retrieved: only the askers waiting on it need it
            raise
        finally:
            del self._loading[key]
        future.set_result(value)
        self._values[key] = value
        return value


class SlackDirectory:
    def __init__(
        self,
        client: Any,
        *,
        ttl: float = 60.0,
        max_groups: int = 1000,
        max_accounts: int = 10_000,
        max_members: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client  # an AsyncWebClient (or what answers its two methods)
        self.max_members = max_members
        self._groups: _Cache[frozenset[str]] = _Cache(ttl=ttl, size=max_groups, clock=clock)
        self._accounts: _Cache[SlackAccount | None] = _Cache(
            ttl=ttl, size=max_accounts, clock=clock
        )

    @classmethod
    def from_settings(cls, settings: SlackSettings) -> SlackDirectory | None:
        """The directory the settings ask for (None without a bot token)."""
        if settings.bot_token is None:
            return None
        client = AsyncWebClient(
            token=settings.bot_token.reveal(),
            base_url=settings.api_url,
            timeout=5,
            retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
        )
        return cls(client, ttl=settings.directory_ttl)

    async def groups_of(self, user_id: str, candidates: Collection[str]) -> set[str]:
        found = set()
        for group in sorted(set(candidates)):
            if user_id in await self._groups.get(group, functools.partial(self._members, group)):
                found.add(group)
        return found

    async def account(self, user_id: str) -> SlackAccount | None:
        return await self._accounts.get(user_id, functools.partial(self._account, user_id))

    async def _members(self, group: str) -> frozenset[str]:
        answer = await self._call("usergroups.users.list", usergroup=group)
        users = answer.get("users")
        if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
            raise ReviewUnavailable(UNAVAILABLE.format(why="a malformed user group answer"))
        if len(users) > self.max_members:
            log.warning("slack user group %s has %d members; the first %d are read",
                        group, len(users), self.max_members)  # fmt: skip
        return frozenset(users[: self.max_members])

    async def _account(self, user_id: str) -> SlackAccount | None:
        try:
            answer = await self._call("users.info", user=user_id)
        except _NoSuchUser:
            return None
        user = answer.get("user")
        if not isinstance(user, dict):
            raise ReviewUnavailable(UNAVAILABLE.format(why="a malformed account answer"))
        return SlackAccount(
            deleted=bool(user.get("deleted")),
            bot=bool(user.get("is_bot")) or bool(user.get("is_app_user")),
            guest=bool(user.get("is_restricted")) or bool(user.get("is_ultra_restricted")),
        )

    async def _call(self, method: str, **params: str) -> dict[str, Any]:
        call = {"usergroups.users.list": self.client.usergroups_users_list,
                "users.info": self.client.users_info}[method]  # fmt: skip
        try:
            response = await call(**params)
        except SlackApiError as error:
            code = _error_code(error.response)
            if method == "users.info" and code == "user_not_found":
                raise _NoSuchUser() from error
            log.warning("slack %s failed: %s", method, code)
            raise ReviewUnavailable(UNAVAILABLE.format(why=f"Slack said {code}")) from error
        except (SlackClientError, aiohttp.ClientError, OSError, TimeoutError, ValueError) as error:
            log.warning("slack %s failed: %s", method, type(error).__name__)
            raise ReviewUnavailable(UNAVAILABLE.format(why="Slack cannot be reached")) from error
        data = response.data if hasattr(response, "data") else response
        if not isinstance(data, dict):
            raise ReviewUnavailable(UNAVAILABLE.format(why="a malformed answer"))
        return data


class _NoSuchUser(Exception):
    pass


def _error_code(response: Any) -> str:
    try:
        return str(response.get("error") or "an error")[:60]
    except Exception:
        return "an error"
