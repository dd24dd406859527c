"""The errors of the Kubernetes API boundary, translated once from aiohttp and kubernetes_asyncio.

    ClusterError                  anything that went wrong talking to one cluster
     ├── ConfigurationError       kubeconfig/in-cluster config unusable (unknown context, no file)
     ├── Unreachable              connect refused/reset, DNS, TLS, timeouts, a stream cut mid-way
     │    └── WatchStalled        a watch stream silent (no event, no bookmark) for too long
     ├── Throttled                429 Too Many Requests            (retry_after honoured)
     ├── ServerError              5xx                              (retry_after honoured if sent)
     ├── Expired                  410 Gone: resourceVersion or continue token older than the
     │    │                       server's window → relist
     │    ├── TooLarge            "Too large resource version": newer than the server knows, as
     │    │                       after an etcd restore → the cluster's versions were reset
     │    └── VersionsReset       the cluster's versions were reset (seen by any kind) → every
     │                            kind relists
     ├── NotServed                404 on a collection or discovery: that API version is gone
     ├── Forbidden                401/403: credentials or RBAC
     └── BadResponse              any other status, or a body that is not what Kubernetes sends

Only `service.clusters.transport` (requests) and `service.clusters.config` (configuration)
construct these from foreign exceptions; everything above them sees only this tree. Each error
carries the cluster name and, for HTTP statuses, the code and the Kubernetes `Status.reason`.
"""

from __future__ import annotations

import asyncio
import email.utils
from datetime import UTC, datetime
from typing import Any

import orjson


class ClusterError(Exception):
    """Base of the cluster boundary errors."""

    def __init__(
        self,
        message: str,
        *,
        cluster: str = "",
        code: int | None = None,
        reason: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.cluster = cluster
        self.code = code
        self.reason = reason
        self.retry_after = retry_after  # seconds the server asked us to wait (Retry-After)

    def __str__(self) -> str:
        where = f"{self.cluster}: " if self.cluster else ""
        return f"{where}{self.detail()}"

    def detail(self) -> str:
        """The message and status without the cluster name (for that cluster's status)."""
        status = " ".join(str(part) for part in (self.code, self.reason) if part)
        return f"{self.message} ({status})" if status else self.message


class ConfigurationError(ClusterError):
    """The kubeconfig or in-cluster configuration cannot be used."""


class Unreachable(ClusterError):
    """No answer: connection refused or reset, DNS, TLS, timeout, or a stream cut off."""


class WatchStalled(Unreachable):
    """A watch stream delivered nothing (no event, no bookmark) for longer than the server's
    bookmarks allow; the watcher ends it and watches again."""


class Throttled(ClusterError):
    """429: the API server (priority and fairness) asks us to slow down."""


class ServerError(ClusterError):
    """5xx from the API server or a proxy in front of it."""


class Expired(ClusterError):
    """410 Gone: the resourceVersion (or continue token) is no longer in the server's window."""


class TooLarge(Expired):
    """The resourceVersion asked for is newer than any the server knows: the server's versions
    went back (etcd restored from a backup, or a new etcd behind the same address)."""


class VersionsReset(Expired):
    """The cluster's resourceVersions went back (an etcd restore): this kind's position names
    a moment the server never reached; it relists."""


class NotServed(ClusterError):
    """404 on a collection or in discovery: this API group/version is not served."""


class Forbidden(ClusterError):
    """401/403: the credentials are refused or RBAC does not allow list/watch."""


class BadResponse(ClusterError):
    """A status or body Kubernetes would not send for this request."""


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from a `Retry-After` header: delta-seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _too_large_resource_version(status: dict[str, Any]) -> bool:
    # kube-apiserver answers 504 (reason Timeout, cause ResourceVersionTooLarge, "Too large
    # resource version") to a list or get at a resourceVersion newer than it knows, and to a
    # watch asking for initial events from one, e.g. after etcd was restored; client-go's
    # reflector relists then, as for 410. Like client-go, the cause's message and the status
    # message are recognised too (servers before 1.19 sent no cause reason); other servers
    # (and the simulator) say it with a 410.
    details = status.get("details") or {}
    causes = details.get("causes") or []
    for cause in causes:
        if isinstance(cause, dict) and (
            cause.get("reason") == "ResourceVersionTooLarge"
            or str(cause.get("message") or "").lower() == _TOO_LARGE
        ):
            return True
    return _TOO_LARGE in str(status.get("message") or "").lower()


_TOO_LARGE = "too large resource version"


def from_status(
    code: int,
    body: bytes | str | dict[str, Any] | None,
    headers: Any = None,
    *,
    cluster: str = "",
    path: str = "",
) -> ClusterError:
    """The error for an HTTP status (or a watch ERROR event's `Status`) from the API server."""
    status: dict[str, Any] = {}
    if isinstance(body, dict):
        status = body
    elif body:
        try:
            decoded = orjson.loads(body)
            if isinstance(decoded, dict):
                status = decoded
        except orjson.JSONDecodeError:
            status = {}
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or f"HTTP {code}")
    if path:
        message = f"{path}: {message}"
    retry_after = parse_retry_after(headers.get("Retry-After")) if headers is not None else None
    if retry_after is None:
        # Status.details.retryAfterSeconds is how kube-apiserver repeats Retry-After in the body.
        seconds = (status.get("details") or {}).get("retryAfterSeconds")
        retry_after = float(seconds) if isinstance(seconds, int | float) else None
    kind: type[ClusterError]
    if _too_large_resource_version(status) and (code == 410 or code >= 500):
        kind = TooLarge
    elif code == 410:
        kind = Expired
    elif code == 404:
        kind = NotServed
    elif code in (401, 403):
        kind = Forbidden
    elif code == 429:
        kind = Throttled
    elif code >= 500:
        kind = ServerError
    else:
        kind = BadResponse
    return kind(message, cluster=cluster, code=code, reason=reason, retry_after=retry_after)


def translate(error: BaseException, *, cluster: str = "", path: str = "") -> ClusterError:
    """The `ClusterError` for a foreign exception raised while talking to a cluster."""
    if isinstance(error, ClusterError):
        return error
    # Imported here: the tree itself is light, so the configuration checks that raise
    # ConfigurationError do not load the HTTP and Kubernetes clients.
    import aiohttp

    from dra_mirror.service.clusters.kube_client import ApiException

    where = f"{path}: " if path else ""
    if isinstance(error, ApiException):
        if not error.status:
            return Unreachable(f"{where}{error.reason}", cluster=cluster)
        return from_status(error.status, error.body, error.headers, cluster=cluster, path=path)
    if isinstance(error, aiohttp.ClientResponseError):
        return from_status(error.status, None, error.headers, cluster=cluster, path=path)
    if isinstance(error, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return Unreachable(f"{where}timed out", cluster=cluster)
    if isinstance(error, aiohttp.ClientPayloadError):
        return Unreachable(f"{where}stream cut off: {error}", cluster=cluster)
    if isinstance(error, aiohttp.ClientError | OSError):
        return Unreachable(f"{where}{type(error).__name__}: {error}", cluster=cluster)
    return BadResponse(f"{where}{type(error).__name__}: {error}", cluster=cluster)
