"""Slack askers: a workspace, user or user group mapped to a scope by configuration.

A slash command says who asks (`team_id`, `user_id`) but not their groups. `SlackAccess`
decides, in this order: the user's own mapping; else the union of the mappings of the mapped
user groups the user belongs to (asked of a `UserGroups` directory, e.g. Slack's
`usergroups.users.list` through `service.slack.directory`); else the workspace's mapping; else
the asker is refused — `Forbidden`, with a polite message the endpoint shows as the reply.
"""

from __future__ import annotations

from collections.abc import Collection
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


class UserGroups(Protocol):
    async def groups_of(self, user_id: str, candidates: Collection[str]) -> set[str]:
        """Which of the `candidates` user groups `user_id` belongs to."""
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
        scope: AccessScope | None = None
        groups: set[str] = set()
        if s.user_groups and self.directory is not None:
            groups = await self.directory.groups_of(user_id, list(s.user_groups))
            for group in sorted(groups):
                granted = s.user_groups[group]
                scope = granted if scope is None else scope.union(granted)
        if scope is None:
            scope = s.workspaces.get(team_id)
        if scope is None:
            raise Forbidden(REFUSAL)
        return Subject(name=name, method="slack", scope=scope, groups=tuple(sorted(groups)))
