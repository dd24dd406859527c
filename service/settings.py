"""Settings: one frozen, documented object built once at the edge, then passed down.

Every value comes from (in order of precedence) a command-line flag, a `DRA_MIRROR_*`
environment variable, or the embedded default below. Nothing else in the service reads the
environment: `Settings.from_env(overrides)` is called by the CLI (and tests), and the result is
handed to the app (`service.http.app`) and the reactors as a keyword argument.

Environment names are `DRA_MIRROR_<GROUP>_<FIELD>` upper-cased, e.g. `DRA_MIRROR_HTTP_PORT`,
`DRA_MIRROR_STORE_REDIS_URL`, `DRA_MIRROR_CLUSTERS_CONTEXTS` (comma-separated).

Every group checks its values when it is built and raises `SettingsError` with one line
naming the setting and what it accepts (a port out of 1-65535, a Redis URL of another scheme,
an unknown log level…): a `Settings` object is always usable. What needs more than the value
(a database driver, a kubeconfig, a free port) is checked by the commands before they start
(`service.cli.preflight`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from dra_mirror.service.settings_values import SettingsError, _parse, _positive, _require

ENV_PREFIX = "DRA_MIRROR_"


@dataclass(frozen=True)
class HttpSettings:
    host: str = "127.0.0.1"
    """Address uvicorn binds. Loopback by default: expose it on purpose (e.g. 0.0.0.0 in a Pod)."""

    port: int = 8000
    """TCP port of the API (`/graphql`, `/healthz`, `/readyz`); 0 takes any free port."""

    graphiql: bool = True
    """Serve the GraphiQL IDE on `GET /graphql` from a browser."""

    shutdown_deadline: float = 25.0
    """Seconds after SIGTERM (or Ctrl-C) by which `serve`, `watch` and `demo` exit even if their
    shutdown has not finished (a frozen Redis, a query that does not yield): they then exit
    with status 3. Keep it below the pod's `terminationGracePeriodSeconds` (30 in the chart)."""

    header_timeout: float = 10.0
    """Seconds a connection has to send a request's headers, from when it opens or a request
    begins: a connection that sends nothing (or part of a head) that long is closed."""

    body_timeout: float = 10.0
    """Seconds a request may leave between two parts of its body: past them it is answered 408
    and closed."""

    max_connections: int = 0
    """Most connections held open at once; past it, a new connection closes the longest-open
    one that has no request in progress. 0: four fifths of the process's file descriptor
    limit (RLIMIT_NOFILE), so that silent connections cannot exhaust them."""

    allowed_hosts: tuple[str, ...] = ()
    """With `--insecure-no-auth`, the host names (the `Host` header, port aside) requests may
    name besides loopback's (localhost, 127.0.0.1, ::1) and the bound address: any other is
    refused (421), so a web page cannot reach an open mirror by DNS rebinding. `*` allows any."""

    def __post_init__(self) -> None:
        _positive("shutdown_deadline", self.shutdown_deadline)
        _positive("http header_timeout", self.header_timeout)
        _positive("http body_timeout", self.body_timeout)
        _positive("http max_connections", self.max_connections, zero=True)
        port_ok = isinstance(self.port, int) and not isinstance(self.port, bool)
        _require(port_ok and 0 <= self.port <= 65535, "port", self.port, "must be 1-65535")
        host_ok = isinstance(self.host, str) and bool(self.host) and self.host.strip() == self.host
        _require(
            host_ok and " " not in self.host, "host", self.host, "must be a host name or address"
        )


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

    max_body_bytes: int = 1_000_000
    """Largest HTTP request body accepted on /graphql (413 beyond it)."""

    max_document_bytes: int = 100_000
    """Largest GraphQL document (query text) accepted, in bytes; checked before parsing."""

    max_tokens: int = 5000
    """Most lexical tokens a document may have (graphql-core stops parsing beyond them)."""

    max_depth: int = 12
    """Deepest selection nesting a query may have (fragments expanded)."""

    max_aliases: int = 30
    """Most aliased fields a query may have, counting each use of a fragment."""

    max_cost: int = 1_000_000
    """Largest estimated cost of a query: every field counts once per object it is expected to
    be resolved for (list sizes from `first`, else per-field estimates; docs/security.md)."""

    max_resolved_fields: int = 250_000
    """Fields a query may resolve before its execution is stopped (the budget's count)."""

    max_execution_seconds: float = 10.0
    """Seconds a query may execute before it is stopped (the budget's time)."""

    request_timeout: float = 30.0
    """Seconds a whole HTTP request may take (authentication, execution, encoding)."""

    max_batch: int = 10
    """Most operations in one batched request (a JSON list); 0 refuses batches."""

    max_subscriptions_per_connection: int = 20
    """Most subscriptions one WebSocket connection may keep open at once."""

    introspection: bool = True
    """Answer introspection queries (__schema, __type). GraphiQL needs them."""

    refuse_unregistered: bool = False
    """Execute only registered documents: those of `persisted_documents` and the mirror's own
    (screens, command line); clients cannot register more (docs/security.md)."""

    persisted_documents: str = ""
    """A file or directory of documents registered as persisted queries (by SHA-256): `.graphql`
    files, or `.json` manifests (Apollo's, or SHA-256 -> text). Read and checked at start."""

    document_cache_bytes: int = 4 * 1024 * 1024
    """Bytes of query text whose parsed and validated documents `/graphql` keeps (least recently
    used first out): a repeated query costs no parsing or validation."""

    cached_document_max_bytes: int = 64 * 1024
    """Longest query text (bytes) the document cache and the persisted queries keep; a longer
    one is parsed and validated for its own request only."""

    persisted_queries_bytes: int = 4 * 1024 * 1024
    """Bytes of query text registered as persisted queries (by SHA-256; least recently used
    first out): clients send the hash instead of the text."""

    def __post_init__(self) -> None:
        # every limit is a positive number: a negative or zero one would refuse every request
        # (`max_body_bytes=-1` answered /healthz with 413) or mean nothing
        for name in ("max_page_size", "default_page_size", "max_body_bytes",
                     "max_document_bytes", "max_tokens", "max_depth", "max_aliases", "max_cost",
                     "max_resolved_fields", "max_execution_seconds", "request_timeout",
                     "max_subscriptions_per_connection", "document_cache_bytes",
                     "cached_document_max_bytes", "persisted_queries_bytes"):  # fmt: skip
            _positive(f"graphql {name}", getattr(self, name))
        for name in ("parser_cache_size", "validation_cache_size", "max_batch"):
            _positive(f"graphql {name}", getattr(self, name), zero=True)


