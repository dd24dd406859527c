"""Documents registered ahead of time: what a server running only registered documents runs.

Two sources, read when the app is built and checked before it serves (a bad document stops
the start with a `RegisteredDocumentsError` naming its file):

* the operator's: `DRA_MIRROR_GRAPHQL_PERSISTED_DOCUMENTS`, a file or a directory (its files,
  recursively, in name order) of
  - `.graphql` / `.gql` files: the whole file is one document (operations and the fragments
    they spread), which its clients send exactly as the file holds it;
  - `.json` manifests: Apollo's persisted query manifest (`{"format":
    "apollo-persisted-query-manifest", "version": 1, "operations": [{"id", "name", "type",
    "body"}]}`), or a map of SHA-256 to text (GraphQL Code Generator's and Relay's persisted
    documents); each id must be the SHA-256 of its body;
* the mirror's own (`own_documents`): its screens' documents (`service.web.documents`) and
  the fixed documents of the questions the command line sends (`service.questions.documents`),
  so the screens and the command line keep working on a server that refuses other documents.

A document is keyed by the SHA-256 hex digest of its UTF-8 text — what clients send as
`extensions.persistedQuery.sha256Hash` — and checked as a request would be: size, tokens,
syntax, validation against the schema, and each operation's depth, aliases and cost (variables
unknown: list sizes from the defaults). `dra-mirror persisted-queries PATH…` prints the hashes.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from graphql import GraphQLError, GraphQLSchema, OperationDefinitionNode, parse
from graphql.validation import specified_rules
from strawberry.schema.schema import validate_document

from dra_mirror.schema.guard.limits import document_refusal, shape_refusal
from dra_mirror.service.questions.documents import QUESTION_DOCUMENTS
from dra_mirror.service.settings import GraphQLSettings
from dra_mirror.service.web.documents import screen_documents

DOCUMENT_SUFFIXES = (".graphql", ".gql")
APOLLO_MANIFEST = "apollo-persisted-query-manifest"


class RegisteredDocumentsError(Exception):
    """A registered document that cannot be served: its source and what is wrong."""


@dataclass(frozen=True)
class RegisteredDocument:
    sha256: str
    text: str
    source: str  # the file (and the manifest's operation) it came from

    @property
    def operations(self) -> list[tuple[str, str]]:
        """(name, type) of its operations: `(anonymous)` for one without a name; `query`,
        `subscription` or `mutation`."""
        try:
            document = parse(self.text, no_location=True)
        except GraphQLError:
            return []
        return [
            (d.name.value if d.name else "(anonymous)", d.operation.value)
            for d in document.definitions
            if isinstance(d, OperationDefinitionNode)
        ]


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as error:
        raise RegisteredDocumentsError(f"{path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise RegisteredDocumentsError(f"{path}: not UTF-8 text") from None


def _manifest(path: Path) -> Iterator[RegisteredDocument]:
    try:
        data: Any = orjson.loads(_text(path))
    except orjson.JSONDecodeError as error:
        raise RegisteredDocumentsError(f"{path}: not JSON ({error})") from None
    if isinstance(data, dict) and data.get("format") == APOLLO_MANIFEST:
        if data.get("version") != 1:
            raise RegisteredDocumentsError(f"{path}: manifest version {data.get('version')!r}"
                                           " (1 is known)")  # fmt: skip
        operations = data.get("operations")
        if not isinstance(operations, list):
            raise RegisteredDocumentsError(f"{path}: `operations` must be a list")
        for i, op in enumerate(operations):
            where = f"{path}: operations[{i}]"
            if not isinstance(op, dict):
                raise RegisteredDocumentsError(f"{where}: expected an object")
            if op.get("name"):
                where = f"{path}: {op['name']}"
            yield _claimed(op.get("id"), op.get("body"), where)
    elif isinstance(data, dict):
        for key, text in data.items():
            yield _claimed(key, text, f"{path}: {key}")
    else:
        raise RegisteredDocumentsError(
            f"{path}: expected Apollo's persisted query manifest or a map of SHA-256 to text"
        )


def _claimed(sha256: Any, text: Any, where: str) -> RegisteredDocument:
    if not isinstance(text, str) or not text.strip():
        raise RegisteredDocumentsError(f"{where}: the document text is missing")
    digest = sha256_of(text)
    if sha256 != digest:
        raise RegisteredDocumentsError(
            f"{where}: id {sha256!r} is not the SHA-256 of its text ({digest})"
        )
    return RegisteredDocument(digest, text, where)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        wanted = (*DOCUMENT_SUFFIXES, ".json")
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in wanted)
    if not path.exists():
        raise RegisteredDocumentsError(f"{path}: no such file or directory")
    return [path]


def read_documents(paths: Iterable[str | Path]) -> list[RegisteredDocument]:
    """The documents in these files and directories, in order (not checked: `check`)."""
    found: list[RegisteredDocument] = []
    for path in map(Path, paths):
        for file in _files(path):
            if file.suffix == ".json":
                found += _manifest(file)
            elif file.suffix in DOCUMENT_SUFFIXES:
                text = _text(file)
                if not text.strip():
                    raise RegisteredDocumentsError(f"{file}: empty")
                found.append(RegisteredDocument(sha256_of(text), text, str(file)))
            else:
                raise RegisteredDocumentsError(
                    f"{file}: expected a .graphql or .gql document or a .json manifest"
                )
    return found


def own_documents() -> list[RegisteredDocument]:
    """The documents the mirror's own front ends send (screens, command line)."""
    found = [RegisteredDocument(sha256_of(t), t, f"screens: {n}") for n, t in screen_documents()]
    found += [RegisteredDocument(sha256_of(t), t, f"questions: {n}") for n, t in QUESTION_DOCUMENTS]
    return found


def problem(schema: GraphQLSchema, text: str, settings: GraphQLSettings) -> str | None:
    """Why `text` could not run on this server (None when it can)."""
    limits = dataclasses.replace(settings, refuse_unregistered=False)
    refusal = document_refusal(text, limits)
    if refusal is not None:
        return refusal.message
    try:
        document = parse(text, max_tokens=settings.max_tokens)
    except GraphQLError as error:
        return error.message
    errors = validate_document(schema, document, tuple(specified_rules))
    if errors:
        return "; ".join(e.message for e in errors)
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            name = definition.name.value if definition.name else None
            refusal = shape_refusal(schema, document, name, None, settings)
            if refusal is not None:
                return f"{name or '(anonymous)'}: {refusal.message}"
    return None


def check(
    schema: GraphQLSchema, documents: Iterable[RegisteredDocument], settings: GraphQLSettings
) -> list[RegisteredDocument]:
    """The documents, once each one can run here; else `RegisteredDocumentsError`."""
    checked = list(documents)
    for document in checked:
        reason = problem(schema, document.text, settings)
        if reason is not None:
            raise RegisteredDocumentsError(f"{document.source}: {reason}")
    return checked


def registered_documents(schema: GraphQLSchema, settings: GraphQLSettings) -> dict[str, str]:
    """Every document registered on a server with these settings, by SHA-256: the operator's
    (`persisted_documents`, checked now) and the mirror's own (checked by the mirror's tests:
    `tests/guard/test_persisted_documents.py`)."""
    paths = [settings.persisted_documents] if settings.persisted_documents else []
    documents = [*own_documents(), *check(schema, read_documents(paths), settings)]
    return {d.sha256: d.text for d in documents}
