"""Slack askers: a workspace, user or user group mapped to a scope by configuration.

A slash command says who asks (`team_id`, `user_id`) but not their groups. `SlackAccess`
decides, in this order:

1. the user's own mapping (`users`);
2. else, with a directory (`UserGroups`: Slack's Web API, `service.slack.directory`), the
   account is looked up first — a deactivated account or a bot is refused — and the union of
   the mappings of the mapped user groups the user belongs to is the scope;
3. else the workspace's mapping (`workspaces`) — not for guests (Slack's multi- and
   single-channel guests are people from outside the company: only a user or group mapping
   names what they may see);
4. else the asker is refused — `Forbidden`, with a polite message the endpoint shows as the
   reply.

A directory that cannot answer (Slack's API down, rate-limited) raises `ReviewUnavailable`:
the asker is told to try again, never answered with another scope (fail closed).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from .config import SlackScopes
from .errors import Forbidden
from .scope import AccessScope
from .subjects import Subject

REFUSAL = (
    "Sorry, this mirror does not know your Slack account yet, so it cannot answer you. "
    "Ask the platform team to map your user, one of your user groups or this "
    "workspace to what you may see."
)


@dataclass(frozen=True)
class SlackAccount:
    """What the directory says of an account (Slack's `users.info`)."""

    deleted: bool = False
    bot: bool = False
    guest: bool = False  # a multi- or single-channel guest (is_restricted, is_ultra_restricted)


class UserGroups(Protocol):
    async def groups_of(self, user_id: str, candidates: Collection[str]) -> set[str]:
        """Which of the `candidates` user groups `user_id` belongs to."""
        ...

    async def account(self, user_id: str) -> SlackAccount | None:
        """The account of `user_id` (None: no such user in the workspace)."""
        ...


class SlackAccess:
    def __init__(self, scopes: SlackScopes, *, directory: UserGroups | None = None) -> None:
        self.scopes = scopes
        self.directory = directory

    async def subject(self, team_id: str, user_id: str) -> Subject:
        s = self.scopes
        name = f"{team_id}/{user_id}"
        if user_id in s.users:
            return Subject(name=name, method="slack", scope=s.users[user_id])
        account = None
        if self.directory is not None:
            account = await self.directory.account(user_id)
            if account is None or account.deleted or account.bot:
                raise Forbidden(REFUSAL)
        scope: AccessScope | None = None
        groups: set[str] = set()
        if s.user_groups and self.directory is not None:
            groups = await self.directory.groups_of(user_id, list(s.user_groups))
            for group in sorted(groups):
                granted = s.user_groups[group]
                scope = granted if scope is None else scope.union(granted)
        if scope is None and not (account is not None and account.guest):
            scope = s.workspaces.get(team_id)
        if scope is None:
            raise Forbidden(REFUSAL)
        return Subject(name=name, method="slack", scope=scope, groups=tuple(sorted(groups)))
