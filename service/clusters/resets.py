"""One cluster's resourceVersions went back: the signal its watchers share, and what counts.

A watcher resumes from its position (the last resourceVersion it saw) after every failure.
When the cluster's versions were reset — etcd restored from a backup without
`--bump-revision`, or a new etcd behind the same API server — that position names a moment
the server never reached, and kube-apiserver's watch cache accepts a watch from it without a
word: it sends nothing (not even bookmarks, which carry the cache's lower version) until its
counter passes the position, and then goes on from there, so every change in between is
skipped. Deleted objects stay in the mirror as ghosts. Each kind of the cluster may see
evidence of the reset at a different time, or not at all:

* "Too large resource version" (`errors.TooLarge`): a list or get at a version the server
  does not know (a 504 with cause ResourceVersionTooLarge from kube-apiserver, a 410 from
  other servers and the simulator);
* a version going backwards: a list, an event or a bookmark of one kind older than one that
  kind already served. Versions are opaque strings, except that since Kubernetes 1.35
  (KEP-5504, comparable resource versions) those of one resource compare as integers; they
  are compared only when both are so formed (`older`), and only within a kind;
* silence: a watch from a position in the future is a stalled watch (no bookmarks): after a
  stall the watcher asks for the kind's current version (a LIST of one object) and compares.

A new API server instance is not evidence by itself: kube-apiserver replicas share etcd's
counter, and a restart of one keeps it. What a restart of the simulator does (`restart` fault)
is an etcd restore: every stream ends and the counter starts again lower.

`ClusterResets` is shared by the watchers of one cluster (the reactor makes one per cluster).
A watcher that sees evidence calls `report`; every other watcher of the cluster drops its
position and relists (a relist diffs against the index, so what vanished is deleted), one
that is watching at once, one that is waiting to retry when it next tries. Promises: a report
by a watcher that has not caught up with the last reset is taken as evidence of that reset,
not of a new one (the kinds notice one reset at different times); `generation` only grows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def comparable(version: str | None) -> bool:
    """Whether `version` is a KEP-5504 comparable resourceVersion: decimal digits without a
    leading zero ("0" is not a version but "any", for lists and watches)."""
    if not version:
        return False
    return version.isascii() and version.isdigit() and version[0] != "0"


def older(version: str | None, than: str | None) -> bool:
    """Whether `version` comes before `than`; False unless both are comparable. Without
    converting: a longer number is larger, numbers of one length compare as text."""
    if not (comparable(version) and comparable(than)):
        return False
    assert version is not None and than is not None
    return len(version) < len(than) or (len(version) == len(than) and version < than)


class ClusterResets:
    """The resets of one cluster's resourceVersions its watchers have seen evidence of."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.generation = 0
        """How many resets were reported; a watcher relists when it has seen fewer."""
        self.reason: str | None = None
        """What the last report said (kind and evidence), for logs and status."""
        self._bumped = asyncio.Event()

    def report(self, kind: str, evidence: str, *, seen: int) -> int:
        """Evidence of a reset seen by the watcher of `kind`, which had caught up with
        generation `seen`; returns the generation it has now handled (it relists itself)."""
        if seen < self.generation:
            return self.generation  # the reset the others already reported
        self.generation += 1
        self.reason = f"{kind}: {evidence}"
        log.warning(
            "resourceVersions reset (%s): every kind relists",
            evidence,
            extra={"cluster": self.cluster, "kind": kind},
        )
        bumped, self._bumped = self._bumped, asyncio.Event()
        bumped.set()
        return self.generation

    async def wait_beyond(self, seen: Callable[[], int]) -> None:
        """Return once a reset newer than `seen()` (read again at each report) was reported."""
        while self.generation <= seen():
            await self._bumped.wait()
