"""Objects a cluster serves that do not decode into records: counted, logged once, skipped.

Bad input from a cluster must never stop a watch: the watchers hand each one on as
`Skipped`, and `MalformedObjects` decides whether it is news. An object is counted and logged
once per (reference, resourceVersion) — a relist that meets it again, unchanged, stays quiet;
a new version of it that is still broken is news again. Logs carry the reference as
structured fields (cluster, kind, namespace, object_name) and the decoder's reason, never the
object's body.
"""

from __future__ import annotations

import logging

from dra_mirror.service.model.normalize import MalformedObject

log = logging.getLogger("dra_mirror.service.reactor.reactor")

_REMEMBERED = 100_000  # (ref, resourceVersion) pairs kept before the memory starts over


def split_ref(ref: str, cluster: str, kind: str) -> tuple[str, str]:
    """(namespace, name) from `cluster/Kind/[namespace/]name` (cluster names may hold '/')."""
    prefix = f"{cluster}/{kind}/"
    rest = ref[len(prefix) :] if ref.startswith(prefix) else ref.rsplit("/", 2)[-1]
    namespace, _, name = rest.rpartition("/")
    return namespace, name


class MalformedObjects:
    """Counts per kind of one cluster's malformed objects, and their log lines."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.counts: dict[str, int] = {}
        self._seen: set[tuple[str, str]] = set()

    def report(self, kind: str, malformed: MalformedObject, resource_version: str) -> bool:
        """Count and log `malformed` unless already seen at this version; True when new."""
        seen = (malformed.ref, resource_version)
        if seen in self._seen:
            return False
        if len(self._seen) >= _REMEMBERED:
            self._seen.clear()
        self._seen.add(seen)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        namespace, name = split_ref(malformed.ref, self.cluster, kind)
        log.warning(
            "skipping malformed %s %s: %s",
            kind,
            malformed.ref,
            malformed.reason,
            extra={
                "cluster": self.cluster,
                "kind": kind,
                "namespace": namespace,
                "object_name": name,  # `name` is reserved by logging (see service.logs)
                "resource_version": resource_version,
            },
        )
        return True
