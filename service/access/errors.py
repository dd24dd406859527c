"""The errors of the access boundary: who is asking, and whether they may.

    AccessError                anything that stops a request before it reads the mirror
     ├── Unauthenticated       401: no credentials, or credentials nobody here accepts
     ├── Forbidden             403: authenticated, but the subject may see nothing (no scope)
     ├── Throttled             429: the subject asked too often (`retry_after` seconds)
     └── ReviewUnavailable     503: the reviewing API (TokenReview, SubjectAccessReview, the
                               issuer's keys) cannot be reached; the request is refused —
                               access fails closed, never open
    AccessConfigError          the access configuration is unusable (at start, never later)

Messages are written for the person asking: they never contain the token, a key, a
kubeconfig or a URL with credentials. Foreign errors (httpx, PyJWT, kubernetes_asyncio) are
translated once, where they are raised, with `raise … from`.
"""

from __future__ import annotations

from dra_mirror.service.settings import SettingsError


class AccessError(Exception):
    """Base of the access errors; `status` is the HTTP status a front end answers with."""

    status = 401
    code = "UNAUTHENTICATED"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unauthenticated(AccessError):
    status = 401
    code = "UNAUTHENTICATED"


class Forbidden(AccessError):
    status = 403
    code = "FORBIDDEN"


class Throttled(AccessError):
    status = 429
    code = "RATE_LIMITED"

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ReviewUnavailable(AccessError):
    status = 503
    code = "ACCESS_REVIEW_UNAVAILABLE"


class AccessConfigError(SettingsError):
    """The access configuration cannot be used; the message names the file and the field."""
