"""The mirror's own calls to a cluster's review APIs: POST a review, list namespaces.

`ReviewApi` is the seam (one method per call the reviewer makes); `ClusterReviewApi` is it over
a kubernetes_asyncio `ApiClient` — the same clients `service.clusters.config.connect` builds
for the watchers (kubeconfig contexts or the in-cluster service account, TLS, exec plugins and
their token refresh), so the reviewer authenticates to the cluster exactly as the watchers
do. Bodies go out and come back as plain JSON (never the generated model classes).

Every failure leaves as `ReviewUnavailable`, naming the cluster and what went wrong (timeout,
refused, HTTP status and the Status reason) — never a header, a token or the kubeconfig:

* 401/403 from the cluster mean the mirror's own credentials may not create reviews (grant it
  the `system:auth-delegator` ClusterRole) or list namespaces;
* anything else that is not a 2xx JSON object is an outage of the reviewing API.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from .errors import ReviewUnavailable

if TYPE_CHECKING:  # kubernetes_asyncio and aiohttp load when Kubernetes review is configured
    from dra_mirror.service.clusters.kube_client import ApiClient

REVIEW_TIMEOUT = 5.0


class ReviewApi(Protocol):
    cluster: str

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to `path` (a review) and return the answered object."""
        ...

    async def namespaces(self) -> list[str]:
        """The names of every namespace of the cluster."""
        ...


class ClusterReviewApi:
    """`ReviewApi` over one cluster's kubernetes_asyncio client."""

    def __init__(self, cluster: str, api_client: ApiClient, *, timeout: float = REVIEW_TIMEOUT):
        self.cluster = cluster
        self.api_client = api_client
        self.timeout = timeout

    async def _call(self, method: str, path: str, body: Any = None, query: Any = None) -> Any:
        what = f"cluster {self.cluster}: {method} {path}"
        try:
            async with asyncio.timeout(self.timeout):
                response = await self.api_client.call_api(
                    path,
                    method,
                    query_params=query or [],
                    header_params={
                        "Accept": "application/json",
                        "Content-Type": "application/json",
                    },
                    body=body,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _request_timeout=self.timeout,
                )
                data = await response.read()
        except TimeoutError:
            raise ReviewUnavailable(f"{what}: no answer within {self.timeout:g} s") from None
        except (_client_error(), OSError) as error:
            raise ReviewUnavailable(f"{what}: {type(error).__name__}") from None
        except Exception as error:  # kubernetes_asyncio raises ApiException for statuses
            status = getattr(error, "status", None)
            reason = getattr(error, "reason", "") or type(error).__name__
            raise ReviewUnavailable(self._refusal(what, status, reason)) from None
        if response.status >= 300:
            raise ReviewUnavailable(self._refusal(what, response.status, _reason(data)))
        try:
            answer = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ReviewUnavailable(f"{what}: the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise ReviewUnavailable(f"{what}: the answer is not an object")
        return answer

    @staticmethod
    def _refusal(what: str, status: int | None, reason: str) -> str:
        if status in (401, 403):
            return (
                f"{what}: {status} {reason} — the mirror's own credentials may not do "
                "this (grant it system:auth-delegator and list on namespaces)"
            )
        return f"{what}: {status} {reason}".rstrip()

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call("POST", path, body=body)

    async def namespaces(self) -> list[str]:
        names: list[str] = []
        token = ""
        for _ in range(1000):  # 500 a page: a cluster with 500,000 namespaces stops here
            query = [("limit", "500")] + ([("continue", token)] if token else [])
            page = await self._call("GET", "/api/v1/namespaces", query=query)
            for item in page.get("items") or []:
                name = (item.get("metadata") or {}).get("name") if isinstance(item, dict) else None
                if isinstance(name, str):
                    names.append(name)
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                break
        return names


def _reason(data: bytes) -> str:
    """A Kubernetes Status body's reason (never echo the whole body)."""
    try:
        status = orjson.loads(data)
    except orjson.JSONDecodeError:
        return ""
    return str(status.get("reason") or "") if isinstance(status, dict) else ""


def _client_error() -> type[Exception]:
    import aiohttp  # loaded already: the ApiClient that raised it is aiohttp's

    return aiohttp.ClientError
