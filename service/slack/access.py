"""Who asks in Slack, and what they may see: the configured mapping applied to a command.

`asker_scope(control, form)` turns a slash command's `team_id` and `user_id` into the access
scope its answer is computed with (`service.access.slack.SlackAccess`: user, else user groups,
else workspace). A mirror serving without authentication answers everyone with everything;
an asker the mapping does not know gets a polite, ephemeral refusal instead of an answer.
Answers are ephemeral (only the asker sees them), so a reply in a channel never shows others
what the asker may see.
"""

from __future__ import annotations

from typing import Any

from dra_mirror.service.access.errors import AccessError
from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.access.slack import REFUSAL

from . import blocks


async def asker_scope(control: Any, form: dict[str, str]) -> AccessScope | blocks.Message | None:
    """The asker's scope, the reply refusing them, or None without authentication (the
    request's own scope stands)."""
    if control is None or control.insecure:
        return None
    if control.slack is None:
        return blocks.render_error(REFUSAL)
    try:
        subject = await control.slack.subject(form.get("team_id", ""), form.get("user_id", ""))
    except AccessError as error:
        return blocks.render_error(error.message)
    return subject.scope
