"""Which resource.k8s.io version each cluster serves, found once and again when it disappears.

Kubernetes serves DRA as resource.k8s.io/v1 since 1.34, v1beta2 in 1.33 and v1beta1 in 1.32
(older clusters may serve several at once). The mirror reads the newest one served — `v1`, then
`v1beta2`, then `v1beta1` — and normalizes all of them into the same records, so switching
version (after an upgrade, or when a version is switched off and its collections answer 404)
only needs a relist.

A version counts as served when the group's discovery document lists it AND its resource list
names every DRA collection the mirror watches at that version (`kinds.CORE_DRA`). None served
→ `NotServed`, which the reactor reports in the cluster's status (DRA not served, and
`listed`: the versions the group's discovery does list) while the rest of the cluster (pods,
nodes) goes on.

An optional kind (`kinds.OPTIONAL`: versions of its own, in its own group — DeviceTaintRule:
resource.k8s.io v1alpha3 from 1.33, v1beta2 from 1.36, v1 from 1.37; PodGroup:
scheduling.k8s.io v1alpha2 in 1.36, v1beta1 from 1.37) is found in the same pass: the newest
of its versions its group lists and whose resource list names it (`version_of`). None of them
→ `NotServed` for that kind alone, remembered as long as any answer (a watcher retrying does
not ask the API server again before `max_age`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import orjson

from dra_mirror.service.clusters.errors import BadResponse, ClusterError, NotServed
from dra_mirror.service.clusters.resources import DRA_GROUP, DRA_VERSIONS
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.model.kinds import BY_KIND, CORE_DRA, OPTIONAL

_DRA_PLURALS = frozenset(r.plural for r in CORE_DRA)


def _decode(body: bytes, what: str, cluster: str) -> dict:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise BadResponse(f"{what}: not JSON", cluster=cluster) from error
    if not isinstance(document, dict):
        raise BadResponse(f"{what}: not a JSON object", cluster=cluster)
    return document


def _versions(group: dict) -> set[str]:
    """The versions an APIGroup document lists."""
    found = {v.get("version") for v in group.get("versions") or () if isinstance(v, dict)}
    return {v for v in found if isinstance(v, str) and v}


def _retrieve(future: asyncio.Future[bytes]) -> None:
    """The outcome of a resource list asked for ahead and not used is nobody's: not logged."""
    if not future.cancelled():
        future.exception()


