"""Errors of the simulated API server, shaped as Kubernetes `Status` objects.

Every failure the simulator reports to a client is an `ApiError`; the HTTP layer turns it
into the JSON body kube-apiserver sends (`kind: Status, status: Failure, reason, code,
details`). The constructors below mirror the messages of `k8s.io/apimachinery/pkg/api/errors`
so that kubectl prints what a user of a real cluster would see.

    ApiError
      code 400 BadRequest         malformed body, bad selector, bad parameter
      code 404 NotFound           object, namespace, path or API version not served
      code 405 MethodNotAllowed   verb not served on a path
      code 409 AlreadyExists      create of an existing name
      code 409 Conflict           stale metadata.resourceVersion on update
      code 410 Expired            watch or continue token older than the retained window
      code 422 Invalid            validation failures, with details.causes
      code 429/500/503            injected faults (with Retry-After)
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A failure that becomes a Kubernetes Status object."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        """The `meta/v1 Status` body kube-apiserver would send for this error."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details = dict(self.details) if self.details else {}
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details:
            body["details"] = details
        return body


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(resource, group)} "{name}" not found',
        {"name": name, "group": group, "kind": resource},
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(resource, group)} "{name}" already exists',
        {"name": name, "group": group, "kind": resource},
    )


def conflict(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": '
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
        {"name": name, "group": group, "kind": resource},
    )


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid; each cause is {reason: FieldValueInvalid|..., message, field}."""
    summary = ", ".join(f"{c['field']}: {c['message']}" for c in causes)
    return ApiError(
        422,
        "Invalid",
        f'{kind}.{group or "core"} "{name}" is invalid: [{summary}]'
        if len(causes) > 1
        else f'{kind}.{group or "core"} "{name}" is invalid: {summary}',
        {"name": name, "group": group, "kind": kind, "causes": causes},
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)
