"""What the GraphQL view's short path reads of a request over HTTP, before any GraphQL.

The fields of a GraphQL-over-HTTP request (`request_fields`, from a JSON body or a GET's
query string: `query_params`), whether it is JSON (`is_json`) and whether its client takes a
plain `application/json` answer (`answers_plain_json`); the body read whole (`read_body`) and
given again to whoever answers instead (`replay`); and the sub-response resolvers may set a
status, headers or a background task on (`new_sub_response`). None of it raises: what the short
path cannot read is handed to strawberry's view, which says why.
"""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import parse_qsl

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope

from dra_mirror.service.http.graphql_http import acceptable


class QueryRequest(NamedTuple):
    query: str | None
    variables: dict[str, Any] | None
    operation_name: str | None
    extensions: dict[str, Any] | None


def request_fields(data: Any) -> QueryRequest | None:
    """The fields of one GraphQL-over-HTTP request object; None when strawberry must judge it
    (not an object, a batch, fields of the wrong type: its 400 answers say why)."""
    if not isinstance(data, dict):
        return None
    query, variables = data.get("query"), data.get("variables")
    name, extensions = data.get("operationName"), data.get("extensions")
    if not (
        isinstance(query, str | None)
        and isinstance(variables, dict | None)
        and isinstance(name, str | None)
        and isinstance(extensions, dict | None)
    ):
        return None
    return QueryRequest(query, variables, name, extensions)


def query_params(scope: Scope) -> QueryRequest | None:
    params = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
    if "query" not in params and "extensions" not in params:
        return None  # GraphiQL, or strawberry's "no query" answer
    data: dict[str, Any] = {
        "query": params.get("query"),
        "operationName": params.get("operationName"),
    }
    try:
        for name in ("variables", "extensions"):
            if params.get(name):
                data[name] = orjson.loads(params[name])
    except orjson.JSONDecodeError:
        return None
    return request_fields(data)


def is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return b"application/json" in value.lower()
    return False


def answers_plain_json(scope: Scope) -> bool:
    """Whether the client takes the short path's `application/json` answer: no Accept header,
    or one naming it (or anything) and not GraphQL over HTTP's own media type, whose status
    codes strawberry's view gives (as it refuses, 406, what accepts neither)."""
    for name, value in scope["headers"]:
        if name == b"accept":
            accept = value.lower()
            if b"application/graphql-response+json" in accept:
                return False
            if b"application/json" not in accept and b"*/*" not in accept:
                return False
            return acceptable(value.decode("latin-1"))  # not application/json-patch+json…
    return True


def new_sub_response(request: Request) -> Response:
    """What strawberry's `get_sub_response` gives (a response without content-length or
    status, for resolvers to set a status, headers or a background task on), for a request
    whose Accept the short path has already judged."""
    response = Response()
    response.status_code = None  # type: ignore[assignment]
    response.raw_headers = []  # strawberry deletes the content-length: the only header
    response.dra_mirror_request = request  # type: ignore[attr-defined]
    return response


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` once, then whatever the client sends next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
