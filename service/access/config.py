"""The access configuration: one YAML file plus `DRA_MIRROR_ACCESS_*` variables, checked at start.

    # /etc/dra-mirror/access.yaml (DRA_MIRROR_ACCESS_CONFIG); every section is optional
    staticTokens: /etc/dra-mirror/static-tokens.yaml    # service.access.static
    oidc: {issuer: …, audience: …, groups: {…}}          # service.access.oidc
    kubernetes: {context: east, clusters: [east, west]}  # service.access.kubernetes
    slack:                                               # service.access.slack
      workspaces: {T0123: {namespaces: ["*/*"]}}
      users: {U0456: {admin: true}}
      userGroups: {S0789: {namespaces: [east/ml]}}
    metrics: {namespaces: ["*/*"], history: false}       # what /metrics shows anonymous scrapers
                                                         # (absent: /metrics needs a token too)

The variables (service.settings.AccessSettings) override single values of the file:
`_STATIC_TOKENS`, `_OIDC_ISSUER`, `_OIDC_AUDIENCE`, `_OIDC_JWKS_URL`, `_OIDC_JWKS_FILE`,
`_KUBERNETES_CONTEXT`; `_RATE_LIMIT`/`_RATE_BURST` set the per-subject rate limit.

`load(settings)` returns an `AccessConfig` (the static token file read and checked too), or
raises `AccessConfigError` naming the file and the field; `AccessConfig.configured` says whether any authenticator is set up (without one,
`dra-mirror serve` refuses to start unless `--insecure-no-auth` is given).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from dra_mirror.service.settings import AccessSettings

from .errors import AccessConfigError
from .kubernetes import KubernetesSettings
from .oidc import OidcSettings
from .scope import AccessScope
from .static import StaticTokens

SECTIONS = {"staticTokens", "oidc", "kubernetes", "slack", "metrics"}


@dataclass(frozen=True)
class SlackScopes:
    """Slack workspace / user / user group -> scope (user beats groups beats workspace)."""

    workspaces: Mapping[str, AccessScope] = field(default_factory=dict)
    users: Mapping[str, AccessScope] = field(default_factory=dict)
    user_groups: Mapping[str, AccessScope] = field(default_factory=dict)

    @property
    def configured(self) -> bool:
        return bool(self.workspaces or self.users or self.user_groups)


@dataclass(frozen=True)
class AccessConfig:
    static_tokens: str | None = None
    oidc: OidcSettings | None = None
    kubernetes: KubernetesSettings | None = None
    slack: SlackScopes = field(default_factory=SlackScopes)
    metrics: AccessScope | None = None
    rate_limit: float = 20.0
    rate_burst: int = 60
    insecure_no_auth: bool = False

    @property
    def configured(self) -> bool:
        return bool(self.static_tokens or self.oidc or self.kubernetes)


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise AccessConfigError(f"{where}: expected a mapping")
    return value


def _scopes(value: Any, where: str) -> dict[str, AccessScope]:
    return {
        str(name): AccessScope.from_config(scope, where=f"{where}.{name}")
        for name, scope in _mapping(value, where).items()
    }


def _number(section: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise AccessConfigError(f"{where}.{key}: expected a number of seconds >= 0")
    return float(value)


def _strings(section: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = section.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise AccessConfigError(f"{where}.{key}: expected a list of names")
    return tuple(value)


def _oidc(section: Mapping[str, Any], where: str) -> OidcSettings:
    known = {
        "issuer",
        "audience",
        "jwksUrl",
        "jwksFile",
        "algorithms",
        "clockSkew",
        "keysTtl",
        "usernameClaim",
        "groupsClaim",
        "groups",
        "defaultScope",
    }
    unknown = set(section) - known
    if unknown:
        raise AccessConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    default = section.get("defaultScope")
    return OidcSettings(
        issuer=str(section.get("issuer") or ""),
        audience=str(section.get("audience") or ""),
        jwks_url=section.get("jwksUrl") or None,
        jwks_file=section.get("jwksFile") or None,
        algorithms=_strings(section, "algorithms", where) or ("RS256", "ES256"),
        clock_skew=_number(section, "clockSkew", 60.0, where),
        keys_ttl=_number(section, "keysTtl", 300.0, where),
        username_claim=str(section.get("usernameClaim") or "email"),
        groups_claim=str(section.get("groupsClaim") or "groups"),
        groups=_scopes(section.get("groups"), f"{where}.groups"),
        default_scope=(
            AccessScope.from_config(default, where=f"{where}.defaultScope")
            if default is not None
            else None
        ),
    )


def _kubernetes(section: Mapping[str, Any], where: str) -> KubernetesSettings:
    known = {"context", "clusters", "audiences", "history", "cacheTtl", "cacheSize"}
    unknown = set(section) - known
    if unknown:
        raise AccessConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    size = section.get("cacheSize", 1000)
    if isinstance(size, bool) or not isinstance(size, int):
        raise AccessConfigError(f"{where}.cacheSize: expected a whole number")
    return KubernetesSettings(
        context=section.get("context") or None,
        clusters=_strings(section, "clusters", where),
        audiences=_strings(section, "audiences", where),
        history=str(section.get("history") or "namespaces"),
        cache_ttl=_number(section, "cacheTtl", 30.0, where),
        cache_size=size,
    )


def read_file(path: str) -> Mapping[str, Any]:
    try:
        document = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as error:
        raise AccessConfigError(f"access configuration {path}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise AccessConfigError(f"access configuration {path}: not YAML ({error})") from None
    if not isinstance(document, Mapping):
        raise AccessConfigError(f"access configuration {path}: expected a mapping")
    unknown = set(document) - SECTIONS
    if unknown:
        raise AccessConfigError(
            f"access configuration {path}: unknown sections {', '.join(sorted(unknown))} "
            f"(known: {', '.join(sorted(SECTIONS))})"
        )
    return document


def load(settings: AccessSettings) -> AccessConfig:
    """The access configuration the settings point at (see the module docstring)."""
    document: Mapping[str, Any] = read_file(settings.config) if settings.config else {}
    where = settings.config or "DRA_MIRROR_ACCESS_*"
    static = settings.static_tokens or document.get("staticTokens") or None
    if static is not None and not isinstance(static, str):
        raise AccessConfigError(f"{where}: staticTokens: expected a file path")
    if static is not None:
        StaticTokens.from_file(static)  # checked now: a bad file stops the start, not a request
    oidc_section = dict(_mapping(document.get("oidc"), f"{where}: oidc"))
    for key, value in (
        ("issuer", settings.oidc_issuer),
        ("audience", settings.oidc_audience),
        ("jwksUrl", settings.oidc_jwks_url),
        ("jwksFile", settings.oidc_jwks_file),
    ):
        if value:
            oidc_section[key] = value
    oidc = _oidc(oidc_section, f"{where}: oidc") if oidc_section else None
    kube_section = _mapping(document.get("kubernetes"), f"{where}: kubernetes")
    kubernetes = None
    if kube_section or settings.kubernetes_context:
        kubernetes = _kubernetes(kube_section, f"{where}: kubernetes")
        if settings.kubernetes_context:
            kubernetes = replace(kubernetes, context=settings.kubernetes_context)
    slack = _mapping(document.get("slack"), f"{where}: slack")
    unknown = set(slack) - {"workspaces", "users", "userGroups"}
    if unknown:
        raise AccessConfigError(f"{where}: slack: unknown keys {', '.join(sorted(unknown))}")
    metrics = document.get("metrics")
    return AccessConfig(
        static_tokens=static,
        oidc=oidc,
        kubernetes=kubernetes,
        slack=SlackScopes(
            workspaces=_scopes(slack.get("workspaces"), f"{where}: slack.workspaces"),
            users=_scopes(slack.get("users"), f"{where}: slack.users"),
            user_groups=_scopes(slack.get("userGroups"), f"{where}: slack.userGroups"),
        ),
        metrics=(
            AccessScope.from_config(metrics, where=f"{where}: metrics")
            if metrics is not None
            else None
        ),
        rate_limit=settings.rate_limit,
        rate_burst=settings.rate_burst,
        insecure_no_auth=settings.insecure_no_auth,
    )
