"""What the watchers report, one message per thing observed, in the order observed.

A `KindWatcher` (`service.clusters.watching`) hands each message to its `emit` (the reactor's
queue): `Listed` (a complete LIST, the truth at its resourceVersion), `Observed` (one event),
`Skipped` (an object that does not decode), `Bookmarked`, `Connected` (a stream opened) and
`Failed` (a request failed, or a stream stalled; the watcher retries). Pure data.
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


class Failed(NamedTuple):
    """A request failed; the watcher retries after `retry_in` seconds (attempt counts up)."""

    kind: str
    error: ClusterError
    retry_in: float
    attempt: int


WatchMessage = Listed | Observed | Skipped | Bookmarked | Connected | Failed
Emit = Callable[[WatchMessage], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]
