"""Faults a simulated cluster can inject, set from a scenario or `POST /sim/faults`.

One `Faults` object per cluster holds the active settings; the HTTP layer asks it before
each request and while streaming watches. Settings (JSON/YAML keys, all optional; posting
`null` for a key clears it):

    dropWatchAfterEvents: 5          every watch stream ends after 5 events
    expireWatches: 2                 the next 2 watch requests get 410 Expired
    errors: {code: 503, count: 3, retryAfter: 1, path: "resourceclaims"}
                                     the next 3 requests (whose path contains `path`, or
                                     matches it as a glob such as `/api/v1/*`, if given)
                                     fail with 500/503/429 and Retry-After
    stallWatch: {seconds: 5, afterEvents: 1, count: 1}
                                     the next `count` watch streams go silent for `seconds`
                                     after `afterEvents` events (no events, no bookmarks)
    slowWatch: {delay: 0.05}         every watch event is delayed by `delay` seconds
    hideVersions: [v1beta1]          resource.k8s.io versions that disappear from discovery
                                     and answer 404
    futureWatches: wait | tooLarge   a watch from a resourceVersion newer than the store's:
                                     `tooLarge` (the default) ends it with a 410 "too large
                                     resource version"; `wait` accepts it silently, as
                                     kube-apiserver's watch cache does — no event and no
                                     bookmark until the counter passes it, then the events
                                     after it (those in between are never sent)
    restart: true | {base: 1}        an action, not a setting: reset resourceVersions now
                                     (handled by the server, which owns the store)
    dropWatches: true                an action, not a setting: end every open watch stream
                                     now, resourceVersions kept (an API server restarted, a
                                     load balancer dropping its connections)

Counts are consumed as requests arrive, so a test can say "the next two watches fail".
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from dra_mirror.service.sim.errors import ApiError, bad_request, expired

_ERROR_REASONS = {
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
KNOWN = {
    "dropWatchAfterEvents",
    "expireWatches",
    "errors",
    "stallWatch",
    "slowWatch",
    "hideVersions",
    "futureWatches",
    "restart",
    "dropWatches",
}

ACTIONS = {"restart", "dropWatches"}  # done at once by the server, never kept as settings


@dataclass
class StreamFaults:
    """What one watch stream must suffer, decided when it starts."""

    drop_after: int | None = None
    stall_after: int | None = None
    stall_seconds: float = 0.0
    delay: float = 0.0
    future_wait: bool = False


@dataclass
class Faults:
    """The active fault settings of one cluster."""

    settings: dict[str, Any] = field(default_factory=dict)

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Merge `changes` (a `faults:` dict); returns the `restart` action if any."""
        unknown = set(changes) - KNOWN
        if unknown:
            raise bad_request(f"unknown faults: {sorted(unknown)}; known: {sorted(KNOWN)}")
        restart = changes.get("restart")
        for key, value in changes.items():
            if key in ACTIONS:
                continue
            if value is None:
                self.settings.pop(key, None)
            else:
                self.settings[key] = _checked(key, value)
        if restart in (None, False):
            return {}
        return restart if isinstance(restart, dict) else {"base": 1}

    def hidden_versions(self) -> set[str]:
        return set(self.settings.get("hideVersions") or [])

    def before_request(self, path: str) -> None:
        """Raise the injected error for this request, if one is due."""
        errors = self.settings.get("errors")
        if not errors or not _path_matches(errors.get("path"), path):
            return
        if errors.get("count", 1) <= 0:
            self.settings.pop("errors")
            return
        errors["count"] = errors.get("count", 1) - 1
        if errors["count"] <= 0:
            self.settings.pop("errors")
        code = int(errors.get("code", 503))
        raise ApiError(
            code,
            _ERROR_REASONS.get(code, "InternalError"),
            f"injected fault: {code}",
            retry_after=int(errors.get("retryAfter", 1)),
        )

    def before_watch(self) -> StreamFaults:
        """Raise 410 if a watch expiry is due; otherwise what this stream must suffer."""
        pending = int(self.settings.get("expireWatches") or 0)
        if pending > 0:
            if pending == 1:
                self.settings.pop("expireWatches")
            else:
                self.settings["expireWatches"] = pending - 1
            raise expired("too old resource version (injected fault)")
        stream = StreamFaults(
            drop_after=self.settings.get("dropWatchAfterEvents"),
            future_wait=self.settings.get("futureWatches") == "wait",
        )
        stall = self.settings.get("stallWatch")
        if stall:
            stream.stall_after = int(stall.get("afterEvents", 0))
            stream.stall_seconds = float(stall.get("seconds", 5))
            count = int(stall.get("count", 1)) - 1
            if count <= 0:
                self.settings.pop("stallWatch")
            else:
                stall["count"] = count
        slow = self.settings.get("slowWatch")
        if slow:
            stream.delay = float(slow.get("delay", 0.05))
        return stream


def _path_matches(pattern: str | None, path: str) -> bool:
    """No pattern: every path; a glob (`*/resourceclaims*`) matches the whole path; other
    text matches as a substring (`resourceclaims`)."""
    if not pattern:
        return True
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(path, pattern)
    return pattern in path


def _checked(key: str, value: Any) -> Any:
    if key in ("dropWatchAfterEvents", "expireWatches"):
        if not isinstance(value, int) or value < 0:
            raise bad_request(f"{key} must be a non-negative integer")
        return value
    if key == "futureWatches":
        if value not in ("wait", "tooLarge"):
            raise bad_request("futureWatches must be wait or tooLarge")
        return value
    if key == "hideVersions":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad_request("hideVersions must be a list of versions")
        return list(value)
    if not isinstance(value, dict):
        raise bad_request(f"{key} must be a mapping")
    if key == "errors" and int(value.get("code", 503)) not in _ERROR_REASONS:
        raise bad_request(f"errors.code must be one of {sorted(_ERROR_REASONS)}")
    return dict(value)
