"""resource.k8s.io version discovery against the simulator's discovery documents."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_mirror.service.clusters.discovery import DraVersions
from dra_mirror.service.clusters.errors import NotServed, ServerError
from dra_mirror.service.clusters.transport import ClusterApi
from dra_mirror.service.sim.run import ClusterSpec
from tests.clusters.world import serving, small_world


@pytest.mark.parametrize(
    ("served", "chosen"),
    [
        (("v1", "v1beta2", "v1beta1"), "v1"),
        (("v1beta2", "v1beta1"), "v1beta2"),
        (("v1beta1",), "v1beta1"),
    ],
)
async def test_newest_served_version_wins(tmp_path: Path, served: tuple, chosen: str) -> None:
    async with serving(tmp_path, ClusterSpec(small_world("c"), versions=served)) as (_, [c]):
        assert await DraVersions(ClusterApi("c", c.api_client)).version() == chosen


async def test_hiccups_keep_the_last_answer_and_404s_do_not(tmp_path: Path) -> None:
    now = [0.0]
    async with serving(tmp_path, ClusterSpec(small_world("c"))) as (sim, [c]):
        versions = DraVersions(ClusterApi("c", c.api_client), max_age=10, clock=lambda: now[0])
        assert await versions.version() == "v1"
        served = sim.served["c"]
        served.apply_faults({"hideVersions": ["v1"]})
        assert await versions.version() == "v1"  # still fresh: no request made
        now[0] = 11
        served.apply_faults({"errors": {"code": 503, "count": 1, "path": "/apis/resource.k8s.io"}})
        assert await versions.version() == "v1"  # discovery failed: keep what worked
        now[0] = 22
        assert await versions.version() == "v1beta2"  # asked again: v1 is gone
        served.apply_faults({"hideVersions": ["v1", "v1beta2", "v1beta1"]})
        versions.forget("v1beta2")
        with pytest.raises(NotServed, match=r"resource.k8s.io is not served \(404\)$"):
            await versions.version()
        served.apply_faults({"hideVersions": None, "errors": {"code": 503, "count": 1}})
        with pytest.raises(ServerError):  # nothing known yet: the failure is the answer
            await versions.version()
        assert await versions.version() == "v1"


class OnlyV1alpha3:
    """A cluster too old for the mirror: its resource.k8s.io discovery lists v1alpha3 only
    (where DeviceTaintRule is served from 1.33 on); scheduling.k8s.io serves PriorityClass's
    v1 and no PodGroup."""

    cluster = "old"

    async def get(self, path: str, *, time_limit: float) -> bytes:
        if path == "/apis/resource.k8s.io":
            return b'{"kind":"APIGroup","versions":[{"version":"v1alpha3"}]}'
        if path == "/apis/resource.k8s.io/v1alpha3":
            return b'{"kind":"APIResourceList","resources":[{"name":"devicetaintrules"}]}'
        if path == "/apis/scheduling.k8s.io":
            return b'{"kind":"APIGroup","versions":[{"version":"v1"}]}'
        raise AssertionError(f"asked {path}")


async def test_a_cluster_serving_no_known_version_says_which_it_serves() -> None:
    versions = DraVersions(OnlyV1alpha3())  # type: ignore[arg-type]
    with pytest.raises(NotServed, match=r"discovery lists v1alpha3"):
        await versions.version()
    assert versions.listed == ("v1alpha3",)
    assert await versions.version_of("DeviceTaintRule") == "v1alpha3"
    with pytest.raises(NotServed, match=r"scheduling.k8s.io: podgroups is served at none of "
                       r"v1beta1, v1alpha3, v1alpha2 \(discovery lists v1\)"):  # fmt: skip
        await versions.version_of("PodGroup")


@pytest.mark.parametrize(
    ("kubernetes", "chosen"),
    [(32, None), (33, "v1alpha3"), (35, "v1alpha3"), (36, "v1beta2"), (37, "v1")],
)
async def test_device_taint_rules_are_found_at_their_own_newest_version(
    tmp_path: Path, kubernetes: int, chosen: str | None
) -> None:
    spec = ClusterSpec(small_world("c", nodes=1), versions=("v1", "v1beta2"), kubernetes=kubernetes)
    async with serving(tmp_path, spec) as (_, [c]):
        versions = DraVersions(ClusterApi("c", c.api_client))
        assert await versions.version() == "v1"  # the other kinds: as before
        if chosen is None:
            with pytest.raises(NotServed, match=r"devicetaintrules is served at none of v1, "):
                await versions.version_of("DeviceTaintRule")
        else:
            assert await versions.version_of("DeviceTaintRule") == chosen
        assert await versions.version_of("ResourceSlice") == "v1"


async def test_a_rule_version_switched_off_is_found_again_and_none_is_remembered(
    tmp_path: Path,
) -> None:
    now = [0.0]
    spec = ClusterSpec(small_world("c", nodes=1), kubernetes=37)
    async with serving(tmp_path, spec) as (sim, [c]):
        api = ClusterApi("c", c.api_client)
        versions = DraVersions(api, max_age=10, clock=lambda: now[0])
        assert await versions.version_of("DeviceTaintRule") == "v1"
        sim.served["c"].optional_versions["DeviceTaintRule"] = ()  # switched off (--runtime-config)
        versions.forget("v1", "DeviceTaintRule")  # its collection answered 404
        assert await versions.version() == "v1"  # the other kinds' answer is kept
        with pytest.raises(NotServed):
            await versions.version_of("DeviceTaintRule")
        asked = sim.served["c"].requests
        with pytest.raises(NotServed):  # remembered until max_age: no request
            await versions.version_of("DeviceTaintRule")
        assert sim.served["c"].requests == asked
        sim.served["c"].optional_versions["DeviceTaintRule"] = ("v1beta2",)
        now[0] = 11
        assert await versions.version_of("DeviceTaintRule") == "v1beta2"


class SlowDiscovery:
    """Discovery documents answered after a round trip; records what was in flight at once."""

    cluster = "slow"

    def __init__(self, listed: tuple[str, ...]) -> None:
        self.listed = listed
        self.in_flight: set[str] = set()
        self.together: set[frozenset[str]] = set()

    async def get(self, path: str, *, time_limit: float) -> bytes:
        import asyncio

        import orjson

        self.in_flight.add(path)
        self.together.add(frozenset(self.in_flight))
        await asyncio.sleep(0.01)
        self.in_flight.discard(path)
        if path == "/apis/resource.k8s.io":
            versions = [{"version": v} for v in self.listed]
            return orjson.dumps({"kind": "APIGroup", "versions": versions})
        names = ["deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"]
        return orjson.dumps({"resources": [{"name": n} for n in names]})


async def test_the_preferred_version_is_asked_for_with_the_group_and_used_only_if_listed() -> None:
    both = SlowDiscovery(("v1", "v1beta2"))
    assert await DraVersions(both).version() == "v1"  # type: ignore[arg-type]
    assert frozenset({"/apis/resource.k8s.io", "/apis/resource.k8s.io/v1"}) in both.together
    older = SlowDiscovery(("v1beta2",))  # v1 answers (a stale proxy, say) but is not listed
    assert await DraVersions(older).version() == "v1beta2"  # type: ignore[arg-type]
