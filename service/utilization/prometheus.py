"""An async client of Prometheus' HTTP API: instant and range queries, answers as series.

    client = PrometheusClient(target)                 # service.utilization.config
    await client.query_range('DCGM_FI_DEV_GPU_UTIL', start, end, step)   # [(labels, points)]
    await client.query('up', at)
    await client.aclose()

Errors, translated once here (nothing else sees httpx's):

    PrometheusError                   the server could not answer a query (the model's
                                      ReadingsUnavailable, which the questions catch)
     ├── PrometheusUnreachable        connection refused, timeout, TLS
     └── PrometheusRefused            an HTTP error or `status: error` (bad query, 4xx, 5xx)

Promises: every answer is `[(labels, [(unix seconds, float)])]`, matrix or vector alike;
"NaN", "+Inf" values are kept as floats (the model drops what is not finite); the auth
headers of the target go with every request and never into a message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx

from dra_mirror.service.model.dcgm import ReadingsUnavailable

from .config import PrometheusTarget

Series = tuple[dict[str, str], list[tuple[float, float]]]


class PrometheusError(ReadingsUnavailable):
    """A query Prometheus did not answer; the message names the server and why."""


class PrometheusUnreachable(PrometheusError):
    """The server could not be reached (connection, timeout, TLS)."""


class PrometheusRefused(PrometheusError):
    """The server answered with an error (HTTP status or `status: error`)."""


class PrometheusClient:
    """One server's HTTP API, over one connection pool."""

    def __init__(
        self, target: PrometheusTarget, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.target = target
        self._http = httpx.AsyncClient(
            base_url=target.url,
            headers=dict(target.headers),
            timeout=target.timeout,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def query(self, promql: str, at: float) -> list[Series]:
        """`/api/v1/query` at `at` (unix seconds)."""
        return await self._ask("/api/v1/query", {"query": promql, "time": _stamp(at)})

    async def query_range(self, promql: str, start: float, end: float, step: float) -> list[Series]:
        """`/api/v1/query_range` from `start` to `end` every `step` seconds."""
        params = {"query": promql, "start": _stamp(start), "end": _stamp(end), "step": f"{step:g}"}
        return await self._ask("/api/v1/query_range", params)

    async def _ask(self, path: str, params: Mapping[str, str]) -> list[Series]:
        where = f"Prometheus {self.target.url}"
        try:
            answer = await self._http.post(path, data=dict(params))
        except httpx.TimeoutException:
            raise PrometheusUnreachable(
                f"{where}: no answer within {self.target.timeout:g}s"
            ) from None
        except httpx.HTTPError as error:
            raise PrometheusUnreachable(f"{where}: {type(error).__name__}: {error}") from None
        try:
            body = answer.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise PrometheusRefused(f"{where}: HTTP {answer.status_code}, not a Prometheus answer")
        if answer.status_code >= 400 or body.get("status") != "success":
            reason = body.get("error") or f"HTTP {answer.status_code}"
            raise PrometheusRefused(f"{where}: {body.get('errorType', 'error')}: {reason}")
        return _series((body.get("data") or {}).get("result") or [])


def _stamp(at: float) -> str:
    return f"{at:.3f}"


def _series(result: Sequence[dict]) -> list[Series]:
    out: list[Series] = []
    for item in result:
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        raw = item.get("values") or ([item["value"]] if item.get("value") else [])
        out.append((labels, [(float(at), float(value)) for at, value in raw]))
    return out
