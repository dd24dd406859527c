"""Which resource.k8s.io version each cluster serves, found once and again when it disappears.

Kubernetes serves DRA as resource.k8s.io/v1 since 1.34, v1beta2 in 1.33 and v1beta1 in 1.32
(older clusters may serve several at once). The mirror reads the newest one served — `v1`, then
`v1beta2`, then `v1beta1` — and normalizes all of them into the same records, so switching
version (after an upgrade, or when a version is switched off and its collections answer 404)
only needs a relist.

A version counts as served when the group's discovery document lists it AND its resource list
names every DRA collection the mirror watches. None served → `NotServed`, which the reactor
reports in the cluster's status (DRA not served, and `listed`: the versions the group's
discovery does list) while the rest of the cluster (pods, nodes) goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import orjson

from dra_mirror.service.clusters.errors import BadResponse, ClusterError, NotServed
from dra_mirror.service.clusters.resources import DRA_GROUP, DRA_VERSIONS, WATCHED
from dra_mirror.service.clusters.transport import ClusterApi

_DRA_PLURALS = frozenset(plural for group, plural in WATCHED if group == DRA_GROUP)


def _decode(body: bytes, what: str, cluster: str) -> dict:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise BadResponse(f"{what}: not JSON", cluster=cluster) from error
    if not isinstance(document, dict):
        raise BadResponse(f"{what}: not a JSON object", cluster=cluster)
    return document


class DraVersions:
    """The resource.k8s.io version one cluster serves; shared by that cluster's watchers.

    The answer is kept for `max_age` seconds, then discovery runs again, so a cluster upgraded
    to a newer version is followed without waiting for the old one to be switched off.
    resourceVersions belong to the storage, not to an API version: a watcher can go on from
    its position under the new version without a relist.
    """

    def __init__(
        self,
        api: ClusterApi,
        *,
        preference: tuple[str, ...] = DRA_VERSIONS,
        max_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.preference = preference
        self.max_age = max_age
        self.clock = clock
        self.current: str | None = None
        self.listed: tuple[str, ...] = ()  # versions the group's discovery lists, last asked
        self._found_at = float("-inf")
        self._lock = asyncio.Lock()

    def _fresh(self) -> bool:
        return self.current is not None and self.clock() - self._found_at < self.max_age

    async def version(self) -> str:
        """The version to use; discovers it the first time, after `forget`, and when the
        last answer is older than `max_age` (keeping the old answer if discovery fails for
        any reason but "not served")."""
        if self._fresh() and self.current is not None:
            return self.current
        async with self._lock:  # the four DRA watchers ask at once: discover once
            if not self._fresh():
                try:
                    found = await self._discover()
                except NotServed:
                    self.current = None
                    raise
                except ClusterError:
                    if self.current is None:
                        raise
                    found = self.current  # a hiccup: keep watching what works, ask later
                self.current = found
                self._found_at = self.clock()
            assert self.current is not None
            return self.current

    def forget(self, version: str) -> None:
        """`version` answered 404: discover again on the next `version()`."""
        if self.current == version:
            self.current = None

    async def _discover(self) -> str:
        cluster = self.api.cluster
        group_path = f"/apis/{DRA_GROUP}"
        try:
            group = _decode(await self.api.get(group_path, time_limit=30), group_path, cluster)
        except NotServed as error:
            self.listed = ()
            raise NotServed(f"{DRA_GROUP} is not served", cluster=cluster, code=404) from error
        listed = {v.get("version") for v in group.get("versions") or () if isinstance(v, dict)}
        self.listed = tuple(sorted(v for v in listed if isinstance(v, str) and v))
        for version in self.preference:
            if version not in listed:
                continue
            path = f"{group_path}/{version}"
            try:
                resources = _decode(await self.api.get(path, time_limit=30), path, cluster)
            except NotServed:
                continue
            served = {
                r.get("name") for r in resources.get("resources") or () if isinstance(r, dict)
            }
            if _DRA_PLURALS <= served:
                return version
        raise NotServed(
            f"{DRA_GROUP}: none of {', '.join(self.preference)} is served "
            f"(discovery lists {', '.join(sorted(v for v in listed if v)) or 'no version'})",
            cluster=cluster,
            code=404,
        )
