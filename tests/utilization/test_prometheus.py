"""The Prometheus client: answers as series, failures as one error tree, auth on every query;
the source's one aggregated range query per metric folded into readings."""

from __future__ import annotations

import httpx
import pytest

from dra_mirror.service.model.dcgm import GPU_UTIL, METRICS, Instrument
from dra_mirror.service.utilization.config import PrometheusTarget, parse
from dra_mirror.service.utilization.prometheus import (
    PrometheusClient,
    PrometheusRefused,
    PrometheusUnreachable,
)
from dra_mirror.service.utilization.source import PrometheusSource, series_query

MATRIX = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {"metric": {"UUID": "GPU-1"}, "values": [[10, "50"], [20, "NaN"], [30, "70"]]},
        ],
    },
}


def transport(handler) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


async def test_a_range_query_with_the_targets_headers() -> None:
    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=MATRIX)

    target = PrometheusTarget("http://prom", headers={"Authorization": "Bearer t"})
    client = PrometheusClient(target, transport=transport(answer))
    series = await client.query_range("up", 0, 30, 10)
    await client.aclose()
    labels, points = series[0]
    assert labels == {"UUID": "GPU-1"}
    assert points[0] == (10.0, 50.0) and points[2] == (30.0, 70.0)
    assert seen[0].url.path == "/api/v1/query_range"
    assert seen[0].headers["authorization"] == "Bearer t"
    form = dict(httpx.QueryParams(seen[0].content.decode()))
    assert form == {"query": "up", "start": "0.000", "end": "30.000", "step": "10"}


async def test_an_instant_query_reads_a_vector() -> None:
    vector = {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": {}, "value": [5, "1"]}]},
    }
    client = PrometheusClient(
        PrometheusTarget("http://prom"),
        transport=transport(lambda r: httpx.Response(200, json=vector)),
    )
    assert await client.query("up", 5) == [({}, [(5.0, 1.0)])]
    await client.aclose()


async def test_refusals_and_unreachable_servers() -> None:
    bad = {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}
    client = PrometheusClient(
        PrometheusTarget("http://prom"),
        transport=transport(lambda r: httpx.Response(400, json=bad)),
    )
    with pytest.raises(PrometheusRefused, match="bad_data: parse error at char 3"):
        await client.query("up(", 0)
    await client.aclose()

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    client = PrometheusClient(PrometheusTarget("http://prom"), transport=transport(refuse))
    with pytest.raises(PrometheusUnreachable, match="http://prom: ConnectError"):
        await client.query("up", 0)
    await client.aclose()
    html = PrometheusClient(
        PrometheusTarget("http://prom"),
        transport=transport(lambda r: httpx.Response(502, text="<html>")),
    )
    with pytest.raises(PrometheusRefused, match="HTTP 502, not a Prometheus answer"):
        await html.query("up", 0)
    await html.aclose()


async def test_the_source_asks_once_per_metric_aggregated_by_identity() -> None:
    queries, steps = [], []

    def answer(request: httpx.Request) -> httpx.Response:
        form = dict(httpx.QueryParams(request.content.decode()))
        queries.append(form["query"])
        steps.append(form)
        return httpx.Response(200, json=MATRIX)

    config = parse({"clusters": {"east": {"url": "http://prom", "selector": 'cluster="east"'}}})
    async with PrometheusSource(config, transport=transport(answer)) as source:
        assert source.covers("east") and not source.covers("west")
        found = await source.readings("east", 0, 30)
    assert sorted(queries) == sorted(series_query(m, config.clusters["east"]) for m in METRICS)
    assert {s["step"] for s in steps} == {"60"}
    assert queries[0].startswith("max by (UUID, GPU_I_ID, GPU_I_PROFILE, dra_mig_device_uuid,")
    assert '{cluster="east"}' in queries[0]
    # NaN dropped, the points kept per metric
    assert found[Instrument("GPU-1")].of(GPU_UTIL) == [(10.0, 50.0), (30.0, 70.0)]
    # thirty days at most 10,000 points a series: Prometheus refuses more than 11,000
    steps.clear()
    async with PrometheusSource(config, transport=transport(answer)) as source:
        await source.readings("east", 0, 30 * 86400)
    assert {float(s["step"]) for s in steps} == {30 * 86400 / 10_000}
