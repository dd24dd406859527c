"""Settings: one frozen, documented object built once at the edge, then passed down.

Every value comes from (in order of precedence) a command-line flag, a `DRA_MIRROR_*`
environment variable, or the embedded default below. Nothing else in the service reads the
environment: `Settings.from_env(overrides)` is called by the CLI (and tests), and the result is
handed to `service.app.create_app` and the reactors as a keyword argument.

Environment names are `DRA_MIRROR_<GROUP>_<FIELD>` upper-cased, e.g. `DRA_MIRROR_HTTP_PORT`,
`DRA_MIRROR_STORE_REDIS_URL`, `DRA_MIRROR_CLUSTERS_CONTEXTS` (comma-separated).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ENV_PREFIX = "DRA_MIRROR_"


class SettingsError(ValueError):
    """A flag or environment variable has a value of the wrong shape."""


@dataclass(frozen=True)
class HttpSettings:
    host: str = "127.0.0.1"
    """Address uvicorn binds. Loopback by default: expose it on purpose (e.g. 0.0.0.0 in a Pod)."""

    port: int = 8000
    """TCP port of the API (`/graphql`, `/healthz`, `/readyz`)."""

    graphiql: bool = True
    """Serve the GraphiQL IDE on `GET /graphql` from a browser."""


@dataclass(frozen=True)
class GraphQLSettings:
    max_page_size: int = 1000
    """Largest `first` a connection accepts; larger values are clamped. Each resolved field costs
    microseconds of blocked event loop, so pages stay in the hundreds."""

    default_page_size: int = 100
    """Page size of a connection queried without `first`."""

    parser_cache_size: int = 1000
    """Parsed documents kept (strawberry ParserCache): repeated dashboard queries skip parsing."""

    validation_cache_size: int = 1000
    """Validated documents kept (strawberry ValidationCache); validation is ~2 ms per query."""

    document_cache_bytes: int = 4 * 1024 * 1024
    """Bytes of query text whose parsed and validated documents `/graphql` keeps (least recently
    used first out): a repeated query costs no parsing or validation."""

    cached_document_max_bytes: int = 64 * 1024
    """Longest query text (bytes) the document cache and the persisted queries keep; a longer
    one is parsed and validated for its own request only."""

    persisted_queries_bytes: int = 4 * 1024 * 1024
    """Bytes of query text registered as persisted queries (by SHA-256; least recently used
    first out): clients send the hash instead of the text."""


@dataclass(frozen=True)
class ClusterSettings:
    kubeconfig: str | None = None
    """Path of a kubeconfig; None means in-cluster config (the Pod's service account)."""

    contexts: tuple[str, ...] = ()
    """Kubeconfig contexts to watch, one cluster each; empty means every context."""


@dataclass(frozen=True)
class StoreSettings:
    redis_url: str | None = None
    """Redis URL for current state (and the bus); None keeps state in this process's memory."""
    redis_prefix: str = "dra-mirror"
    """First part of every Redis key (several mirrors may share one Redis under different ones)."""
    lease_ttl: float = 10.0
    """Seconds a cluster's watch lease outlives its holder: the longest takeover after a crash."""


@dataclass(frozen=True)
class HistorySettings:
    database_url: str | None = None
    """SQLAlchemy URL of the history database (SQLite file or PostgreSQL); None: no history."""
    outbox_consumer: str | None = None
    """This process's consumer name in the Redis outbox's group (with a Redis URL); None: the
    host name (the pod name). A restart under the same name resumes its own pending entries."""
    outbox_claim_idle: float = 30.0
    """Seconds an outbox entry handed to another consumer waits before it is taken over."""
    retention_days: float = 0.0
    """Delete object versions (raw objects) older than this many days, hourly; intervals are
    kept. 0 keeps them forever."""
    peak_warm_days: float = 35.0
    """Keep the contention audit's hourly peak cache filled for the last this many days, for
    every grouping, in the background (so a first audit reads it). 0: audits fill it."""


@dataclass(frozen=True)
class LogSettings:
    level: str = "INFO"
    """Root log level name (DEBUG, INFO, WARNING, ERROR)."""

    json: bool = False
    """Write one JSON object per line (for log collectors) instead of plain text."""


@dataclass(frozen=True)
class Settings:
    http: HttpSettings = field(default_factory=HttpSettings)
    graphql: GraphQLSettings = field(default_factory=GraphQLSettings)
    clusters: ClusterSettings = field(default_factory=ClusterSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    log: LogSettings = field(default_factory=LogSettings)

    @classmethod
    def from_env(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Build settings from `DRA_MIRROR_*` variables, then `overrides` keyed "group.field"
        (flags the user actually gave; None values are ignored so unset flags do not win)."""
        environ = os.environ if environ is None else environ
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        groups: dict[str, Any] = {}
        for group in dataclasses.fields(cls):
            group_type = _GROUP_TYPES[group.name]
            values: dict[str, Any] = {}
            for item in dataclasses.fields(group_type):
                dotted = f"{group.name}.{item.name}"
                env_name = f"{ENV_PREFIX}{group.name}_{item.name}".upper()
                if dotted in overrides:
                    values[item.name] = overrides.pop(dotted)
                elif env_name in environ:
                    values[item.name] = _parse(env_name, environ[env_name], item.default)
            groups[group.name] = group_type(**values)
        if overrides:
            raise SettingsError(f"unknown settings: {', '.join(sorted(overrides))}")
        return cls(**groups)


_GROUP_TYPES: dict[str, type] = {
    "http": HttpSettings,
    "graphql": GraphQLSettings,
    "clusters": ClusterSettings,
    "store": StoreSettings,
    "history": HistorySettings,
    "log": LogSettings,
}


def _parse(name: str, raw: str, default: Any) -> Any:
    """Parse an environment string into the type of the field's default."""
    if isinstance(default, bool):
        lowered = raw.strip().lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off", ""}:
            return False
        raise SettingsError(f"{name}={raw!r}: expected true or false")
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise SettingsError(f"{name}={raw!r}: expected a number") from None
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise SettingsError(f"{name}={raw!r}: expected an integer") from None
    if isinstance(default, tuple):
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if default is None:  # optional string: an empty variable means unset
        return raw or None
    return raw
