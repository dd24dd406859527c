"""What the watchers report, one message per thing observed, in the order observed.

A `KindWatcher` (`service.clusters.watching`) hands each message to its `emit` (the reactor's
queue): `Listed` (a complete LIST, the truth at its resourceVersion), `Observed` (one event),
`Skipped` (an object that does not decode), `Bookmarked`, `Connected` (a stream opened),
`Silent` (a stream missed its bookmark deadline: what it serves may be stale until it is heard
again) and `Failed` (a request failed, a stream stalled, or the cluster's versions were reset;
the watcher retries or relists). Pure data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

from dra_mirror.service.clusters.errors import ClusterError
from dra_mirror.service.model.index import Event
from dra_mirror.service.model.normalize import MalformedObject
from dra_mirror.service.model.records import Record


class Listed(NamedTuple):
    """A complete LIST of one kind: the truth at `resource_version`."""

    kind: str
    records: list[Record]
    resource_version: str
    api_version: str


class Observed(NamedTuple):
    """One ADDED/MODIFIED/DELETED event."""

    kind: str
    event: Event
    resource_version: str


class Skipped(NamedTuple):
    """An object that does not decode into a record; the watch goes on without it.
    `resource_version` is the object's ("" when a list could not tell)."""

    kind: str
    malformed: MalformedObject
    resource_version: str


class Bookmarked(NamedTuple):
    """A BOOKMARK: nothing changed for this kind up to `resource_version`."""

    kind: str
    resource_version: str


class Connected(NamedTuple):
    """A watch stream opened (the cluster answers)."""

    kind: str
    api_version: str


class Silent(NamedTuple):
    """The kind's stream delivered nothing (no event, no bookmark) for `seconds`, longer than
    the server's bookmarks allow: possibly stale until the next message of the kind."""

    kind: str
    seconds: float


class Failed(NamedTuple):
    """A request failed; the watcher retries after `retry_in` seconds (attempt counts up).
    `silent_for`: how long the failed stream had been silent before (a stall, a reset found
    on a silent stream): since then it may have missed changes."""

    kind: str
    error: ClusterError
    retry_in: float
    attempt: int
    silent_for: float = 0.0


WatchMessage = Listed | Observed | Skipped | Bookmarked | Connected | Silent | Failed
Emit = Callable[[WatchMessage], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]
