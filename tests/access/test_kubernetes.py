"""Kubernetes bearer tokens end to end: the real kubernetes_asyncio client, with the token the
simulator's kubeconfig carries, asks the simulated `east` for TokenReviews and
SubjectAccessReviews; what RBAC grants in each cluster is the subject's scope."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dra_mirror.service.access.config import AccessConfig
from dra_mirror.service.access.control import AccessControl
from dra_mirror.service.access.errors import (
    AccessConfigError,
    Forbidden,
    ReviewUnavailable,
    Unauthenticated,
)
from dra_mirror.service.access.kubernetes import KubernetesSettings
from dra_mirror.service.sim.run import Simulator
from dra_mirror.service.sim.scenario import build_world, load_scenario


@pytest.fixture
async def simulated(tmp_path):
    world = build_world(load_scenario("access"))
    path = tmp_path / "kubeconfig"
    async with Simulator(world.specs, kubeconfig_path=path) as sim:
        yield sim, str(path)


async def control_for(kubeconfig: str, **settings) -> AccessControl:
    values = {"context": "east", "clusters": ("east", "west")}
    values.update(settings)
    config = AccessConfig(kubernetes=KubernetesSettings(**values), rate_limit=0)
    return await AccessControl.open(config, kubeconfig=kubeconfig)


async def test_rbac_decides_the_scope_in_every_cluster(simulated):
    _sim, kubeconfig = simulated
    control = await control_for(kubeconfig)
    try:
        alice = await control.subject("Bearer alice-token")
        assert (alice.name, alice.method) == ("alice", "kubernetes")
        assert "ml-team" in alice.groups
        assert alice.scope.allows("east", "ml") and alice.scope.allows("west", "ml")
        assert not alice.scope.allows("east", "research")
        assert alice.scope.history  # history mode "namespaces": allowed, filtered
        bob = await control.subject("Bearer bob-token")
        assert bob.scope.all_namespaces("east") and bob.scope.all_namespaces("west")
        grafana = await control.subject("Bearer grafana-east")  # a ServiceAccount token
        assert grafana.scope.allows("east") and not grafana.scope.allows("east", "ml")
        assert grafana.scope.allows("west")  # west binds the same ServiceAccount name
        assert not grafana.scope.allows("west", "ml")
        with pytest.raises(Forbidden, match="carol may list resourceclaims in no namespace"):
            await control.subject("Bearer carol-token")
        with pytest.raises(Unauthenticated, match="did not accept the token"):
            await control.subject("Bearer forged-token")
    finally:
        await control.close()


async def test_decisions_are_cached_per_token_and_shared_by_concurrent_requests(simulated):
    import asyncio

    sim, kubeconfig = simulated
    control = await control_for(kubeconfig)
    try:
        kube = control.authenticators.authenticators[0]
        requests_before = sum(s.requests for s in sim.served.values())
        found = await asyncio.gather(*(control.subject("Bearer alice-token") for _ in range(5)))
        assert {s.name for s in found} == {"alice"}
        assert kube.reviews == 1
        sent = sum(s.requests for s in sim.served.values()) - requests_before
        await control.subject("Bearer alice-token")
        assert kube.reviews == 1
        assert sum(s.requests for s in sim.served.values()) - requests_before == sent
        with pytest.raises(Unauthenticated):
            await control.subject("Bearer forged-token")
        with pytest.raises(Unauthenticated):
            await control.subject("Bearer forged-token")
        assert kube.reviews == 2  # the refusal is cached too (briefly)
    finally:
        await control.close()


async def test_history_by_rbac_and_cluster_subsets(simulated):
    _sim, kubeconfig = simulated
    control = await control_for(kubeconfig, history="rbac", clusters=())
    try:
        bob = await control.subject("Bearer bob-token")
        alice = await control.subject("Bearer alice-token")
        assert bob.scope.history and not alice.scope.history
        assert not bob.scope.allows("west")  # only the reviewing cluster counts by default
    finally:
        await control.close()


async def test_an_outage_of_the_reviewing_api_fails_closed(simulated):
    sim, kubeconfig = simulated
    control = await control_for(kubeconfig)
    try:
        sim.served["east"].apply_faults({"errors": {"code": 503, "count": 100}})
        with pytest.raises(ReviewUnavailable, match=r"cluster east: POST .*503") as refused:
            await control.subject("Bearer bob-token")
        assert "bob-token" not in str(refused.value)
        sim.served["east"].apply_faults({"errors": None})
        assert (await control.subject("Bearer bob-token")).name == "bob"  # not cached
        await sim.stop()
        with pytest.raises(ReviewUnavailable, match="cluster east"):
            await control.subject("Bearer alice-token")
    finally:
        await control.close()


def with_token(kubeconfig: str, token: str, path: Path) -> Path:
    config = yaml.safe_load(Path(kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


async def test_a_mirror_without_review_rights_says_so(simulated, tmp_path):
    _sim, kubeconfig = simulated
    weak = with_token(kubeconfig, "alice-token", tmp_path / "weak.kubeconfig")
    control = await control_for(str(weak))
    try:
        with pytest.raises(ReviewUnavailable, match=r"403 .*system:auth-delegator"):
            await control.subject("Bearer bob-token")
    finally:
        await control.close()


async def test_configuration_errors(simulated):
    _sim, kubeconfig = simulated
    with pytest.raises(AccessConfigError, match="no context 'north'"):
        await control_for(kubeconfig, context="north")
    with pytest.raises(AccessConfigError, match="no authentication is configured"):
        await AccessControl.open(AccessConfig())
    open_access = await AccessControl.open(AccessConfig(insecure_no_auth=True))
    assert open_access.insecure and "anyone who reaches this port" in open_access.describe()
    assert (await open_access.subject(None)).scope.is_admin


async def test_the_decision_cache_is_bounded_and_expires_into_a_fresh_review(simulated):
    import asyncio

    sim, kubeconfig = simulated
    control = await control_for(kubeconfig, cache_size=2, cache_ttl=0.3)
    try:
        kube = control.authenticators.authenticators[0]
        for token in ("alice-token", "bob-token", "grafana-east"):  # three subjects, room for two
            await control.subject(f"Bearer {token}")
        assert kube.reviews == 3
        await control.subject("Bearer grafana-east")
        await control.subject("Bearer bob-token")
        assert kube.reviews == 3  # the two most recent are kept
        await control.subject("Bearer alice-token")
        assert kube.reviews == 4  # the oldest was dropped: reviewed again
        assert len(kube._subjects) == 2
        await asyncio.sleep(0.4)
        sim.served["east"].apply_faults({"errors": {"code": 503, "count": 100}})
        with pytest.raises(ReviewUnavailable):  # an expired decision is never served stale
            await control.subject("Bearer alice-token")
    finally:
        await control.close()


async def test_an_outage_of_any_cluster_whose_rbac_counts_fails_closed(simulated):
    sim, kubeconfig = simulated
    control = await control_for(kubeconfig)
    try:
        sim.served["west"].apply_faults({"errors": {"code": 503, "count": 100}})
        with pytest.raises(ReviewUnavailable, match="cluster west"):  # not a narrower scope
            await control.subject("Bearer alice-token")
        sim.served["west"].apply_faults({"errors": None})
        alice = await control.subject("Bearer alice-token")
        assert alice.scope.allows("west", "ml")
    finally:
        await control.close()
