"""`/gpu plan`: where a pasted or attached manifest would land, as a Block Kit message.

    /gpu plan <YAML pasted after the command, in a ``` block or not>
    /gpu plan <a Slack file: its link (…/files/U…/F…/name) or its id F…> [cluster]

A file is read through Slack's Web API with the app's bot token (`SlackBot`, from
`DRA_MIRROR_SLACK_BOT_TOKEN[_FILE]`; scope `files:read`): `files.info` (slack_sdk's
`AsyncWebClient`) gives its `url_private`, which is downloaded with the token as a bearer —
only when it starts with an allowed prefix (`https://files.slack.com/` by default), and at most
`MAX_FILE_BYTES`. The answer is the plan question's (`service.questions.plan`: the graph's
`plan`, as facts).

Promises: never raises for anything a person can type or attach: a file that cannot be read,
YAML that does not parse and refusals of the graph come back as a message saying why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from dra_mirror.service.questions.asking import QuestionError
from dra_mirror.service.questions.protocol import Questions
from dra_mirror.service.settings import SettingsError

from . import blocks

if TYPE_CHECKING:  # httpx and slack_sdk load when a plan reads a Slack file
    import httpx

ENV_PREFIX = "DRA_MIRROR_SLACK_"
SLACK_API = "https://slack.com/api/"
SLACK_FILES = ("https://files.slack.com/",)
MAX_FILE_BYTES = 256 * 1024
MAX_ITEMS = 12  # pods shown per cluster (the rest counted)

_FILE_ID = re.compile(r"^F[A-Z0-9]{6,}$")
_FILE_LINK = re.compile(r"^<?https://[^/\s]+/files/[^/\s]+/(F[A-Z0-9]{6,})(?:/[^\s>]*)?>?$")
_FENCE = re.compile(r"^```[a-zA-Z]*\n?|\n?```$")


class BotToken:
    """The bot token; shows as `BotToken(********)` wherever it is printed."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value.strip():
            raise SettingsError("the Slack bot token is empty")
        self._value = value.strip()

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "BotToken(********)"

    __str__ = __repr__


@dataclass(frozen=True)
class SlackBot:
    """What the mirror needs to call Slack's Web API as its bot."""

    token: BotToken
    api_url: str = SLACK_API  # slack_sdk's base_url (a test points it at a loopback server)
    file_urls: tuple[str, ...] = SLACK_FILES  # prefixes a file's url_private must start with


class FileSource(Protocol):
    async def text_of(self, file_id: str) -> str:
        """The text of a Slack file (QuestionError when it cannot be read)."""
        ...


class SlackFiles:
    """Slack files read with the bot token: `files.info`, then `url_private`."""

    def __init__(self, bot: SlackBot, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.bot = bot
        self.transport = transport

    async def text_of(self, file_id: str) -> str:
        import httpx
        from slack_sdk.errors import SlackApiError
        from slack_sdk.web.async_client import AsyncWebClient

        client = AsyncWebClient(token=self.bot.token.reveal(), base_url=self.bot.api_url)
        try:
            info = await client.files_info(file=file_id)
        except SlackApiError as error:
            raise QuestionError(
                f"Slack would not give file {file_id}: {error.response.get('error')}"
            ) from None
        file = info.get("file") or {}
        url = file.get("url_private_download") or file.get("url_private") or ""
        if not url.startswith(self.bot.file_urls):
            raise QuestionError(f"file {file_id} is not served from Slack's file host")
        if int(file.get("size") or 0) > MAX_FILE_BYTES:
            raise QuestionError(f"file {file_id} is larger than {MAX_FILE_BYTES // 1024} KiB")
        headers = {"authorization": f"Bearer {self.bot.token.reveal()}"}
        async with httpx.AsyncClient(timeout=10, transport=self.transport) as http:
            try:
                async with http.stream("GET", url, headers=headers) as response:
                    if response.status_code != 200:
                        raise QuestionError(
                            f"file {file_id}: Slack answered {response.status_code}"
                        )
                    body = b""
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_FILE_BYTES:
                            raise QuestionError(
                                f"file {file_id} is larger than {MAX_FILE_BYTES // 1024} KiB"
                            )
            except httpx.HTTPError as error:
                raise QuestionError(f"file {file_id} could not be downloaded: {error}") from None
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            raise QuestionError(f"file {file_id} is not text") from None


def split_request(rest: str) -> tuple[str | None, str | None, str | None]:
    """(file id, YAML text, cluster) of what follows `plan`."""
    words = rest.split()
    if words and (_FILE_ID.match(words[0]) or _FILE_LINK.match(words[0])) and len(words) <= 2:
        found = _FILE_ID.match(words[0]) or _FILE_LINK.match(words[0])
        assert found is not None
        file_id = found.group(1) if found.groups() else found.group(0)
        return file_id, None, words[1] if len(words) > 1 else None
    text = _FENCE.sub("", rest.strip())
    return None, text, None


async def answer_plan(
    questions: Questions, rest: str, *, files: FileSource | None
) -> blocks.Message:
    file_id, text, cluster = split_request(rest)
    try:
        if file_id is not None:
            if files is None:
                raise QuestionError(
                    "reading Slack files needs the app's bot token (DRA_MIRROR_SLACK_BOT_TOKEN); "
                    "paste the manifest after `plan` instead"
                )
            text = await files.text_of(file_id)
        if not text:
            raise QuestionError("usage: /gpu plan <manifest YAML, or a Slack file link>")
        return render_plan(await questions.plan(text, cluster))
    except QuestionError as error:
        return blocks.render_error(str(error))


def _item_line(item: Mapping[str, Any]) -> str:
    who = f"{item['namespace']}/{item['name']}" if item["kind"] == "Pod" else item["workload"]
    who = blocks.escape(who)
    if item["placeable"]:
        devices = ", ".join(
            f"{d['pool']}/{d['device']}" for c in item["claims"] for d in c["devices"]
        )
        return f":white_check_mark: `{who}` → *{blocks.escape(item['node'] or 'any node')}* ({blocks.escape(devices) or 'no devices'})"
    verdict = item["verdict"].lower().replace("_", "-")
    return f":hourglass: `{who}` would wait: *{verdict}* — {blocks.escape(item['message'])}"


def render_plan(plan: Mapping[str, Any]) -> blocks.Message:
    parts: list[dict[str, Any]] = []
    clusters = plan["clusters"]
    for c in clusters:
        lines = [_item_line(i) for i in c["items"][:MAX_ITEMS]]
        if len(c["items"]) > MAX_ITEMS:
            lines.append(f"… and {len(c['items']) - MAX_ITEMS} more")
        head = f"*{blocks.escape(c['cluster'])}*: {c['summary']}"
        parts.append(blocks.section(head + "\n" + "\n".join(lines)))
        if c["findings"]:
            found = "; ".join(f"{f['rule']} ({f['object']})" for f in c["findings"][:5])
            parts.append(blocks.context(blocks.escape(f"lint: {found}")))
    if plan["skipped"]:
        parts.append(
            blocks.context(blocks.escape("not planned: " + "; ".join(plan["skipped"][:5])))
        )
    if not clusters:
        parts.append(blocks.section("No cluster to plan in (none mirrored, or none you may see)."))
    placeable = [c["cluster"] for c in clusters if c["placeable"]]
    summary = (
        f"would land in {', '.join(placeable)}" if placeable else "would wait in every cluster"
    )
    return blocks.message(f"plan: {summary}", parts)
