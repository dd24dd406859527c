"""Slack settings: the signing secret, the answer budget, where answers may be posted.

Built once at the edge (`SlackSettings.from_env`, called by `dra-mirror serve`) and handed to the
app; tests build their own. Environment names follow `service.settings`
(`DRA_MIRROR_<GROUP>_<FIELD>`, group `slack`):

    DRA_MIRROR_SLACK_SIGNING_SECRET        the app's signing secret (Slack: Basic Information)
    DRA_MIRROR_SLACK_SIGNING_SECRET_FILE   or a file holding it (a mounted Kubernetes Secret)
    DRA_MIRROR_SLACK_ANSWER_WITHIN         seconds to answer in the HTTP reply (default 2.0)
    DRA_MIRROR_SLACK_RESPONSE_URLS         comma-separated prefixes a response_url must start with
    DRA_MIRROR_SLACK_BOT_TOKEN             a bot token (xoxb-…, scopes usergroups:read,
    DRA_MIRROR_SLACK_BOT_TOKEN_FILE        users:read, files:read), or a file holding it: user
                                           groups are then read from Slack (service.slack.directory)
                                           and `/gpu plan` reads attached files with it
    DRA_MIRROR_SLACK_API_URL               Slack's Web API (default https://slack.com/api/)
    DRA_MIRROR_SLACK_DIRECTORY_TTL         seconds a group's members and an account are kept (60)
    DRA_MIRROR_SLACK_FILE_URLS             prefixes an attached file's url_private must start with

Promises: the secret and the bot token are held in a `SigningSecret` whose `repr`/`str` never
show it, so logging the settings (or an exception holding them) cannot leak it; a missing or
empty file is an error naming the file, never its content.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dra_mirror.service.settings import SettingsError

from .plan import SLACK_FILES, BotToken, SlackBot

ENV_PREFIX = "DRA_MIRROR_SLACK_"
# Every variable read here (the deploy files may set only these and service.settings' own).
VARIABLES = tuple(
    ENV_PREFIX + name
    for name in (
        "SIGNING_SECRET",
        "SIGNING_SECRET_FILE",
        "ANSWER_WITHIN",
        "RESPONSE_URLS",
        "BOT_TOKEN",
        "BOT_TOKEN_FILE",
        "API_URL",
        "DIRECTORY_TTL",
        "FILE_URLS",
    )
)

# Slack posts slash-command follow-ups only to its own hooks host. Anything else in a signed
# request's response_url is refused, so the mirror never becomes a request forwarder.
SLACK_HOOKS = ("https://hooks.slack.com/",)
SLACK_API = "https://slack.com/api/"


class SigningSecret:
    """The signing secret; shows as `SigningSecret(********)` wherever it is printed."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value.strip():
            raise SettingsError("the Slack signing secret is empty")
        self._value = value.strip()

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "SigningSecret(********)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigningSecret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class SlackSettings:
    signing_secret: SigningSecret
    """Verifies `X-Slack-Signature` (HMAC-SHA256 of `v0:<timestamp>:<body>`)."""

    answer_within: float = 2.0
    """Seconds an answer may take to go back in the HTTP reply. Slack waits 3 s for it; a slower
    answer is acknowledged at once and posted to the command's `response_url`. 0: every answer
    goes to `response_url`."""

    response_urls: tuple[str, ...] = SLACK_HOOKS
    """Prefixes a `response_url` must start with to be posted to."""

    bot: SlackBot | None = None
    """The app's bot token and Web API address (`/gpu plan` reads attached files with it)."""

    bot_token: SigningSecret | None = None
    """Reads user groups and accounts from Slack's Web API (`usergroups.users.list`,
    `users.info`); without it, user groups in the access mapping match nobody."""

    api_url: str = SLACK_API
    """Slack's Web API."""

    directory_ttl: float = 60.0
    """Seconds a user group's members and an account stay cached."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SlackSettings | None:
        """The settings, or None when no secret is configured (Slack commands are off)."""
        environ = os.environ if environ is None else environ
        secret = environ.get(f"{ENV_PREFIX}SIGNING_SECRET") or None
        secret_file = environ.get(f"{ENV_PREFIX}SIGNING_SECRET_FILE") or None
        if secret and secret_file:
            raise SettingsError(
                f"{ENV_PREFIX}SIGNING_SECRET and {ENV_PREFIX}SIGNING_SECRET_FILE: give one"
            )
        if secret_file:
            secret = read_secret_file(Path(secret_file))
        if not secret:
            return None
        settings = cls(SigningSecret(secret))
        within = environ.get(f"{ENV_PREFIX}ANSWER_WITHIN")
        if within:
            try:
                answer_within = float(within)
            except ValueError:
                raise SettingsError(
                    f"{ENV_PREFIX}ANSWER_WITHIN={within!r}: expected seconds"
                ) from None
            if not 0 <= answer_within < 3:
                raise SettingsError(f"{ENV_PREFIX}ANSWER_WITHIN: Slack waits 3 s; give 0 to 2.9")
            settings = dataclasses.replace(settings, answer_within=answer_within)
        urls = environ.get(f"{ENV_PREFIX}RESPONSE_URLS")
        if urls:
            prefixes = tuple(u.strip() for u in urls.split(",") if u.strip())
            settings = dataclasses.replace(settings, response_urls=prefixes)
        return _directory(settings, environ)


def _directory(settings: SlackSettings, environ: Mapping[str, str]) -> SlackSettings:
    """The bot token and Slack's Web API: user groups and accounts are read with them, and
    `/gpu plan` reads attached files with them (`bot`)."""
    token = environ.get(f"{ENV_PREFIX}BOT_TOKEN") or None
    token_file = environ.get(f"{ENV_PREFIX}BOT_TOKEN_FILE") or None
    if token and token_file:
        raise SettingsError(f"{ENV_PREFIX}BOT_TOKEN and {ENV_PREFIX}BOT_TOKEN_FILE: give one")
    if token_file:
        token = read_secret_file(Path(token_file), what="bot token")
    api_url = environ.get(f"{ENV_PREFIX}API_URL") or SLACK_API
    if not api_url.startswith(("https://", "http://")):
        raise SettingsError(f"{ENV_PREFIX}API_URL: expected an http(s) URL")
    ttl = environ.get(f"{ENV_PREFIX}DIRECTORY_TTL")
    try:
        directory_ttl = float(ttl) if ttl else settings.directory_ttl
    except ValueError:
        raise SettingsError(f"{ENV_PREFIX}DIRECTORY_TTL={ttl!r}: expected seconds") from None
    if not 0 <= directory_ttl <= 3600:
        raise SettingsError(f"{ENV_PREFIX}DIRECTORY_TTL: give 0 to 3600 seconds")
    urls = environ.get(f"{ENV_PREFIX}FILE_URLS")
    file_urls = tuple(u.strip() for u in urls.split(",") if u.strip()) if urls else SLACK_FILES
    api_url = api_url if api_url.endswith("/") else api_url + "/"
    return dataclasses.replace(
        settings,
        bot=SlackBot(BotToken(token), api_url=api_url, file_urls=file_urls) if token else None,
        bot_token=SigningSecret(token) if token else None,
        api_url=api_url,
        directory_ttl=directory_ttl,
    )


def read_secret_file(path: Path, *, what: str = "signing secret") -> str:
    """The secret in `path` (surrounding whitespace dropped, as a mounted Secret ends in \\n)."""
    try:
        text = path.read_text()
    except OSError as error:
        raise SettingsError(f"Slack {what} file {path}: {error.strerror}") from None
    if not text.strip():
        raise SettingsError(f"Slack {what} file {path} is empty")
    return text.strip()
