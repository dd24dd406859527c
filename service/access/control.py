"""`AccessControl`: the configured authenticators, rate limit and mappings, as one object.

Built once at start (`AccessControl.open(config, kubeconfig=…)`: it reads the static token
file, the OIDC keys file, and connects to the reviewing clusters), owned by the app's lifespan
(`close()`), and asked by every front end:

* `subject(authorization, client=…)` — the HTTP `Authorization` header's subject,
  rate-limited per subject; a token that needs a remote review (a Kubernetes TokenReview not
  cached: each distinct garbage token would cost one) is first rate-limited per client
  address, with the same rate and burst, so a flood of made-up tokens costs the reviewing
  cluster at most that (refusals are cached 5 s per token, service.access.kubernetes);
* `scraper(authorization)` — the same for `/metrics`, where a configured `metrics` scope lets
  Prometheus scrape without a token;
* `slack` — the Slack mapping (`service.access.slack.SlackAccess`), None when not configured.

`AccessControl.open_access()` is a mirror started with `--insecure-no-auth`: every request is
the `ANONYMOUS` subject, which sees everything; `describe()` says so for the log and `/readyz`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .authenticators import Authenticator, Authenticators, bearer_token
from .config import AccessConfig
from .errors import AccessConfigError
from .kube_api import ClusterReviewApi
from .kubernetes import KubernetesTokens, review_clusters
from .oidc import JwksFile, JwksUrl, OidcTokens
from .ratelimit import RateLimit
from .slack import SlackAccess, UserGroups
from .static import StaticTokens
from .subjects import ANONYMOUS, Subject

log = logging.getLogger(__name__)

INSECURE = (
    "authentication is OFF (--insecure-no-auth): anyone who reaches this port sees everything"
)


class AccessControl:
    def __init__(
        self,
        config: AccessConfig,
        *,
        authenticators: Sequence[Authenticator] = (),
        resources: Sequence[Any] = (),
        slack_directory: UserGroups | None = None,
    ) -> None:
        self.config = config
        self.authenticators = Authenticators(authenticators)
        self.rate_limit = RateLimit(rate=config.rate_limit, burst=config.rate_burst)
        # reviews a client's unknown tokens cost, before they are asked for
        self.review_limit = RateLimit(rate=config.rate_limit, burst=config.rate_burst)
        self.slack = (
            SlackAccess(config.slack, directory=slack_directory)
            if config.slack.configured
            else None
        )
        self._resources = list(resources)

    @classmethod
    def open_access(cls) -> AccessControl:
        return cls(AccessConfig(insecure_no_auth=True, rate_limit=0))

    @property
    def insecure(self) -> bool:
        return not self.authenticators.authenticators

    @classmethod
    async def open(
        cls,
        config: AccessConfig,
        *,
        kubeconfig: str | None = None,
        oidc_transport: Any = None,
        slack_directory: UserGroups | None = None,
    ) -> AccessControl:
        """The configured authenticators, ready (see the module docstring). Without any and
        without `insecure_no_auth`, `AccessConfigError`: the caller refuses to start."""
        if not config.configured:
            if config.insecure_no_auth:
                control = cls(config)
                control.rate_limit.rate = 0
                return control
            raise AccessConfigError(
                "no authentication is configured (DRA_MIRROR_ACCESS_CONFIG, a static token "
                "file, OIDC or Kubernetes review): configure one, or start with "
                "--insecure-no-auth to serve everything to everyone"
            )
        found: list[Authenticator] = []
        resources: list[Any] = []
        if config.static_tokens:
            found.append(StaticTokens.from_file(config.static_tokens))
        if config.oidc is not None:
            s = config.oidc
            keys = (
                JwksFile(s.jwks_file)
                if s.jwks_file
                else JwksUrl(
                    issuer=s.issuer, url=s.jwks_url, ttl=s.keys_ttl, transport=oidc_transport
                )
            )
            found.append(OidcTokens(s, keys=keys))
        if config.kubernetes is not None:
            kube, connections = await _kubernetes(config, kubeconfig)
            found.append(kube)
            resources += connections
        return cls(
            config, authenticators=found, resources=resources, slack_directory=slack_directory
        )

    async def subject(self, authorization: str | None, *, client: str | None = None) -> Subject:
        """Who sent this `Authorization` header (and may they ask now)? AccessError if not.
        `client`: the address it came from, whose unknown tokens are rate-limited before a
        remote review is asked for."""
        if self.insecure:
            return ANONYMOUS
        token = bearer_token(authorization)
        if client is not None and self.authenticators.reviews(token):
            self.review_limit.take_key(("client", client), client)
        subject = await self.authenticators.authenticate(token)
        self.rate_limit.take(subject)
        return subject

    async def scraper(self, authorization: str | None, *, client: str | None = None) -> Subject:
        if self.insecure:
            return ANONYMOUS
        if not authorization and self.config.metrics is not None:
            return Subject(name="metrics-scraper", method="metrics", scope=self.config.metrics)
        return await self.subject(authorization, client=client)

    def describe(self) -> str:
        if self.insecure:
            return INSECURE
        return "authentication: " + ", ".join(self.authenticators.methods)

    async def close(self) -> None:
        await self.authenticators.close()
        for resource in self._resources:
            try:
                await resource.close()
            except Exception:
                log.exception("closing an access connection failed")


async def _kubernetes(config: AccessConfig, kubeconfig: str | None) -> tuple[Any, list[Any]]:
    from dra_mirror.service.clusters.config import close_all, connect
    from dra_mirror.service.clusters.errors import ConfigurationError

    settings = config.kubernetes
    assert settings is not None
    wanted = [settings.context] if settings.context else []
    wanted += [c for c in settings.clusters if c not in wanted]
    try:
        connections = await connect(kubeconfig, wanted or None)
    except ConfigurationError as error:
        raise AccessConfigError(f"kubernetes: {error}") from error
    try:
        by_name = {c.name: c for c in connections}
        reviewing = settings.context or connections[0].name
        names = review_clusters(settings, reviewing)
        missing = [n for n in names if n not in by_name]
        if missing:
            raise AccessConfigError(f"kubernetes.clusters: no context {', '.join(missing)}")
        apis = {n: ClusterReviewApi(n, by_name[n].api_client) for n in names}
        reviewer = apis.get(reviewing) or ClusterReviewApi(reviewing, by_name[reviewing].api_client)
        return KubernetesTokens(settings, reviewer=reviewer, clusters=apis), connections
    except BaseException:
        await close_all(connections)
        raise
