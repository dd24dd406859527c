"""Persisted queries: documents a client names by the SHA-256 of their text.

Apollo's automatic persisted queries protocol (what Apollo Client, urql and gql send):

* a request carries `extensions.persistedQuery = {"version": 1, "sha256Hash": "<hex>"}` and
  no `query`: the server runs the document registered under that hash, or answers
  `PersistedQueryNotFound` (HTTP 200, code `PERSISTED_QUERY_NOT_FOUND`, not cacheable) — the
  client then sends the same request again with the `query` text;
* a request carries both: the hash must be the SHA-256 of the text (else HTTP 400 "provided sha
  does not match query": nobody can attach another document to a known hash); the document is
  registered once it has parsed and validated, and runs;
* another `version` is HTTP 400 "Unsupported persisted query version".

`resolve_persisted(extensions, query)` applies those rules to one request and says which text
to run and whether to register it; `PersistedQueries` is the registry. It holds two kinds of
document:

* registered ahead of time (`registered`: the operator's file or directory and the mirror's
  own documents, `service.http.registered`): always known, never evicted;
* learned from clients through the protocol above, bounded in bytes — only while `learn` is
  on. A server that runs only registered documents (`refuse_unregistered`) learns nothing: a
  client cannot register a document by sending it with its hash.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol
from urllib.parse import parse_qsl, urlencode

import orjson
from starlette.types import Scope

NOT_CACHEABLE = (("cache-control", "private, no-cache, must-revalidate"),)


class PersistedQueryError(Exception):
    """A persisted-query request that cannot run: `status` and the GraphQL error to answer."""

    status = 400
    code: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"message": str(self)}
        if self.code is not None:
            error["extensions"] = {"code": self.code}
        return {"errors": [error]}


class PersistedQueryNotFound(PersistedQueryError):
    """The hash names no registered document: the client is to send the text with it."""

    status = 200
    code = "PERSISTED_QUERY_NOT_FOUND"
    headers = NOT_CACHEABLE

    def __init__(self) -> None:
        super().__init__("PersistedQueryNotFound")


class UnsupportedPersistedQueryVersion(PersistedQueryError):
    def __init__(self) -> None:
        super().__init__("Unsupported persisted query version")


class PersistedQueryHashMismatch(PersistedQueryError):
    def __init__(self) -> None:
        super().__init__("provided sha does not match query")


class BadPersistedQuery(PersistedQueryError):
    def __init__(self, what: str) -> None:
        super().__init__(f"extensions.persistedQuery: {what}")


class DocumentRegistry(Protocol):
    """Where persisted documents live."""

    def lookup(self, sha256: str) -> str | None:
        """The registered text of `sha256`, or None."""
        ...

    def is_registered(self, sha256: str) -> bool:
        """Whether a document is registered under `sha256` (the guards' registered-only rule,
        `schema.guard.limits`)."""
        ...

    def register(self, sha256: str, text: str) -> None:
        """Keep `text` under `sha256` (the caller checked that it is its hash and that it
        parsed and validated)."""
        ...


class PersistedQueries:
    """An in-process registry: the documents `registered` ahead of time (by SHA-256), and those
    learned from clients (while `learn`), bounded in bytes of text — at most `max_bytes` in
    all, least recently used first out; a document over `max_document_bytes` is not learned
    (its client simply sends the text each time)."""

    def __init__(
        self,
        *,
        max_bytes: int,
        max_document_bytes: int,
        registered: Mapping[str, str] | None = None,
        learn: bool = True,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_document_bytes = min(max_document_bytes, max_bytes)
        self.learn = learn
        self.bytes = 0
        self.registered: dict[str, str] = dict(registered or {})
        self._texts: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self.registered) + len(self._texts)

    def lookup(self, sha256: str) -> str | None:
        text = self.registered.get(sha256)
        if text is not None:
            return text
        text = self._texts.get(sha256)
        if text is not None:
            self._texts.move_to_end(sha256)
        return text

    def is_registered(self, sha256: str) -> bool:
        return sha256 in self.registered or sha256 in self._texts

    def register(self, sha256: str, text: str) -> None:
        """Learn a client's document (nothing while `learn` is off)."""
        size = len(text.encode())
        if not self.learn or self.is_registered(sha256) or size > self.max_document_bytes:
            return
        self._texts[sha256] = text
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, evicted = self._texts.popitem(last=False)
            self.bytes -= len(evicted.encode())


class Resolved(NamedTuple):
    """The document a request runs: its text, its SHA-256, and whether to register it."""

    text: str
    sha256: str
    register: bool


def resolve_persisted(
    extensions: dict[str, Any], query: str | None, registry: DocumentRegistry
) -> Resolved | None:
    """The document of a request with these `extensions` and `query` (None when it carries no
    `persistedQuery` extension); raises a `PersistedQueryError` when it cannot run."""
    persisted = extensions.get("persistedQuery")
    if persisted is None:
        return None
    if not isinstance(persisted, dict):
        raise BadPersistedQuery("must be an object")
    if persisted.get("version") != 1:
        raise UnsupportedPersistedQueryVersion()
    sha256 = persisted.get("sha256Hash")
    if not isinstance(sha256, str) or not sha256:
        raise BadPersistedQuery("sha256Hash must be a non-empty string")
    if query is None:
        text = registry.lookup(sha256)
        if text is None:
            raise PersistedQueryNotFound()
        return Resolved(text, sha256, register=False)
    if hashlib.sha256(query.encode()).hexdigest() != sha256:
        raise PersistedQueryHashMismatch()
    return Resolved(query, sha256, register=True)


def with_query(scope: Scope, body: bytes, text: str) -> tuple[Scope, bytes]:
    """The request (an ASGI scope and its body) as if it had carried `text` as its `query`:
    what a persisted query handed to strawberry's view carries."""
    if scope["method"] == "GET":
        params = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        query_string = urlencode([*params, ("query", text)]).encode("latin-1")
        return {**scope, "query_string": query_string}, body
    return scope, orjson.dumps({**orjson.loads(body), "query": text})
