"""The document cache and the persisted-query registry stay within their bytes."""

from __future__ import annotations

import hashlib

import pytest

from dra_mirror.schema import build_schema
from dra_mirror.service.http.documents import DocumentCache, document_key
from dra_mirror.service.http.persisted import (
    PersistedQueries,
    PersistedQueryHashMismatch,
    PersistedQueryNotFound,
    UnsupportedPersistedQueryVersion,
    resolve_persisted,
)


@pytest.fixture(scope="module")
def graphql_schema():
    return build_schema()._schema


def query(n: int) -> str:
    return "{ clusters { name } }" + " " * n  # the same document, n bytes longer


def test_a_repeated_document_is_prepared_once(graphql_schema) -> None:
    cache = DocumentCache(graphql_schema, max_bytes=10_000, max_document_bytes=1_000)
    first = cache.prepare(query(0))
    assert first.document is not None and first.errors == ()
    assert cache.prepare(query(0)) is first
    assert cache.prepare(query(0), document_key(query(0))) is first
    assert first.operation_type(None).value == "query"  # type: ignore[union-attr]


def test_the_cache_is_bounded_in_bytes_and_keeps_no_large_document(graphql_schema) -> None:
    cache = DocumentCache(graphql_schema, max_bytes=300, max_document_bytes=200)
    large = cache.prepare(query(500))
    assert large.document is not None and len(cache) == 0 and cache.bytes == 0
    for n in range(10):
        cache.prepare(query(80 + n))
    assert cache.bytes <= 300 and len(cache) == 2  # 101 to 110 bytes each: the last two
    assert cache.prepare(query(89)) is cache.prepare(query(89))  # the newest stay


def test_broken_documents_are_prepared_with_their_errors(graphql_schema) -> None:
    cache = DocumentCache(graphql_schema, max_bytes=10_000, max_document_bytes=1_000)
    syntax = cache.prepare("{ clusters { name ")
    assert syntax.document is None and "Syntax Error" in syntax.errors[0].message
    invalid = cache.prepare("{ clusters { nope } }")
    assert invalid.document is not None and "nope" in invalid.errors[0].message
    assert cache.prepare("{ clusters { nope } }") is invalid


def test_the_registry_is_bounded_in_bytes() -> None:
    registry = PersistedQueries(max_bytes=250, max_document_bytes=120)
    texts = [query(80 + n) for n in range(5)]
    for text in texts:
        registry.register(document_key(text), text)
    registry.register(document_key(query(400)), query(400))  # too large: not kept
    assert registry.bytes <= 250 and len(registry) == 2
    assert registry.lookup(document_key(texts[-1])) == texts[-1]
    assert registry.lookup(document_key(texts[0])) is None
    assert registry.lookup(document_key(query(400))) is None


def test_resolving_a_request_follows_the_protocol() -> None:
    registry = PersistedQueries(max_bytes=10_000, max_document_bytes=1_000)
    text = query(0)
    digest = hashlib.sha256(text.encode()).hexdigest()
    ext = {"persistedQuery": {"version": 1, "sha256Hash": digest}}
    assert resolve_persisted({}, text, registry) is None
    with pytest.raises(PersistedQueryNotFound) as missing:
        resolve_persisted(ext, None, registry)
    assert (missing.value.status, missing.value.body()["errors"][0]["extensions"]) == (
        200,
        {"code": "PERSISTED_QUERY_NOT_FOUND"},
    )
    assert resolve_persisted(ext, text, registry) == (text, digest, True)
    registry.register(digest, text)
    assert resolve_persisted(ext, None, registry) == (text, digest, False)
    with pytest.raises(PersistedQueryHashMismatch):
        resolve_persisted(ext, text + " ", registry)
    with pytest.raises(UnsupportedPersistedQueryVersion):
        resolve_persisted({"persistedQuery": {"version": 2, "sha256Hash": digest}}, None, registry)