class DraVersions:
    """The resource.k8s.io versions one cluster serves; shared by that cluster's watchers.

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
        self.other_listed: dict[str, tuple[str, ...]] = {}  # the same, of optional kinds' groups
        self.own: dict[str, str | None] = {}  # kind with versions of its own -> served one
        self._found_at = float("-inf")
        self._lock = asyncio.Lock()

    def _recent(self) -> bool:
        return self.clock() - self._found_at < self.max_age

    def _fresh(self) -> bool:
        return self.current is not None and self._recent()

    async def version(self) -> str:
        """The version to use; discovers it the first time, after `forget`, and when the
        last answer is older than `max_age` (keeping the old answer if discovery fails for
        any reason but "not served")."""
        if self._fresh() and self.current is not None:
            return self.current
        async with self._lock:  # the four DRA watchers ask at once: discover once
            if not self._fresh():
                await self._refresh()
            if self.current is None:
                raise self._not_served()
            return self.current

    async def version_of(self, kind: str) -> str:
        """The version to watch `kind` at: `version()` for the kinds served together, the
        newest served of its own versions for the others (NotServed: none is)."""
        if kind not in OPTIONAL:
            return await self.version()
        if not (self._recent() and kind in self.own):
            async with self._lock:
                if not (self._recent() and kind in self.own):
                    await self._refresh(strict=False)
        found = self.own.get(kind)
        if found is None:
            resource = BY_KIND[kind]
            listed = self.listed if resource.is_dra else self.other_listed.get(resource.group, ())
            raise NotServed(
                f"{resource.group}: {resource.plural} is served at none of "
                f"{', '.join(resource.versions)} "
                f"(discovery lists {', '.join(listed) or 'no version'})",
                cluster=self.api.cluster,
                code=404,
            )
        return found

    def unserved(self, kind: str) -> bool:
        """Whether the last discovery found `kind` (one with versions of its own) served at
        none of them."""
        return kind in OPTIONAL and kind in self.own and self.own[kind] is None

    async def _refresh(self, *, strict: bool = True) -> None:
        try:
            self.current, self.own = await self._discover()
        except ClusterError:
            # A hiccup: keep watching what works, ask later. With no answer yet, the kinds
            # served together fail now; a kind of its own keeps what it had, or fails.
            if strict and self.current is None:
                raise
            if not strict and not self.own:
                raise
            return
        self._found_at = self.clock()

    def forget(self, version: str, kind: str | None = None) -> None:
        """`version` answered 404 (for `kind`): discover again on the next ask."""
        if kind in OPTIONAL:
            if self.own.get(kind) == version:
                del self.own[kind]
        elif self.current == version:
            self.current = None

    def _not_served(self) -> NotServed:
        return NotServed(
            f"{DRA_GROUP}: none of {', '.join(self.preference)} is served "
            f"(discovery lists {', '.join(self.listed) or 'no version'})",
            cluster=self.api.cluster,
            code=404,
        )

    async def _discover(self) -> tuple[str | None, dict[str, str | None]]:
        """(the version serving every kind served together or None, the version of each kind
        with versions of its own or None). NotServed only when the group is not served.

        The preferred version's resource list is asked for together with the group's document
        (one round trip instead of two, before the first LIST); it is used only if the group
        lists that version, as when asked after it."""
        group_path = f"/apis/{DRA_GROUP}"
        preferred = f"{group_path}/{self.preference[0]}" if self.preference else None
        ahead = asyncio.ensure_future(self.api.get(preferred, time_limit=30)) if preferred else None
        try:
            return await self._discover_with(group_path, ahead)
        finally:
            if ahead is not None and not ahead.done():
                ahead.cancel()
            if ahead is not None:
                ahead.add_done_callback(_retrieve)

    async def _discover_with(
        self, group_path: str, ahead: asyncio.Future[bytes] | None
    ) -> tuple[str | None, dict[str, str | None]]:
        cluster = self.api.cluster
        try:
            group = _decode(await self.api.get(group_path, time_limit=30), group_path, cluster)
        except NotServed as error:
            self.listed = ()
            self.current, self.own = None, {kind: None for kind in OPTIONAL}
            self._found_at = self.clock()
            raise NotServed(f"{DRA_GROUP} is not served", cluster=cluster, code=404) from error
        listed: dict[str, set[str]] = {DRA_GROUP: _versions(group)}
        self.listed = tuple(sorted(listed[DRA_GROUP]))
        resources: dict[tuple[str, str], frozenset[str]] = {}

        async def group_versions(name: str) -> set[str]:
            if name not in listed:  # another group's document (an optional kind's)
                path = f"/apis/{name}"
                try:
                    listed[name] = _versions(_decode(await self.api.get(path, time_limit=30),
                                                     path, cluster))  # fmt: skip
                except NotServed:
                    listed[name] = set()
                self.other_listed[name] = tuple(sorted(listed[name]))
            return listed[name]

        async def served(name: str, version: str) -> frozenset[str]:
            if version not in await group_versions(name):
                return frozenset()
            if (name, version) not in resources:
                path = f"/apis/{name}/{version}"
                pending: Awaitable[bytes]
                if ahead is not None and name == DRA_GROUP and version == self.preference[0]:
                    pending = ahead  # asked for with the group's document
                else:
                    pending = self.api.get(path, time_limit=30)
                try:
                    body = _decode(await pending, path, cluster)
                except NotServed:
                    body = {}
                resources[(name, version)] = frozenset(
                    str(r.get("name"))
                    for r in body.get("resources") or ()
                    if isinstance(r, dict) and r.get("name")
                )
            return resources[(name, version)]

        current = None
        for version in self.preference:
            if _DRA_PLURALS <= await served(DRA_GROUP, version):
                current = version
                break
        own: dict[str, str | None] = {}
        for kind in sorted(OPTIONAL):
            resource = BY_KIND[kind]
            own[kind] = None
            for version in resource.versions:
                if resource.plural in await served(resource.group, version):
                    own[kind] = version
                    break
        return current, own
