"""The DRA series a scraper narrower than every namespace may see.

A team's Prometheus may scrape `/metrics` with a token whose scope is its own namespaces
(`east/ml`). What it gets is what the graph would show that scope:

* series of namespaced objects (`kube_resourceclaim_*`, `kube_pod_resourceclaim_info`: they
  carry `namespace`) only for namespaces the scope allows;
* series of cluster-scoped objects (`kube_deviceclass_info`, `kube_resourceslice_devices_total`,
  `dra_mirror_devices{class,status}`: device statuses stay true, as `Device.status` does) for
  every cluster the scope names;
* aggregates over a cluster's namespaced objects (`dra_mirror_claims`,
  `dra_mirror_claim_pending_seconds`, `dra_mirror_idle_held_devices`) only for clusters whose
  every namespace the scope sees — a partial sum would be neither true nor the scope's own;
* the mirror's own series (watches, stores, the API's operation names) not at all: they are
  the operators', who scrape with a `*/*` scope.

`ScopedSeries.text(dra, scope)` filters the rendered text (`service.http.metrics_dra.render`:
every sample line starts with its `cluster` label, then `namespace` when it has one) and
keeps the last few answers per scope for the snapshot they came from, so repeated scrapes of
one team cost a dictionary lookup.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Protocol

NAMESPACE_WIDE = (b"dra_mirror_claims", b"dra_mirror_claim_pending_seconds",
                  b"dra_mirror_idle_held_devices")  # fmt: skip
_VALUE = rb'"((?:[^"\\\n]|\\.)*)"'
_SAMPLE = re.compile(rb"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{cluster=" + _VALUE
                     + rb"(?:,namespace=" + _VALUE + rb")?")  # fmt: skip
_ESCAPES = re.compile(rb"\\(.)")


class MetricsScope(Protocol):
    def allows(self, cluster: str, namespace: str = "") -> bool: ...

    def all_namespaces(self, cluster: str) -> bool: ...


def _label(value: bytes) -> str:
    return _ESCAPES.sub(lambda m: b"\n" if m.group(1) == b"n" else m.group(1), value).decode()


def _family(name: bytes) -> bytes:
    for suffix in (b"_bucket", b"_count", b"_sum"):
        if name.endswith(suffix) and name[: -len(suffix)] in NAMESPACE_WIDE:
            return name[: -len(suffix)]
    return name


def scoped(text: bytes, scope: MetricsScope) -> bytes:
    """The lines of `text` the scope may see (HELP and TYPE lines kept)."""
    kept: list[bytes] = []
    clusters: dict[str, tuple[bool, bool]] = {}  # cluster -> (sees it, sees every namespace)
    for line in text.splitlines(keepends=True):
        if line.startswith(b"#"):
            kept.append(line)
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue  # no cluster label: not a series of this module
        name, cluster_raw, namespace_raw = match.groups()
        cluster = _label(cluster_raw)
        seen = clusters.get(cluster)
        if seen is None:
            seen = clusters[cluster] = (scope.allows(cluster), scope.all_namespaces(cluster))
        if namespace_raw is not None:
            if seen[0] and scope.allows(cluster, _label(namespace_raw)):
                kept.append(line)
        elif _family(name) in NAMESPACE_WIDE:
            if seen[1]:
                kept.append(line)
        elif seen[0]:
            kept.append(line)
    return b"".join(kept)


class ScopedSeries:
    """`scoped` answers, kept for the snapshot text they were cut from (at most `size`)."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._source: bytes | None = None
        self._answers: OrderedDict[MetricsScope, bytes] = OrderedDict()

    def text(self, dra: bytes, scope: MetricsScope) -> bytes:
        if dra is not self._source:
            self._source, self._answers = dra, OrderedDict()
        found = self._answers.get(scope)
        if found is None:
            found = self._answers[scope] = scoped(dra, scope)
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)
        else:
            self._answers.move_to_end(scope)
        return found
