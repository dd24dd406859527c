"""The retained window of changes a cluster's watches and paged lists read.

Like the watch cache of kube-apiserver over etcd's history: a bounded deque of `Event`s with
consecutive resourceVersions. `floor` is the oldest version a watch may resume from; every
event after it is retained. Asking for anything older is 410 Expired, which tells clients
to relist. Each event keeps the object's previous state, so a paged LIST can rebuild the
state at the version of its first page.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import NamedTuple

from dra_mirror.service.sim.errors import expired

Key = tuple[str, str]  # (namespace or "", name)


class Event(NamedTuple):
    """One change in the log; `prev` is the state before it (None for ADDED)."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    plural: str
    key: Key
    obj: dict
    prev: dict | None


class EventLog:
    """Events with resourceVersion > `floor`, at most `window` of them."""

    def __init__(self, window: int, floor: int) -> None:
        self._log: deque[Event] = deque(maxlen=window)
        self.floor = floor

    def append(self, event: Event) -> None:
        """Add the next event (its rv must follow the previous one's)."""
        log = self._log
        if log.maxlen is not None and len(log) == log.maxlen:
            self.floor = log[0].rv  # the oldest event leaves the window
        log.append(event)

    def reset(self, floor: int) -> None:
        """Forget every event: watches must resume from `floor` or later (bulk load, restart)."""
        self._log.clear()
        self.floor = floor

    def after(self, rv: int, current: int) -> list[Event]:
        """Events with resourceVersion > rv; 410 Expired if some have left the window."""
        if rv < self.floor:
            raise expired(f"too old resource version: {rv}")
        if rv >= current:
            return []
        log = self._log
        start = max(0, rv - log[0].rv + 1)
        wanted = len(log) - start
        if wanted <= start:  # walk from the newer end: O(wanted), the usual case of a live watch
            return list(islice(reversed(log), wanted))[::-1]
        return list(islice(log, start, None))
