"""Static tokens for machines (dashboards, bots): a file of hashed tokens -> subject + scope.

    # static-tokens.yaml — the token itself is never stored, only its SHA-256
    tokens:
      - name: grafana
        sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
        scope: {namespaces: ["*/*"], history: true}
      - name: team-ml-bot
        sha256: …
        scope: {namespaces: [east/ml]}

Hash a new token with `printf %s "$TOKEN" | sha256sum` (or `dra-mirror`'s Python:
`hashlib.sha256(token.encode()).hexdigest()`). Tokens should be long random strings (32 bytes
from a CSPRNG, e.g. `openssl rand -hex 32`): with that much entropy a fast hash is what
GitHub and Kubernetes bootstrap tokens use too, and lookups stay a dictionary probe.

Promises: the file is read and checked once, at start (names unique, hashes 64 hex digits and
unique, scopes well formed — errors name the file and the entry); a token matches by the
SHA-256 of its bytes (the digest is the dictionary key); the token never appears in a log or
an error.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .errors import AccessConfigError, Unauthenticated
from .scope import AccessScope
from .subjects import Subject

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class StaticTokens:
    """The `Authenticator` of a static token file (see the module docstring)."""

    method = "static"

    def __init__(self, entries: Mapping[str, Subject]) -> None:
        self._by_hash = dict(entries)

    @classmethod
    def from_file(cls, path: str | Path) -> StaticTokens:
        path = Path(path)
        try:
            document = yaml.safe_load(path.read_text())
        except OSError as error:
            raise AccessConfigError(f"static tokens file {path}: {error.strerror}") from None
        except yaml.YAMLError as error:
            raise AccessConfigError(f"static tokens file {path}: not YAML ({error})") from None
        return cls.from_document(document, where=str(path))

    @classmethod
    def from_document(cls, document: Any, *, where: str) -> StaticTokens:
        if not isinstance(document, Mapping) or not isinstance(document.get("tokens"), list):
            raise AccessConfigError(f"{where}: expected `tokens:`, a list of entries")
        entries: dict[str, Subject] = {}
        names: set[str] = set()
        for i, entry in enumerate(document["tokens"]):
            at = f"{where}: tokens[{i}]"
            if not isinstance(entry, Mapping):
                raise AccessConfigError(f"{at}: expected name, sha256 and scope")
            unknown = set(entry) - {"name", "sha256", "scope"}
            if unknown:
                raise AccessConfigError(f"{at}: unknown keys {', '.join(sorted(unknown))}")
            name, digest = entry.get("name"), str(entry.get("sha256") or "").lower()
            if not isinstance(name, str) or not name.strip():
                raise AccessConfigError(f"{at}.name: required")
            if not _HEX64.match(digest):
                raise AccessConfigError(
                    f"{at}.sha256: expected the 64 hex digits of the token's SHA-256"
                )
            if name in names:
                raise AccessConfigError(f"{at}.name: {name!r} is used twice")
            if digest in entries:
                raise AccessConfigError(f"{at}.sha256: the same token is listed twice")
            scope = AccessScope.from_config(entry.get("scope", {}), where=f"{at}.scope")
            names.add(name)
            entries[digest] = Subject(name=name, method=cls.method, scope=scope)
        return cls(entries)

    def __len__(self) -> int:
        return len(self._by_hash)

    def claims(self, token: str) -> bool:
        """Is `token` one of ours? (No I/O: other authenticators are asked otherwise.)"""
        return self._find(token) is not None

    def _find(self, token: str) -> Subject | None:
        # A dictionary probe by digest: any timing difference can only tell an attacker about
        # the SHA-256 of their own guess, never about the bytes of a stored token.
        return self._by_hash.get(token_hash(token))

    async def authenticate(self, token: str) -> Subject:
        subject = self._find(token)
        if subject is None:
            raise Unauthenticated("unknown token")
        return subject

    async def close(self) -> None:
        """Nothing to release: the tokens live in memory."""
