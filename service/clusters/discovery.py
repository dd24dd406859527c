"""Which resource.k8s.io version each cluster serves, found once and again when it disappears.

Kubernetes serves DRA as resource.k8s.io/v1 since 1.34, v1beta2 in 1.33 and v1beta1 in 1.32
(older clusters may serve several at once). The mirror reads the newest one served — `v1`, then
`v1beta2`, then `v1beta1` — and normalizes all of them into the same records, so switching
version (after an upgrade, or when a version is switched off and its collections answer 404)
only needs a relist.

A version counts as served when the group's discovery document lists it AND its resource list
names every DRA collection the mirror watches. None served → `NotServed`, which the reactor
reports in the cluster's status while the rest of the cluster (pods, nodes) goes on.
"""

from __future__ import annotations

import asyncio

import orjson

from service.clusters.errors import BadResponse, NotServed
from service.clusters.resources import DRA_GROUP, DRA_VERSIONS, WATCHED
from service.clusters.transport import ClusterApi

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
    """The resource.k8s.io version one cluster serves; shared by that cluster's watchers."""

    def __init__(self, api: ClusterApi, *, preference: tuple[str, ...] = DRA_VERSIONS) -> None:
        self.api = api
        self.preference = preference
        self.current: str | None = None
        self._lock = asyncio.Lock()

    async def version(self) -> str:
        """The version to use; discovers it the first time and after `forget`."""
        if self.current is not None:
            return self.current
        async with self._lock:  # the four DRA watchers ask at once: discover once
            if self.current is None:
                self.current = await self._discover()
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
            raise NotServed(f"{DRA_GROUP} is not served", cluster=cluster, code=404) from error
        listed = {v.get("version") for v in group.get("versions") or () if isinstance(v, dict)}
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
