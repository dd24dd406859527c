"""`POST /slack/commands`: Slack slash commands, verified, answered from the app's own graph.

Per request, in this order:

1. Slack commands off (no signing secret configured) → 404; a body over 64 KiB → 413.
2. `ssl_check=1` (Slack probing the certificate) → empty 200, nothing else done (as Bolt does).
3. The v0 signature (`X-Slack-Signature` = HMAC-SHA256 of `v0:{X-Slack-Request-Timestamp}:{body}`
   with the signing secret) is checked by slack_sdk's `SignatureVerifier`, which also refuses a
   timestamp more than 5 minutes from now. Missing, forged or stale → 401, and the command is
   not run. A timestamp that is not a short run of ASCII digits, or a body that is not UTF-8,
   is refused the same way before the verifier sees it (a 401, never a 500).
4. The command's text is answered (`service.slack.commands.answer`) by the questions of
   `service.questions`, read from the store in this process (`LocalQuestions`) with the
   asker `/graphql` would build for the request (`asker_for(request)`: its store, history
   and clock) seen through the Slack asker's scope (`service.slack.access`).
5. Slack waits 3 s for the HTTP reply. An answer ready within `answer_within` goes back in it;
   otherwise the reply is an immediate "working on it" and the answer is posted (httpx) to the
   command's `response_url` once ready — only when that URL starts with an allowed prefix
   (Slack's hooks host by default), so a signed request cannot make the mirror post elsewhere.

Promises: the secret is never logged (only "signature rejected" and the reason); an internal
failure answers a short error message, never a traceback in Slack.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from dra_mirror.service.questions.asker import Asker
from dra_mirror.service.questions.local import LocalQuestions
from dra_mirror.service.questions.protocol import Questions
from dra_mirror.service.questions.scoped import ScopedReader

from . import blocks
from .access import asker_scope
from .commands import answer
from .config import SlackSettings
from .plan import SlackFiles

if TYPE_CHECKING:
    from slack_sdk.signature import SignatureVerifier

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
MAX_TIMESTAMP = 12  # digits of X-Slack-Request-Timestamp (Unix seconds)
POST_TIMEOUT = 10.0

AskerFor = Callable[[Request], Awaitable[Asker]]


class SlackCommands:
    """The endpoint (`handle`); `asker_for(request)` is who asks, as `/graphql` would see the
    request (the app's store, history and clock, and the request's scope)."""

    def __init__(
        self,
        asker_for: AskerFor,
        settings: SlackSettings | None,
        *,
        access: Callable[[], Any] = lambda: None,
    ) -> None:
        self.asker_for = asker_for
        self.settings = settings
        self.access_of = access  # the app's AccessControl (service.slack.access)
        self.verifier: SignatureVerifier | None = None
        if settings is not None:  # slack_sdk loads only when Slack is configured
            from slack_sdk.signature import SignatureVerifier

            self.verifier = SignatureVerifier(settings.signing_secret.reveal())

    async def handle(self, request: Request) -> Response:
        if self.settings is None or self.verifier is None:
            return PlainTextResponse(
                "Slack commands are off: set DRA_MIRROR_SLACK_SIGNING_SECRET(_FILE)\n",
                status_code=404,
            )
        body = await read_body(request)
        if body is None:
            return PlainTextResponse("request body too large\n", status_code=413)
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        if form.get("ssl_check") == "1":
            return Response(status_code=200)
        reason = self.rejection(body, request)
        if reason:
            client = request.client.host if request.client else "?"
            log.warning("slack command rejected from %s: %s", client, reason)
            return PlainTextResponse("invalid Slack signature\n", status_code=401)
        return await self.respond(request, form)

    def rejection(self, body: bytes, request: Request) -> str | None:
        """Why the request is not Slack's (None when it is)."""
        timestamp = request.headers.get("x-slack-request-timestamp")
        signature = request.headers.get("x-slack-signature")
        if not timestamp or not signature:
            return "unsigned (no X-Slack-Signature or X-Slack-Request-Timestamp)"
        # ASCII digits only, and no longer than a Unix time in seconds can be for millennia:
        # str.isdigit() also accepts "²" (which int() refuses), and int() refuses numbers of
        # more than 4,300 digits, so either would otherwise escape as a 500.
        if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > MAX_TIMESTAMP:
            return "malformed timestamp"
        try:
            body.decode("utf-8")  # slack_sdk decodes the body to sign it; Slack sends UTF-8
        except UnicodeDecodeError:
            return "body is not UTF-8"
        assert self.verifier is not None
        if not self.verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
            age = abs(self.verifier.clock.now() - int(timestamp))
            return "stale timestamp (over 5 minutes)" if age > 300 else "signature mismatch"
        return None

    async def respond(self, request: Request, form: dict[str, str]) -> Response:
        assert self.settings is not None
        asker = await self.asker_for(request)
        scope = await asker_scope(self.access_of(), form)
        if isinstance(scope, dict):  # the asker is not mapped to any scope: a polite refusal
            log.info("slack command from unmapped %s/%s refused", form.get("team_id", "?"),
                     form.get("user_id", "?"))  # fmt: skip
            return JSONResponse(scope)
        if scope is not None:  # the Slack asker's own scope (history only when it grants it)
            asker = Asker(
                ScopedReader(asker.reader.store, scope), asker.history, asker.now, asker.utilization
            )
        questions = LocalQuestions(asker)
        text = form.get("text", "")
        command = form.get("command") or "/gpu"
        log.info("slack command %s %r from %s", command, text, form.get("user_id", "?"))
        task = asyncio.create_task(
            safe_answer(
                questions,
                text,
                command,
                now=asker.now(),
                files=SlackFiles(self.settings.bot) if self.settings.bot is not None else None,
            )
        )
        if self.settings.answer_within > 0:
            done, _ = await asyncio.wait({task}, timeout=self.settings.answer_within)
            if done:
                return JSONResponse(task.result())
        url = form.get("response_url", "")
        if not url.startswith(self.settings.response_urls):
            task.cancel()
            log.warning("slack command: response_url refused (not one of the allowed prefixes)")
            return JSONResponse(
                blocks.render_error("The answer takes longer than Slack waits, and this "
                                    "request has no usable response_url to send it to.")
            )  # fmt: skip
        working = {"response_type": "ephemeral", "text": f"Working on `{blocks.escape(text)}`…"}
        return JSONResponse(working, background=BackgroundTask(post_when_ready, task, url))


async def safe_answer(questions: Questions, text: str, command: str, **kw: Any) -> blocks.Message:
    try:
        return await answer(questions, text, command=command, **kw)
    except Exception:
        log.exception("slack command %r failed", text)
        return blocks.render_error("Internal error answering this command (see the mirror's log).")


async def post_when_ready(task: asyncio.Task[blocks.Message], url: str) -> None:
    """Post the answer to Slack's response_url (runs after the HTTP reply was sent)."""
    import httpx  # loaded when an answer is posted to Slack, not with the app

    reply = await task
    try:
        async with httpx.AsyncClient(timeout=POST_TIMEOUT) as client:
            response = await client.post(url, json=reply)
        if response.status_code >= 400:
            log.warning("slack response_url answered %s", response.status_code)
    except httpx.HTTPError as error:
        # The URL carries a one-time token: log only its host.
        log.warning("posting to slack response_url on %s failed: %s", httpx.URL(url).host, error)


async def read_body(request: Request) -> bytes | None:
    """The body, or None past MAX_BODY (Slack's command forms are a few hundred bytes)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
