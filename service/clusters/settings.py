"""How the watchers talk to an API server: page sizes, time limits, bookmarks, backoff.

One frozen `WatchSettings` is shared by every `KindWatcher` of a process; its defaults follow
kube-apiserver's own (the watch cache's bookmark frequency, kubectl's page size) and each field
says what it bounds. `service.clusters.watching` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WatchSettings:
    """How the watchers talk to the API server."""

    page_size: int = 500
    """LIST `limit`: pages of a few hundred objects keep memory and GC work small."""
    watch_timeout: int = 300
    """WATCH `timeoutSeconds`; the server ends the stream then and we re-watch from there."""
    watch_timeout_jitter: float = 0.2
    """Up to this fraction is added to `watch_timeout`, so many watches do not renew at once."""
    stream_grace: float = 30.0
    """Seconds past `timeoutSeconds` before a silent stream counts as stalled (Unreachable)."""
    bookmark_interval: float = 60.0
    """How often the server sends a bookmark on a quiet watch: kube-apiserver's watch cache
    sends one about every minute (`defaultBookmarkFrequency`), and two seconds before the
    watch's deadline."""
    stall_intervals: float = 2.0
    """A stream that delivered nothing (no event, no bookmark) for this many bookmark intervals
    is stalled: it is ended and watched again. 0: wait for the stream's time limit."""
    quiet_intervals: float = 1.25
    """A stream that delivered nothing for this many bookmark intervals missed a bookmark: the
    kind is reported as possibly stale (the cluster is served as `stale`, not `synced`) until
    it is heard again. 0: off."""
    position_check_interval: float = 10.0
    """While a stream is silent, every this many seconds the kind's current resourceVersion is
    asked for (a LIST of one object) and compared with the watch's position: a watch from a
    position the server never reached (an etcd restored from a backup) is silent, and this
    finds it in seconds. A stream that delivers costs no check. 0: off."""
    list_time_limit: float = 120.0
    """Upper bound for one LIST page request, seconds."""
    list_restarts: int = 3
    """How often an expired continue token restarts a LIST before it counts as a failure."""
    backoff_base: float = 0.5
    """First reconnect delay bound, seconds (then doubling, with full jitter)."""
    backoff_cap: float = 30.0
    """Longest computed reconnect delay, seconds."""
    retry_after_cap: float = 300.0
    """Longest Retry-After obeyed, seconds."""

    @property
    def stall_after(self) -> float:
        """Seconds of silence after which a stream counts as stalled (0: never)."""
        return max(0.0, self.bookmark_interval * self.stall_intervals)

    @property
    def quiet_after(self) -> float:
        """Seconds of silence after which a stream may be stale (0: never)."""
        return max(0.0, self.bookmark_interval * self.quiet_intervals)