@dataclass(frozen=True)
class ClusterSettings:
    kubeconfig: str | None = None
    """Path of a kubeconfig; None means in-cluster config (the Pod's service account)."""

    contexts: tuple[str, ...] = ()
    """Kubeconfig contexts to watch, one cluster each; empty means every context."""

    bookmark_interval: float = 60.0
    """Seconds between the bookmarks the API servers send on a quiet watch (kube-apiserver's
    watch cache: one a minute)."""

    stall_intervals: float = 2.0
    """A watch silent (no event, no bookmark) for this many bookmark intervals is stalled: it
    is ended, counted and watched again. 0: only the watch's own time limit ends it."""

    idle_grace: float = 600.0
    """Seconds a scheduled consumer pod may stay Pending (pulling its image, starting) before
    the claim it reserves counts as idle-held: a starting pod is not idle. Idle-held time
    begins when the grace runs out or when the pod ends (service.model.activity)."""

    def __post_init__(self) -> None:
        _positive("clusters bookmark_interval", self.bookmark_interval)
        _positive("clusters stall_intervals", self.stall_intervals, zero=True)
        _positive("clusters idle_grace", self.idle_grace, zero=True)


@dataclass(frozen=True)
class StoreSettings:
    redis_url: str | None = None
    """Redis URL for current state (and the bus); None keeps state in this process's memory.
    `redis+cluster://HOST:PORT` names a Redis Cluster by one of its nodes."""
    redis_prefix: str = "dra-mirror"
    """First part of every Redis key (several mirrors may share one Redis under different ones)."""
    lease_ttl: float = 10.0
    """Seconds a cluster's watch lease outlives its holder: the longest takeover after a crash."""

    def __post_init__(self) -> None:
        if self.redis_url is not None:
            scheme = urlsplit(self.redis_url).scheme if isinstance(self.redis_url, str) else ""
            _require(
                scheme in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"),
                "Redis URL",
                None,  # not repeated: it may hold a password
                "must be redis://HOST[:PORT][/DB], rediss://… (TLS), unix:///PATH, or "
                "redis+cluster://HOST:PORT (a Redis Cluster; rediss+cluster:// for TLS)",
            )
        _positive("store lease_ttl", self.lease_ttl)


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
    prices: str | None = None
    """The chargeback's price table (`service.history.prices`: per GPU-hour by device model,
    class, and a default, in a currency; the team label); unset: chargeback without costs."""

    def __post_init__(self) -> None:
        _positive("history outbox_claim_idle", self.outbox_claim_idle)
        _positive("history retention_days", self.retention_days, zero=True)
        _positive("history peak_warm_days", self.peak_warm_days, zero=True)


