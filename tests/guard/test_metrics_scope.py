"""`/metrics` for scrapers narrower than every namespace: the DRA series of what their scope
may see — namespaced series of their namespaces, cluster-scoped series of their clusters,
namespace-wide aggregates only of clusters they see whole, none of the mirror's own."""

from __future__ import annotations

import re

import httpx
import pytest
from asgi_lifespan import LifespanManager

from dra_mirror.service.access.scope import AccessScope
from dra_mirror.service.http.metrics_scope import NAMESPACE_WIDE, scoped
from dra_mirror.service.runtime.compose import compose_app
from dra_mirror.service.settings import Settings
from dra_mirror.service.stores.memory import MemoryStore

from ..schema.conftest import load_world

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> list[tuple[str, dict[str, str]]]:
    out = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)  # type: ignore[union-attr]
            out.append((name, dict(LABEL.findall(line))))
    return out


def family(name: str) -> str:
    return re.sub(r"_(bucket|count|sum)$", "", name)


async def scrape(scope: AccessScope | None) -> tuple[str, str]:
    store = MemoryStore()
    await load_world(store)
    scopes = {"admin": AccessScope.admin(), "asker": scope}
    app = compose_app(Settings(), store=store,
                     scope_for=lambda r: scopes[r.headers.get("x-who", "admin")])  # fmt: skip
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as http:
            await http.post("/graphql", json={"query": "{ clusters { name } }"})
            everything = (await http.get("/metrics")).text
            mine = (await http.get("/metrics", headers={"x-who": "asker",
                                                        "accept-encoding": "gzip"})).text  # fmt: skip
    return everything, mine


@pytest.mark.parametrize(
    "grants",
    [
        (["east/team-a"], []),
        (["*/team-b"], []),
        (["east/*"], []),
        ([], ["west"]),
        (["west/team-a", "east/team-c"], []),
    ],
)
async def test_a_scoped_scraper_gets_exactly_the_series_its_scope_may_see(grants) -> None:
    scope = AccessScope.parse(grants[0], clusters=grants[1])
    everything, mine = await scrape(scope)
    wide = {n.decode() for n in NAMESPACE_WIDE}

    def visible(name: str, labels: dict[str, str]) -> bool:
        cluster = labels.get("cluster")
        if cluster is None:
            return False  # the mirror's own series
        if "namespace" in labels:
            return scope.allows(cluster, labels["namespace"])
        if family(name) in wide:
            return scope.all_namespaces(cluster)
        return scope.allows(cluster)

    expected = [s for s in samples(everything) if visible(*s)]
    assert samples(mine) == expected
    assert any("namespace" in labels for _, labels in expected) == bool(grants[0])
    assert not any(name.startswith("dra_mirror_graphql") for name, _ in samples(mine))


def test_label_values_are_read_with_their_escapes() -> None:
    text = (b'kube_resourceclaim_info{cluster="a\\"b",namespace="ns",resourceclaim="c"} 1\n'
            b'kube_resourceclaim_info{cluster="a\\"b",namespace="other",resourceclaim="c"} 1\n'
            b"process_cpu_seconds_total 3\n")  # fmt: skip
    scope = AccessScope.parse(['a"b/ns'])
    assert scoped(text, scope) == text.splitlines(keepends=True)[0]
