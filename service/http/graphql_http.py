"""GraphQL over HTTP as the spec says, on top of strawberry's view: a mixin for `/graphql`.

`GraphQLOverHttp` goes before strawberry's `GraphQL` in the view's bases and gives it:

* request bodies checked before anything else: JSON (orjson; a nesting deeper than orjson's
  1,024 levels is a parse error), an object — or, when batching is on, a list of at most
  `max_batch` objects — whose `query`, `operationName`, `variables` and `extensions` have
  their JSON types; `null`, `42`, a string, nested arrays or `"operationName": 5` are a 400
  with a sentence, never a 500;
* media types (GraphQL over HTTP, "application/graphql-response+json"): a client whose
  `Accept` asks for `application/graphql-response+json` gets it, with the spec's status
  codes — a request error (the document does not parse or validate, a limit refused it:
  no `data` entry) is a 400, anything that executed is a 200; `application/json` keeps the
  legacy answer (200 with `errors`); an `Accept` allowing neither is a 406;
* WebSocket authentication at `connection_init` (`on_ws_connect`): a connection that did
  not authenticate on the upgrade request sends its token in the payload
  (`{"Authorization": "Bearer …"}`); until then its scope is empty. An authenticated
  connection's credentials are checked again when they expire (an OIDC token's `exp`) and at
  least every `RECHECK` seconds (a revoked Kubernetes token, once its cached review runs
  out): refused, the connection is closed (4403) — no subscription outlives its token;
* every operation a WebSocket starts (`subscribe`) takes one request of its subject's rate
  limit, as an HTTP request does (`ws_refusal`, asked by `live_frames.TextFrames`): past it,
  that operation gets an `error` (RATE_LIMITED) and is not run.

The view using it sets `self.access` (an `AccessControl`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import orjson
from cross_web import HTTPException
from starlette.responses import Response
from strawberry.exceptions import ConnectionRejectionError
from strawberry.types.execution import PreExecutionError

from dra_mirror.service.access.errors import (
    AccessError,
    Forbidden,
    ReviewUnavailable,
    Throttled,
    Unauthenticated,
)

from .access import SUBJECT_KEY

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
RECHECK = 60.0  # seconds between checks of a WebSocket's credentials (at most)
RECHECK_KEY = "dra_mirror.recheck"  # the ASGI state's task checking them

log = logging.getLogger(__name__)


def wants_graphql_response(accept: str | None) -> bool:
    """Does `Accept` prefer application/graphql-response+json (the spec's media type)?"""
    best, best_q = None, -1.0
    for item in (accept or "").split(","):
        media, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            if param.startswith("q="):
                try:
                    q = float(param[2:])
                except ValueError:
                    q = 0.0
        if media in (GRAPHQL_RESPONSE, JSON) and q > best_q:
            best, best_q = media, q
    return best == GRAPHQL_RESPONSE


# the fields of a GraphQL-over-HTTP request object and the JSON types each may have
_FIELDS = {"query": (str,), "operationName": (str,), "variables": (dict,), "extensions": (dict,)}
_NAMES = {str: "a string", dict: "an object"}


def _check_fields(request: dict[str, Any]) -> None:
    """A 400 with a sentence for a field of the wrong JSON type (`"operationName": 5`)."""
    for name, types in _FIELDS.items():
        value = request.get(name)
        if value is not None and not isinstance(value, types):
            raise HTTPException(400, f"`{name}` must be {_NAMES[types[0]]} (or absent)")


def acceptable(accept: str | None) -> bool:
    if not accept:
        return True
    media = {item.split(";")[0].strip() for item in accept.split(",")}
    return bool(media & {GRAPHQL_RESPONSE, JSON, "*/*", "application/*", "text/html"})


class GraphQLOverHttp:
    access: Any = None
    max_batch: int = 10

    def decode_json(self, data: str | bytes) -> object:
        return orjson.loads(data)

    def parse_json(self, data: str | bytes) -> Any:
        try:
            found = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raise HTTPException(400, "the request body is not JSON") from error
        if isinstance(found, dict):
            _check_fields(found)
            return found
        if isinstance(found, list):
            if not self.max_batch:
                raise HTTPException(400, "batched requests (a JSON list) are off on this server")
            if len(found) > self.max_batch:
                raise HTTPException(400, f"a batch has at most {self.max_batch} operations")
            if not found or not all(isinstance(item, dict) for item in found):
                raise HTTPException(400, "a batch is a non-empty list of JSON objects")
            for item in found:
                _check_fields(item)
            return found
        raise HTTPException(
            400, "a GraphQL request is a JSON object with `query` (and `variables`)"
        )

    async def process_result(self, request: Any, result: Any) -> Any:
        processed = await super().process_result(request, result)  # type: ignore[misc]
        if isinstance(result, PreExecutionError) and wants_graphql_response(
            request.headers.get("accept")
        ):
            processed.pop("data", None)  # a request error has no data entry (the spec)
        return processed

    def create_response(
        self, response_data: Any, sub_response: Any, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().create_response(response_data, sub_response, *args, **kwargs)  # type: ignore[misc]
        request = getattr(sub_response, "dra_mirror_request", None)
        accept = request.headers.get("accept") if request is not None else None
        if wants_graphql_response(accept):
            response.headers["content-type"] = GRAPHQL_RESPONSE
            items = response_data if isinstance(response_data, list) else [response_data]
            if response.status_code == 200 and any("data" not in item for item in items):
                response.status_code = 400
        return response

    async def get_sub_response(self, request: Any) -> Any:
        sub = await super().get_sub_response(request)  # type: ignore[misc]
        if not acceptable(request.headers.get("accept")):
            raise HTTPException(406, f"acceptable answers are {GRAPHQL_RESPONSE} and {JSON}")
        sub.dra_mirror_request = request
        return sub

    def ws_refusal(self, scope: Any) -> dict[str, Any] | None:
        """An operation a WebSocket starts takes one request of its subject's rate limit; the
        `error` payload when it may not (None: run it)."""
        subject = (scope.get("state") or {}).get(SUBJECT_KEY)
        if subject is None or self.access is None or self.access.insecure:
            return None
        try:
            self.access.rate_limit.take(subject)
        except Throttled as error:
            return {"message": error.message, "extensions": {"code": error.code}}
        return None

    def _watch_credentials(self, websocket: Any, header: str | None) -> None:
        state = websocket.scope.setdefault("state", {})
        if self.access is None or self.access.insecure or state.get(RECHECK_KEY) is not None:
            return
        state[RECHECK_KEY] = asyncio.ensure_future(self._recheck(websocket, header))

    async def _recheck(self, websocket: Any, header: str | None) -> None:
        state = websocket.scope["state"]
        while True:
            subject = state.get(SUBJECT_KEY)
            wait = RECHECK
            if subject is not None and subject.expires_at is not None:
                wait = min(wait, max(0.0, subject.expires_at - time.time()))
            await asyncio.sleep(wait)
            try:
                state[SUBJECT_KEY] = await self.access.subject(header)
            except (Unauthenticated, Forbidden) as error:
                log.info("WebSocket closed: %s", error.message)
                with contextlib.suppress(Exception):
                    await websocket.close(code=4403, reason=error.message[:120])
                return
            except (Throttled, ReviewUnavailable):
                await asyncio.sleep(min(RECHECK, 5.0))  # asked again soon: not a refusal

    async def on_ws_connect(self, context: Any) -> Any:
        request = getattr(context, "request", None)
        # the connection's own state (an empty one is still it: `or {}` would lose the subject)
        state = request.scope.setdefault("state", {}) if request is not None else {}
        if state.get(SUBJECT_KEY) is not None or self.access is None:
            if request is not None and state.get(SUBJECT_KEY) is not None:
                self._watch_credentials(request, request.headers.get("authorization"))
            return await super().on_ws_connect(context)  # type: ignore[misc]
        params = getattr(context, "connection_params", None) or {}
        header = (
            params.get("Authorization") or params.get("authorization")
            if isinstance(params, dict)
            else None
        )
        try:
            subject = await self.access.subject(header if isinstance(header, str) else None)
        except AccessError as error:
            raise ConnectionRejectionError({"message": error.message, "code": error.code}) from None
        state[SUBJECT_KEY] = subject
        context.reader.scope = subject.scope
        context.viewer = subject
        if request is not None:
            self._watch_credentials(request, header if isinstance(header, str) else None)
        return await super().on_ws_connect(context)  # type: ignore[misc]