@dataclass(frozen=True)
class AccessSettings:
    config: str | None = None
    """The access configuration file (YAML; docs/security.md): authenticators, scopes, Slack
    and scraper mappings. Without it (and without the variables below) `serve` refuses to start
    unless `--insecure-no-auth` is given."""

    static_tokens: str | None = None
    """A file of hashed static tokens (overrides the configuration file's `staticTokens`)."""

    oidc_issuer: str | None = None
    """OIDC issuer URL (overrides `oidc.issuer`)."""

    oidc_audience: str | None = None
    """OIDC audience the tokens must carry (overrides `oidc.audience`)."""

    oidc_jwks_url: str | None = None
    """Where the issuer's keys are (overrides `oidc.jwksUrl`; default: discovered)."""

    oidc_jwks_file: str | None = None
    """A JWKS file instead of fetching the keys (overrides `oidc.jwksFile`)."""

    kubernetes_context: str | None = None
    """Kubeconfig context of the cluster that reviews Kubernetes tokens (overrides
    `kubernetes.context`)."""

    rate_limit: float = 20.0
    """Requests per second one subject may make (a token bucket); 0: no limit."""

    rate_burst: int = 60
    """Requests one subject may make at once before the rate applies."""

    insecure_no_auth: bool = False
    """Serve without authentication: everyone who reaches the port sees everything."""


@dataclass(frozen=True)
class LogSettings:
    level: str = "INFO"
    """Root log level name (DEBUG, INFO, WARNING, ERROR)."""

    json: bool = False
    """Write one JSON object per line (for log collectors) instead of plain text."""

    def __post_init__(self) -> None:
        levels = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
        ok = isinstance(self.level, str) and self.level.upper() in levels
        _require(ok, "log level", self.level, f"must be one of {', '.join(levels)}")


@dataclass(frozen=True)
class AlertsSettings:
    config: str | None = None
    """The alerts' configuration file (`service.alerts.config`); unset: no alerts (the demo
    turns every rule on)."""


@dataclass(frozen=True)
class UtilizationSettings:
    config: str | None = None
    """The utilisation source's file (`service.utilization.config`: per cluster, the
    Prometheus server holding dcgm-exporter's series); unset: no utilisation is read."""


READINESS_RULES = ("serve-stale", "not-ready")


@dataclass(frozen=True)
class ReadinessSettings:
    cluster_down: str = "serve-stale"
    """What /readyz says while a cluster this process serves has synced once but is not
    connected now: `serve-stale` (ready, and the body flags the cluster as stale) or
    `not-ready` (503 until it is back). A cluster that never synced is never ready."""

    def __post_init__(self) -> None:
        _require(
            self.cluster_down in READINESS_RULES,
            "readiness cluster_down",
            self.cluster_down,
            f"must be one of {', '.join(READINESS_RULES)}",
        )


@dataclass(frozen=True)
class Settings:
    http: HttpSettings = field(default_factory=HttpSettings)
    graphql: GraphQLSettings = field(default_factory=GraphQLSettings)
    clusters: ClusterSettings = field(default_factory=ClusterSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    access: AccessSettings = field(default_factory=AccessSettings)
    log: LogSettings = field(default_factory=LogSettings)
    readiness: ReadinessSettings = field(default_factory=ReadinessSettings)
    alerts: AlertsSettings = field(default_factory=AlertsSettings)
    utilization: UtilizationSettings = field(default_factory=UtilizationSettings)

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
    "access": AccessSettings,
    "log": LogSettings,
    "readiness": ReadinessSettings,
    "alerts": AlertsSettings,
    "utilization": UtilizationSettings,
}
